"""What the tests share and are not tests: entry factories (pi v3 lines), broken lines, random histories, the
facts the ledger tests plant, the summary's shape, real file-system faults, a second process holding a lock, the
agents' pinned releases, Codex's requests against ctxd's context, and a real PostgreSQL server."""
