"""Claude Code from npm (the release scripts/versions.env pins) with the ctxd plugin, offline against a fake
Anthropic server."""
