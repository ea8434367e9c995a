"""``ctxd team init | sync | status | grant | revoke``: team history on PostgreSQL from the command line.

``init``, ``grant`` and ``revoke`` are the team database admin's (its owner, or a role with CREATEROLE); ``sync``
and ``status`` are everyone's. The team database comes from the configuration (``"team": {"dsn": ...}``) or
``CTXD_TEAM_DSN``, ``--dsn`` for the admin's commands; the password from PGPASSWORD or ~/.pgpass. Every DSN
printed is masked. Every ``ctxd`` run builds the parser (``ctxd hook`` too): nothing heavy is imported at the top.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ctxd.cli.errors import count
from ctxd.cli.setup import Subcommands


def add_parsers(sub: Subcommands) -> None:
    t = sub.add_parser(
        "team",
        help="team history on PostgreSQL: init, sync, status, grant, revoke (docs/team.md)",
        description="Publish every session's history to a team's PostgreSQL database and manage it (docs/team.md).",
    )
    tsub = t.add_subparsers(dest="team_command", required=True)
    i = tsub.add_parser("init", help="create or migrate the schema, its policies and version (the database owner)")
    i.add_argument("--dsn", help="the team database (default: the configured one)")
    i.add_argument("--retention-months", type=count(0), help="drop month partitions older than this (0: keep all)")
    i.add_argument("--grant", action="append", default=[], metavar="ROLE=PROJECT,...", help="grant projects to a role")
    i.add_argument("--json", action="store_true")
    s = tsub.add_parser("sync", help="index, then publish everything queued now, and wait for it")
    s.add_argument("--timeout", type=count(1), default=60, help="seconds to wait for another publisher (default 60)")
    s.add_argument("--json", action="store_true")
    st = tsub.add_parser("status", help="what is queued for the team database, and what the last pass did")
    st.add_argument("--json", action="store_true")
    g = tsub.add_parser("grant", help="let a role (and its members) publish and search projects ('*': all)")
    g.add_argument("role")
    g.add_argument("projects", nargs="+")
    g.add_argument("--dsn")
    g.add_argument("--json", action="store_true")
    r = tsub.add_parser("revoke", help="take projects (default: all) from a role")
    r.add_argument("role")
    r.add_argument("projects", nargs="*")
    r.add_argument("--dsn")
    r.add_argument("--json", action="store_true")


def _grants(given: list[str]) -> dict[str, list[str]]:
    from ctxd.errors import TeamError

    out: dict[str, list[str]] = {}
    for item in given:
        role, _, projects = item.partition("=")
        names = [p.strip() for p in projects.split(",") if p.strip()]
        if not role.strip() or not names:
            raise TeamError("config", f"--grant {item!r}: expected ROLE=PROJECT[,PROJECT...]")
        out.setdefault(role.strip(), []).extend(names)
    return out


def _print(args: argparse.Namespace, result: dict[str, Any], lines: list[str]) -> None:
    from ctxd.cli.render import dump

    if args.json:
        dump(result)
    else:
        for line in lines:
            print(line)


def cmd_team(args: argparse.Namespace) -> int:
    import asyncio

    from ctxd.service.config import load_cli_config

    config, problems = load_cli_config()
    for problem in problems:
        print(f"ctxd: configuration: {problem}", file=sys.stderr)
    command = args.team_command
    if command in ("init", "grant", "revoke"):
        return _admin(args, args.dsn or config.team.dsn)
    from ctxd.service.service import Service

    service = Service(config)
    if command == "sync":
        done = asyncio.run(_closing(service, service.team.team_sync(float(args.timeout))))
        lines = [f"published {done['sent']} entries in {done['seconds']} s ({done['queued']} still queued)"]
        if done["skipped"]:
            lines.append(f"{done['skipped']} entries of projects that are not published stay local")
        if done["expired"]:
            lines.append(f"{done['expired']} entries older than the server's retention were not sent")
        _print(args, done, lines)
        return 0
    status = service.team.team_status()
    asyncio.run(service.close())
    _print(args, status, _status_lines(status))
    return 0


async def _closing(service: Any, work: Any) -> Any:
    try:
        return await work
    finally:
        await service.close()


def _status_lines(status: dict[str, Any]) -> list[str]:
    if not status["enabled"]:
        return ['team history is off: set "team": {"dsn": ..., "projects": [...]} in the configuration (docs/team.md)']
    projects = ", ".join(status["projects"]) or "none (nothing is published)"
    lines = [
        f"team database: {status['dsn']}",
        f"publishing as {status['user']}@{status['machine']}; projects: {projects}",
        f"queued: {status['queued']} entries",
    ]
    lines += [f"  {name}: {n}" for name, n in status["queuedByProject"].items()]
    last = status["lastPass"]
    if last:
        lines.append(f"last pass: {last['sent']} entries sent in {last['seconds']} s")
    error = status["lastError"]
    if error:
        lines.append(f"last error ({error['kind']}): {error['message']}")
    return lines


def _admin(args: argparse.Namespace, dsn: str) -> int:
    from ctxd.team import driver, migrate

    conn = driver.connect(dsn)
    try:
        if args.team_command == "init":
            lines = migrate.init(conn, retention_months=args.retention_months, grants=_grants(args.grant))
        elif args.team_command == "grant":
            lines = migrate.grant(conn, args.role, args.projects)
        else:
            lines = migrate.revoke(conn, args.role, args.projects or None)
    except Exception as exc:
        raise driver.classify(exc, dsn) from None
    finally:
        conn.close()
    lines.insert(0, f"team database: {driver.where(dsn)}")
    _print(args, {"database": driver.where(dsn), "done": lines[1:]}, lines)
    return 0
