"""Team history: what the local history index holds, published to PostgreSQL and searched there.

A layer above :mod:`ctxd.history` (it reads the local index and its spool) that only the service, the CLI and
``ctxd mcp`` call. The parts:

- :mod:`~ctxd.team.settings`: the ``team`` configuration (DSN, projects, user, machine).
- :mod:`~ctxd.team.projects`: which project a session belongs to, and whether it is published.
- :mod:`~ctxd.team.spool`: the spool in the history database (filled by a trigger as entries are indexed).
- :mod:`~ctxd.team.batch`: a spool batch as rows for the server (redacted, deduplicated, timed).
- :mod:`~ctxd.team.schema`: the server's schema (partitioned tables, full-text index, row-level security).
- :mod:`~ctxd.team.driver`: the one module that imports psycopg 3 (``ctxd[team]``), and what its errors mean.
- :mod:`~ctxd.team.migrate`: ``ctxd team init`` (schema, grants, retention) and the schema version check.
- :mod:`~ctxd.team.publish`: one publishing pass (COPY into a staging table, then an idempotent upsert).
- :mod:`~ctxd.team.worker`: the daemon's background publisher (never on a request's path).
- :mod:`~ctxd.team.query`: team search and expand on the server.
- :mod:`~ctxd.team.doctor`: ``ctxd doctor``'s checks of all of the above.

Nothing here imports psycopg at import time: without the ``team`` extra ctxd runs as before, and configuring a
team says how to install it.
"""
