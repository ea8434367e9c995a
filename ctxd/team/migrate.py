"""``ctxd team init``, ``grant`` and ``revoke``, and the schema version check every connection makes.

``init`` is run once by the database's owner (or an admin with CREATEROLE): it creates the group role
:data:`~ctxd.team.schema.GROUP_ROLE` if needed, the schema, its functions and policies, the partitions of this
month and the next, records the schema version and the retention, and drops the partitions past it. Run again it
changes nothing but what it is told (retention, grants). A database whose schema is newer than this ctxd knows is
refused, by ``init`` and by every publisher and search, with what to do.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from ctxd.errors import TeamError
from ctxd.team import driver
from ctxd.team.schema import (
    BTREE_GIN,
    CREATE,
    FUNCTIONS,
    GROUP,
    GROUP_ROLE,
    INDEXES_BTREE_GIN,
    INDEXES_PLAIN,
    SCHEMA_VERSION,
    SECURITY,
)

_LOCK = 7_352_004_131
"""The advisory lock ``init`` holds (two admins running it at once take turns)."""


def schema_version(conn: Any) -> int | None:
    """The ctxd schema version of the database (None: there is no ctxd schema)."""
    with conn.cursor() as cur:
        cur.execute("SELECT to_regclass('ctxd.meta') IS NOT NULL")
        if not cur.fetchone()[0]:
            return None
        cur.execute("SELECT value FROM ctxd.meta WHERE key = 'schema_version'")
        row = cur.fetchone()
    return int(row[0]) if row else None


def check(conn: Any, dsn: str) -> int:
    """The database's schema version, if this ctxd can use it; else TeamError saying what to do."""
    where = driver.where(dsn)
    try:
        version = schema_version(conn)
    except Exception as exc:
        raise driver.classify(exc, dsn) from None
    finally:
        if not conn.autocommit:
            conn.rollback()
    if version is None:
        raise TeamError(
            "schema", f"the team database at {where} has no ctxd schema: run `ctxd team init` (as its owner)"
        )
    if version > SCHEMA_VERSION:
        raise TeamError(
            "schemaNewer",
            f"the team database at {where} has ctxd schema version {version}, newer than this ctxd knows "
            f"({SCHEMA_VERSION}): upgrade ctxd on this machine",
        )
    if version < SCHEMA_VERSION:
        raise TeamError(
            "schema", f"the team database at {where} has ctxd schema version {version}: run `ctxd team init` to migrate"
        )
    return version


def _months(today: dt.date) -> list[dt.date]:
    first = today.replace(day=1)
    following = (first + dt.timedelta(days=32)).replace(day=1)
    return [first, following]


def _indexes(cur: Any, btree_gin: bool | None) -> str:
    """Make the full-text index: (project, tsv) with ``btree_gin`` where the server has it and this role may create
    it (``btree_gin`` None: if so; False: never), else tsv alone and (project, ts). What was made, in a line."""
    why = "not asked for"
    if btree_gin is not False:
        cur.execute("SELECT EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'btree_gin')")
        why = "the extension is not installed on the server"
        if cur.fetchone()[0]:
            cur.execute("SAVEPOINT btree_gin")
            try:
                cur.execute(BTREE_GIN)
                cur.execute(INDEXES_BTREE_GIN)
            except Exception as exc:  # e.g. no CREATE right on the database: the plain indexes do
                cur.execute("ROLLBACK TO SAVEPOINT btree_gin")
                why = f"the extension could not be created: {str(exc).strip().splitlines()[0]}"
            else:
                cur.execute("RELEASE SAVEPOINT btree_gin")
                return "full-text index: GIN on (project, tsv) with btree_gin"
    cur.execute(INDEXES_PLAIN)
    return f"full-text index: GIN on tsv and a B-tree on (project, ts) (no btree_gin: {why})"


def init(
    conn: Any,
    *,
    retention_months: int | None = None,
    grants: dict[str, list[str]] | None = None,
    btree_gin: bool | None = None,
) -> list[str]:
    """Create or bring up to date the schema; what it did, one line each. ``btree_gin``: see :func:`_indexes`."""
    done: list[str] = []
    with conn.transaction(), conn.cursor() as cur:
        cur.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK,))
        before = schema_version(conn)
        if before is not None and before > SCHEMA_VERSION:
            raise TeamError(
                "schemaNewer",
                f"this database has ctxd schema version {before}, newer than this ctxd knows ({SCHEMA_VERSION}): "
                "upgrade ctxd before running init",
            )
        cur.execute(GROUP)
        cur.execute(CREATE)
        indexes = _indexes(cur, btree_gin)
        cur.execute(FUNCTIONS)
        cur.execute(SECURITY)
        cur.execute(
            "INSERT INTO ctxd.meta VALUES ('schema_version', %s)"
            " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (str(SCHEMA_VERSION),),
        )
        cur.execute("INSERT INTO ctxd.meta VALUES ('retention_months', '0') ON CONFLICT (key) DO NOTHING")
        done.append(
            f"schema ctxd version {SCHEMA_VERSION}: "
            + ("created" if before is None else "up to date" if before == SCHEMA_VERSION else f"migrated from {before}")
        )
        done.append(indexes)
        if retention_months is not None:
            cur.execute("UPDATE ctxd.meta SET value = %s WHERE key = 'retention_months'", (str(retention_months),))
        cur.execute("SELECT value FROM ctxd.meta WHERE key = 'retention_months'")
        months = int(cur.fetchone()[0])
        done.append(f"retention: {f'{months} months' if months else 'keep everything'}")
        for month in _months(dt.datetime.now(dt.UTC).date()):
            cur.execute("SELECT ctxd.ensure_month(%s)", (month,))
        cur.execute("SELECT ctxd.drop_expired()")
        dropped = cur.fetchone()[0]
        if dropped:
            done.append(f"dropped {dropped} partition(s) past the retention")
        for role, projects in (grants or {}).items():
            done += _grant(conn, cur, role, projects)
    return done


def _grant(conn: Any, cur: Any, role: str, projects: list[str]) -> list[str]:
    cur.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,))
    if cur.fetchone() is None:
        raise TeamError("config", f"no role {role!r} on the team server: create it first (CREATE ROLE ... LOGIN)")
    cur.execute(f"GRANT {GROUP_ROLE} TO {driver.ident(conn, role)}")
    cur.executemany(
        "INSERT INTO ctxd.grants VALUES (%s, %s) ON CONFLICT DO NOTHING", [(role, project) for project in projects]
    )
    return [f"{role} sees {', '.join(projects)}"]


def grant(conn: Any, role: str, projects: list[str]) -> list[str]:
    """Let ``role`` (and its members) publish and search these projects (``*``: every project)."""
    with conn.transaction(), conn.cursor() as cur:
        return _grant(conn, cur, role, projects)


def revoke(conn: Any, role: str, projects: list[str] | None) -> list[str]:
    """Take these projects (None: all) from ``role``; a role left with none leaves the group role."""
    with conn.transaction(), conn.cursor() as cur:
        if projects is None:
            cur.execute("DELETE FROM ctxd.grants WHERE role = %s", (role,))
        else:
            cur.execute("DELETE FROM ctxd.grants WHERE role = %s AND project = ANY(%s)", (role, projects))
        cur.execute("SELECT array_agg(project ORDER BY project) FROM ctxd.grants WHERE role = %s", (role,))
        left = cur.fetchone()[0] or []
        if not left:
            cur.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,))
            if cur.fetchone() is not None:
                cur.execute(f"REVOKE {GROUP_ROLE} FROM {driver.ident(conn, role)}")
        return [f"{role} sees {', '.join(left) if left else 'nothing'}"]
