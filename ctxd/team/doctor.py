"""``ctxd doctor``'s checks of team history: which of the usual faults stops it, and what to do about each.

One check after the other, each only if the one before passed: the driver (psycopg), the DSN, the connection
(unreachable server, refused credentials, no such database), the schema (missing, or newer than this ctxd), the
grants (which projects this role sees), and this machine's spool (what waits, the last error).
"""

from __future__ import annotations

import contextlib
from typing import Any

import attrs

from ctxd.errors import TeamError
from ctxd.team.settings import TeamSettings, masked_dsn

FIXES = {
    "driver": "pip install 'ctxd[team]' (or: pipx inject ctxd 'psycopg[binary]')",
    "config": "fix team.dsn (postgresql://USER@HOST:PORT/DATABASE) in the configuration or CTXD_TEAM_DSN",
    "unreachable": "check the host and port in team.dsn, that the server runs and accepts connections from here",
    "auth": "check the user in team.dsn and its password in PGPASSWORD or ~/.pgpass (mode 0600)",
    "database": "check the database name in team.dsn",
    "schema": "ask the database's owner to run `ctxd team init`",
    "schemaNewer": "upgrade ctxd on this machine",
    "permission": "ask the team database's admin: ctxd team grant ROLE PROJECT",
}


@attrs.frozen
class TeamCheck:
    check: str
    ok: bool
    detail: str
    fix: str = ""


def _failed(check: str, exc: TeamError) -> TeamCheck:
    return TeamCheck(check, False, f"{exc.kind}: {exc.message}", FIXES.get(exc.kind, ""))


def run(settings: TeamSettings, queued: int | None = None, last_error: Any = None) -> list[TeamCheck]:
    """The checks, in order, up to the first that fails."""
    from ctxd.team import driver, migrate

    out: list[TeamCheck] = []
    try:
        driver.check_dsn(settings.dsn)
    except TeamError as exc:
        return [_failed("driver" if exc.kind == "driver" else "dsn", exc)]
    out.append(TeamCheck("dsn", True, masked_dsn(settings.dsn)))
    at = driver.where(settings.dsn)
    try:
        conn = driver.connect(settings.dsn, timeout=settings.connect_timeout, autocommit=True)
    except TeamError as exc:
        return [*out, _failed("connection", exc)]
    try:
        out.append(TeamCheck("connection", True, f"connected to {at}"))
        try:
            version = migrate.check(conn, settings.dsn)
        except TeamError as exc:
            return [*out, _failed("schema", exc)]
        out.append(TeamCheck("schema", True, f"ctxd schema version {version}"))
        try:
            seen = conn.execute("SELECT ctxd.projects_of(current_user)").fetchone()
        except Exception as exc:
            return [*out, _failed("grants", driver.classify(exc, settings.dsn))]
        projects = list(seen[0]) if seen else []
        if projects:
            out.append(TeamCheck("grants", True, f"this role sees: {', '.join(projects)}"))
        else:
            out.append(TeamCheck("grants", False, "this role is granted no project", FIXES["permission"]))
    finally:
        with contextlib.suppress(Exception):
            conn.close()
    if queued is not None:
        detail = f"{queued} entries queued"
        if last_error:
            detail += f"; the last pass failed ({last_error.get('kind')}): {last_error.get('message')}"
        out.append(TeamCheck("spool", True, detail))
    return out
