"""ctxd: a context daemon for LLM agents.

ctxd stores agent sessions as append-only JSONL trees in pi's session format (v3), builds the next
request's context from the active branch, compacts it, and serves all of it over JSON-RPC.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
