"""Codex from npm (the release scripts/versions.env pins), offline against a fake Responses API server."""
