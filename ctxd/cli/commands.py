"""The CLI's commands: each parses nothing, calls the layers below, and prints."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from ctxd.cli.render import dump as _dump
from ctxd.cli.render import render_context, render_rows, use_color
from ctxd.cli.session_arg import open_session
from ctxd.context.live import live_context
from ctxd.context.openai import to_openai
from ctxd.context.view import cap, project
from ctxd.redact import redact_json
from ctxd.tree.session import Session, session_name


def cmd_sessions(args: argparse.Namespace) -> int:
    """What the daemon's ``session/list`` lists, from the same configuration (:mod:`ctxd.service.listing`)."""
    # Imported here: the other commands need neither cattrs (protocol) nor asyncio (registry).
    from ctxd.service.config import load_cli_config
    from ctxd.service.listing import list_served
    from ctxd.service.protocol import capped_row

    config, problems = load_cli_config()
    for problem in problems:
        print(f"ctxd: configuration: {problem}", file=sys.stderr)
    roots: list[str] | None = None
    if args.root:  # these roots only (a folder of sessions or transcripts, or an opencode database)
        roots = [os.path.abspath(r) for r in args.root]
        databases = [r for r in roots if os.path.isfile(r)]
        config.opencode_databases += [d for d in databases if d not in config.opencode_databases]
        config.roots = [r for r in roots if r not in databases] or config.roots
    found = list_served(config, roots, os.path.abspath(args.cwd) if args.cwd else None, keep=True)
    agent = AGENT_ALIASES.get(args.agent, args.agent)
    if agent:
        found = [s for s in found if s.agent == agent]
    if args.json:
        _dump({"roots": roots or config.all_roots, "sessions": [capped_row(s.to_json()) for s in found]})
        return 0
    if not found:
        where = ", ".join(roots or [*config.all_roots, *config.opencode_databases]) or "no folder"
        print(f"no {agent + ' ' if agent else ''}sessions under {where}")
    for s in found:
        title = cap(s.name) or cap(s.title) or "(empty)"
        copy = ", ctxd's copy" if s.archived else ""
        print(f"{s.path}\n    {title}  [{s.agent}{copy}, {s.entries} entries, cwd {s.cwd}]")
    return 0


AGENT_ALIASES = {"claude-code": "claude"}
"""``--agent`` also takes the names ``ctxd setup`` uses."""


def cmd_tree(args: argparse.Namespace) -> int:
    session = open_session(args.file)
    rows, _ = project(session, collapse=0 if args.all else args.collapse)
    if args.json:
        _dump(
            {
                "path": session.path,
                "sessionId": session.file.session_id,
                "name": session_name(session),
                "leafId": session.leaf_id(),
                "entries": len(session.file),
                "rows": [r.to_json() for r in rows],
                "diagnostics": [d.to_json() for d in session.diagnostics()],
            }
        )
        return 0
    name = f' "{session_name(session)}"' if session_name(session) else ""
    print(f"session {session.file.session_id}{name}  cwd {session.file.cwd}")
    print(f"{len(session.file)} entries, leaf {session.leaf_id()}  (* = active path)")
    for line in render_rows(rows, color=use_color()):
        print(line)
    for d in session.diagnostics():
        print(f"! line {d.line}: {d.message}", file=sys.stderr)
    return 0


def cmd_context(args: argparse.Namespace) -> int:
    session = open_session(args.file)
    ctx = live_context(session).context(args.leaf)
    messages = ctx.agent_messages()
    if args.truncate_window:
        from ctxd.context.truncate import is_oversized, limit_chars, truncate_tool_result

        limit = limit_chars(args.truncate_window)
        messages = [truncate_tool_result(m, limit) if is_oversized(m, limit) else m for m in messages]
    out = ctx.to_json(with_messages=args.format == "pi")
    if args.format == "openai":
        problems: list[str] = []
        out["openai"] = to_openai(messages, problems)
        out["diagnostics"].extend({"line": None, "message": p} for p in problems)
    if args.count_model:
        from ctxd.context.exact import exact_tokens

        total, each = exact_tokens(messages, args.count_model)
        out["exactTokens"] = {"model": args.count_model, "tokens": total, "perMessage": each}
    if args.json:
        _dump(out)
    elif args.format == "openai":
        _dump(out["openai"])
    else:
        for line in render_context(ctx):
            print(line)
    return 0


def cmd_branch(args: argparse.Namespace) -> int:
    session = open_session(args.file)
    old = session.leaf_id()
    if args.summarize:
        from ctxd.compaction.branching import branch_with_summary

        result = branch_with_summary(session, args.entry, model=args.model)
        out = result.to_json()
    else:
        marker = session.move_leaf(args.entry)
        out = {"leafId": args.entry, "previousLeafId": old, "markerId": marker}
    if args.json:
        _dump(redact_json(out))  # the failures a provider answered with
    else:
        print(f"leaf moved {old} -> {args.entry}")
    return 0


def cmd_fork(args: argparse.Namespace) -> int:
    session = open_session(args.file)
    path = session.fork(args.entry)
    if args.json:
        _dump({"path": path, "parentSession": session.path, "entryId": args.entry})
    else:
        print(path)
    return 0


def cmd_label(args: argparse.Namespace) -> int:
    session = open_session(args.file)
    session.file.require(args.entry)
    entry: dict[str, Any] = {"type": "label", "targetId": args.entry}
    if args.text:
        entry["label"] = args.text
    session.append([entry])
    print(f"labelled {args.entry}: {args.text!r}" if args.text else f"cleared label of {args.entry}")
    return 0


def cmd_pin(args: argparse.Namespace, pinned: bool = True) -> int:
    from ctxd.context.pins import pin_entry

    session = Session.open(args.file)
    (pin_id,) = session.append([pin_entry(session.file, args.entry, pinned)])
    if args.json:
        _dump({"pinEntryId": pin_id, "entryId": args.entry, "pinned": pinned})
    else:
        print(f"{'pinned' if pinned else 'unpinned'} {args.entry}")
    return 0


def cmd_unpin(args: argparse.Namespace) -> int:
    return cmd_pin(args, pinned=False)


def cmd_compact(args: argparse.Namespace) -> int:
    from ctxd.cli.compact import run_compact

    return run_compact(args)


def cmd_check(args: argparse.Namespace) -> int:
    from ctxd.context.check import check_session
    from ctxd.context.repair import repair

    session = open_session(args.file)
    report = repair(session) if args.repair else check_session(session)
    if args.json:
        _dump(report.to_json())
        return report.exit_code
    state = "clean" if report.clean else f"{len(report.findings)} finding(s)"
    print(f"{report.path}: {report.entries} entries, {report.lines} lines, leaf {report.leafId}: {state}")
    for f in report.findings:
        where = f"line {f.line}" if f.line is not None else "..."
        entry = f" (entry {f.entryId})" if f.entryId else ""
        print(f"  {where} [{f.severity}] {f.kind}: {f.message}{entry}")
    if report.repair is not None:
        done = report.repair
        if done.get("leafTo"):
            print(f"repair: leaf moved {done['leafFrom']} -> {done['leafTo']} (marker {done['appended'][-1]})")
        if done.get("copy"):
            print(f"repair: repaired copy written to {done['copy']} (the file itself is unchanged)")
        if not done.get("leafTo") and not done.get("copy"):
            print("repair: nothing to repair by appending or in a copy")
    return report.exit_code


def cmd_demo(args: argparse.Namespace) -> int:
    from ctxd.cli.demo import run_demo

    return run_demo()


def cmd_setup(args: argparse.Namespace) -> int:
    from ctxd.cli.setup import cmd_setup as run_setup

    return run_setup(args)


def cmd_doctor(args: argparse.Namespace) -> int:
    from ctxd.cli.setup import cmd_doctor as run_doctor

    return run_doctor(args)


def cmd_stats(args: argparse.Namespace) -> int:
    from ctxd.cli.stats import run_stats

    return run_stats(args)
