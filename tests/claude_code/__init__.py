"""Claude Code 2.1.330 from npm with the ctxd plugin, offline against a fake Anthropic server."""
