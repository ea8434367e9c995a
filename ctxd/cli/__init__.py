"""The ``ctxd`` command line. The only place (with the demo) that prints to stdout.

``ctxd hook EVENT`` runs on Claude Code's hooks, so this module imports nothing at its top but ``os`` and
``sys``: the parser, logging and the commands are imported when another command needs them.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import argparse


def _parser() -> argparse.ArgumentParser:
    import argparse

    from ctxd import __version__
    from ctxd.cli.errors import HELP, Parser, count

    p = Parser(
        prog="ctxd",
        description="Context daemon for LLM agents (pi session format).",
        epilog=HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--version", action="version", version=f"ctxd {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser(
        "sessions", help="list every agent's sessions ctxd serves (pi, Claude Code, Codex, opencode), newest first"
    )
    s.add_argument(
        "--root",
        action="append",
        help="list only this folder of sessions or transcripts, or this opencode database (default: every one "
        "configured, as the daemon's session/list)",
    )
    s.add_argument("--cwd", help="only sessions started in this directory")
    s.add_argument(
        "--agent", choices=("pi", "claude", "claude-code", "codex", "opencode"), help="only this agent's sessions"
    )
    s.add_argument("--json", action="store_true")

    t = sub.add_parser("tree", help="show a session's tree")
    t.add_argument("file")
    t.add_argument("--all", action="store_true", help="do not collapse linear runs")
    t.add_argument("--collapse", type=count(0), default=8, help="collapse linear runs longer than this (default 8)")
    t.add_argument("--json", action="store_true")

    c = sub.add_parser("context", help="build the context for the next request")
    c.add_argument("file")
    c.add_argument("--leaf", help="entry id to build from (default: the session's leaf)")
    c.add_argument("--format", choices=("pi", "openai"), default="pi")
    c.add_argument("--json", action="store_true")
    c.add_argument("--truncate-window", type=count(1), help="truncate oversized tool results for this window")
    c.add_argument("--count-model", help="count tokens exactly with this model's tokenizer (offline, via litellm)")

    b = sub.add_parser("branch", help="move the leaf to an entry (persisted; pi agrees)")
    b.add_argument("file")
    b.add_argument("entry")
    b.add_argument("--summarize", action="store_true", help="summarise the abandoned branch")
    b.add_argument("--model", help="summarise with this model through litellm (default: offline)")
    b.add_argument("--json", action="store_true")

    f = sub.add_parser("fork", help="copy the path to an entry into a new session file")
    f.add_argument("file")
    f.add_argument("entry")
    f.add_argument("--json", action="store_true")

    lab = sub.add_parser("label", help="label an entry (an empty text clears it)")
    lab.add_argument("file")
    lab.add_argument("entry")
    lab.add_argument("text")

    for name, what in (
        ("pin", "pin a message: compactions carry it verbatim after the summary"),
        ("unpin", "unpin it"),
    ):
        pin = sub.add_parser(name, help=what)
        pin.add_argument("file")
        pin.add_argument("entry")
        pin.add_argument("--json", action="store_true")

    k = sub.add_parser("compact", help="compact a session (or plan it with --dry-run)")
    k.add_argument("file")
    k.add_argument("--model", help="summarise with this model through litellm (default: offline)")
    k.add_argument("--api-base")
    k.add_argument("--instructions", help="extra focus for the summary")
    k.add_argument("--dry-run", action="store_true", help="plan only: write nothing, call no model")
    k.add_argument("--keep-recent-tokens", type=count(0))
    k.add_argument("--json", action="store_true")
    k.add_argument("--fork-root", help="where a pi fork of a Claude Code / Codex transcript goes (default: pi's root)")

    ck = sub.add_parser("check", help="check a session file (fsck): exit 0 clean, 1 findings, 2 unusable")
    ck.add_argument("file")
    ck.add_argument("--json", action="store_true")
    ck.add_argument(
        "--repair", action="store_true", help="append a leaf marker past a broken branch; write FILE.repaired.jsonl"
    )

    sub.add_parser("demo", help="show what ctxd does on a sample session")

    st = sub.add_parser("stats", help="what fills a session's context: the window by part, top entries, timeline")
    st.add_argument("file")
    st.add_argument("--json", action="store_true", help="the composition, as the daemon's context/composition")
    st.add_argument("--ascii", action="store_true", help="plain ASCII (the default when stdout is not a terminal)")
    st.add_argument("--top", type=count(0), default=10, help="how many of the heaviest entries (default 10)")
    st.add_argument("--window", type=count(1), help="the context window (default: the configured one)")
    st.add_argument("--width", type=count(20), default=72, help="columns of the bar and the timeline (default 72)")

    hk = sub.add_parser("hook", help="run one Claude Code hook (JSON on stdin); see integrations/claude-code")
    hk.add_argument("event", help="PreCompact, SessionStart, PostCompact, UserPromptSubmit, PostToolUse, SessionEnd")
    hk.add_argument("--agent", choices=("claude", "codex"), default="claude", help="whose hook (default: claude)")

    sub.add_parser("codex-prompt", help="print ctxd's compaction prompt for Codex's experimental_compact_prompt_file")

    srv = sub.add_parser("serve", help="run the daemon (JSON-RPC over stdio)")
    srv.add_argument("--tcp", help="HOST:PORT on loopback, for debugging")
    srv.add_argument("--config", help="config file (JSON)")

    from ctxd.cli.setup import add_parsers as add_setup_parsers

    add_setup_parsers(sub)

    se = sub.add_parser("search", help="search every session's history (SQLite FTS5 index in ~/.local/share/ctxd)")
    se.add_argument("query", help='words, "a phrase", OR, NOT, prefix* (FTS5); other text is searched as words')
    se.add_argument("--session", help="only this session (an id or a file)")
    se.add_argument("--limit", type=count(1), default=20)
    se.add_argument("--root", action="append", help="pi session root (default: the configured roots)")
    se.add_argument("--json", action="store_true")
    se.add_argument("--team", action="store_true", help="search the team's database (PostgreSQL; docs/team.md)")
    for flag, what in (("project", "project"), ("agent", "agent (pi, claude, codex, opencode)"), ("user", "user")):
        se.add_argument(f"--{flag}", help=f"with --team: only this {what}")
    se.add_argument("--since", help="with --team: hits at or after this time (ISO 8601)")
    se.add_argument("--until", help="with --team: hits before this time (ISO 8601)")

    from ctxd.cli.team import add_parsers as add_team_parsers

    add_team_parsers(sub)

    sub.add_parser("mcp", help="serve the Model Context Protocol over stdio (search_history, expand, session_facts)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    given = sys.argv[1:] if argv is None else list(argv)
    if len(given) == 2 and given[0] == "hook" and not given[1].startswith("-"):
        # Claude Code waits for hooks: no parser, and only what the event needs is imported (it never fails).
        from ctxd.cli.hook import run as run_hook

        return run_hook(given[1])
    import logging

    from ctxd.cli.errors import run
    from ctxd.redact import redact_logs

    args = _parser().parse_args(argv)
    if args.command == "serve":
        # Straight to the daemon: the CLI's other commands (and what they import) are not needed.
        from ctxd.server import serve

        return serve(tcp=args.tcp, config_path=args.config)
    if args.command == "codex-prompt":
        from ctxd.service.codex_hooks import compact_prompt

        print(compact_prompt())
        return 0
    if args.command == "hook" and args.agent == "codex":
        from ctxd.cli.hook import run as run_hook

        return run_hook(args.event, agent="codex")
    if args.command == "hook":
        # Claude Code waits for hooks: only what the event needs is imported, and it never fails.
        from ctxd.cli.hook import run as run_hook

        return run_hook(args.event)
    if args.command == "mcp":
        from ctxd.mcp import serve as serve_mcp  # the only package that imports the MCP SDK

        return serve_mcp()
    # Warnings (a model attempt that failed, ...) as one line each, never showing a secret.
    # CTXD_LOG_LEVEL sets ctxd's own level; libraries stay at warnings.
    level = logging.getLevelName(os.environ.get("CTXD_LOG_LEVEL", "WARNING").upper())
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="ctxd: %(message)s")
    logging.getLogger("ctxd").setLevel(level if isinstance(level, int) else logging.WARNING)
    redact_logs()
    if args.command == "search":
        from ctxd.cli.search import cmd_search

        return run(cmd_search, args)
    if args.command == "team":
        from ctxd.cli.team import cmd_team

        return run(cmd_team, args)
    from ctxd.cli import commands

    return run(getattr(commands, f"cmd_{args.command}"), args)


__all__ = ["main"]
