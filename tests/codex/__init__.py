"""Codex 0.169.0 from npm, offline against a fake Responses API server."""
