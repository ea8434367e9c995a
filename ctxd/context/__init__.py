"""Building the next request's context from a session's active branch."""
