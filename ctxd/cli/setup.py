"""``ctxd setup NAME`` and ``ctxd doctor``: the command line over :mod:`ctxd.setup`.

Every ``ctxd`` run builds the parser, ``ctxd hook`` too, so this module imports nothing heavy at the top.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ctxd.service.config import Config
    from ctxd.setup import doctor as doctor_types

NAMES = "claude-code | pi | vscode | neovim | codex | opencode"
"""The integrations ``ctxd setup`` knows (:data:`ctxd.setup.INTEGRATIONS`; a test keeps the two the same)."""


class Subcommands(Protocol):
    """What ``ArgumentParser.add_subparsers`` returns."""

    def add_parser(self, name: str, **kwargs: Any) -> argparse.ArgumentParser: ...


def add_parsers(sub: Subcommands) -> None:
    names = NAMES
    s = sub.add_parser(
        "setup",
        help="install ctxd's integration for an agent or editor (with this ctxd's absolute path)",
        description=f"Install ctxd's integration: {names}. Prints exactly what it changed; running it again "
        "changes nothing. The integration runs this ctxd by its absolute path, from a copy in "
        "$XDG_DATA_HOME/ctxd (never the clone).",
    )
    s.add_argument("integration", metavar="INTEGRATION", help=NAMES)
    s.add_argument("--dry-run", action="store_true", help="say what would change, change nothing")
    s.add_argument("--uninstall", action="store_true", help="remove it and put the settings files back as they were")
    s.add_argument("--json", action="store_true")
    s.add_argument(
        "--compact-prompt",
        action="store_true",
        help="codex: also make ctxd's prompt Codex's compaction prompt (experimental_compact_prompt_file)",
    )

    d = sub.add_parser("doctor", help="check every installed integration end to end; exit 1 on a problem")
    d.add_argument("--json", action="store_true")


def cmd_setup(args: argparse.Namespace) -> int:
    from ctxd.cli.render import dump
    from ctxd.setup import INTEGRATIONS, SetupError, setup
    from ctxd.setup.base import Context, ctxd_executable

    if args.integration not in INTEGRATIONS:
        raise SetupError(f"no integration named {args.integration!r}: ctxd setup {NAMES}")
    ctx = Context(os.environ, ctxd_executable(), dry_run=args.dry_run, compact_prompt=args.compact_prompt)
    lines = setup(args.integration, ctx, uninstall=args.uninstall)
    if args.json:
        dump({"integration": args.integration, "ctxd": ctx.ctxd, "dryRun": ctx.dry_run, "changes": lines})
    else:
        for line in lines:
            print(line)
    return 0


def cmd_doctor(args: argparse.Namespace) -> int:
    from ctxd.cli.render import dump
    from ctxd.setup import doctor
    from ctxd.setup.base import Context, ctxd_executable
    from ctxd.store import native

    ctx = Context(os.environ, ctxd_executable())
    config, config_checks = _configuration()
    checks = doctor.run(ctx) + config_checks + _team_checks(config)
    ok = all(c.ok for c in checks)
    scanner = native.describe()
    if args.json:
        report = {"ok": ok, "ctxd": ctx.ctxd, "version": ctx.version, "checks": [c.to_json() for c in checks]}
        dump({**report, "nativeScanner": native.available(), "scanner": scanner})
        return 0 if ok else 1
    if not [c for c in checks if c.integration not in ("config", "team")]:
        print(f"no integration is installed: `ctxd setup {NAMES}`")
    for c in checks:
        print(f"{'ok  ' if c.ok else 'FAIL'} {c.integration}: {c.check}: {c.detail}")
        if not c.ok and c.fix:
            print(f"     fix: {c.fix}")
    print(f"scanner: {scanner}")
    if not ok:
        print(f"ctxd doctor: {sum(not c.ok for c in checks)} problem(s)", file=sys.stderr)
    return 0 if ok else 1


def _configuration() -> tuple[Config, list[doctor_types.Check]]:
    """The CLI's configuration, and a failed check for each value of the config file or the environment that was
    not taken (the daemon, which reads them the same way, logs the same words)."""
    from ctxd.service.config import load_cli_config
    from ctxd.setup.doctor import Check

    config, problems = load_cli_config()
    fix = "correct or remove it (until then it is skipped, and the value named after 'using' is in effect)"
    return config, [Check("config", "options", False, problem, fix) for problem in problems]


def _team_checks(config: Config) -> list[doctor_types.Check]:
    """Team history's checks (ctxd.team.doctor), when a team database is configured."""
    from ctxd.setup.doctor import Check

    if not config.team.enabled:
        return []
    from ctxd.errors import CtxdError
    from ctxd.service.service import Service
    from ctxd.team import doctor as team_doctor

    queued, error = None, None
    try:
        status = Service(config).team.team_status()
        queued, error = status["queued"], status["lastError"]
    except (CtxdError, OSError):
        pass
    return [Check("team", c.check, c.ok, c.detail, c.fix) for c in team_doctor.run(config.team, queued, error)]
