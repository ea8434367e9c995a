"""``ctxd demo``: writes a sample session to a temporary directory and shows what ctxd does."""

from __future__ import annotations

import os
import sys
import tempfile
import time
from typing import Any

from ctxd.cli.render import render_context, render_tree
from ctxd.context.live import live_context
from ctxd.context.openai import to_openai
from ctxd.store.create import create_session
from ctxd.store.listing import list_sessions
from ctxd.tree.session import Session


def _say(text: str = "") -> None:
    print(text, flush=True)


def _heading(text: str) -> None:
    _say()
    _say(f"== {text} " + "=" * max(0, 72 - len(text)))


def _user(text: str) -> dict[str, Any]:
    return {"type": "message", "message": {"role": "user", "content": text, "timestamp": int(time.time() * 1000)}}


def _assistant(
    text: str, calls: list[tuple[str, str, dict[str, Any]]] | None = None, *, total: int = 0
) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if text:
        content.append({"type": "text", "text": text})
    for call_id, name, arguments in calls or []:
        content.append({"type": "toolCall", "id": call_id, "name": name, "arguments": arguments})
    usage = {"input": total - 200, "output": 200, "cacheRead": 0, "cacheWrite": 0, "totalTokens": total}
    return {
        "type": "message",
        "message": {
            "role": "assistant",
            "content": content,
            "provider": "anthropic",
            "model": "claude-sonnet-4-5",
            "usage": usage,
            "stopReason": "toolUse" if calls else "stop",
            "timestamp": int(time.time() * 1000),
        },
    }


def _result(call_id: str, name: str, text: str, *, error: bool = False) -> dict[str, Any]:
    return {
        "type": "message",
        "message": {
            "role": "toolResult",
            "toolCallId": call_id,
            "toolName": name,
            "content": [{"type": "text", "text": text}],
            "isError": error,
            "timestamp": int(time.time() * 1000),
        },
    }


FILE_BODY = "\n".join(f"export function step{i}(x: number) {{ return x + {i}; }}" for i in range(60))


SYSTEM_PROMPT_TOKENS = 2_400


def write_sample(root: str) -> Session:
    """A small but real session: three tool-loop turns, a label and a session name.

    Assistant usage is what a provider would report: the system prompt plus everything so far.
    """
    path = create_session(root, "/home/dev/calc")
    session = Session.open(path)
    session.append([{"type": "model_change", "provider": "anthropic", "modelId": "claude-sonnet-4-5"}])
    session.append([{"type": "session_info", "name": "Fix the calculator's rounding"}])
    turns = [
        ("The calculator rounds 2.675 to 2.67. Fix rounding in src/round.ts; never change the public API.", "t1"),
        ("Also add a test for negative numbers, please use vitest.", "t2"),
        ("Now make the CLI print results with two decimals.", "t3"),
    ]

    def total() -> int:
        ctx = live_context(session).context()
        return SYSTEM_PROMPT_TOKENS + ctx.estimatedTokens

    for n, (request, tag) in enumerate(turns):
        session.append([_user(request)])
        session.append(
            [_assistant("Let me look at the code.", [(f"{tag}a", "read", {"path": f"src/file{n}.ts"})], total=total())]
        )
        session.append([_result(f"{tag}a", "read", FILE_BODY)])
        edit = {"path": f"src/file{n}.ts", "oldText": "x +", "newText": "x -"}
        session.append([_assistant("", [(f"{tag}b", "edit", edit)], total=total())])
        session.append([_result(f"{tag}b", "edit", "Successfully replaced text.")])
        session.append([_assistant("", [(f"{tag}c", "bash", {"command": "npx vitest run"})], total=total())])
        session.append([_result(f"{tag}c", "bash", "✓ 12 tests passed")])
        session.append([_assistant(f"Done: step {n + 1} is fixed and the tests pass.", total=total())])
    ids = session.path_ids()
    session.append([{"type": "label", "targetId": ids[9], "label": "first fix"}])
    return session


def run_demo() -> int:
    with tempfile.TemporaryDirectory(prefix="ctxd-demo-") as root:
        _heading("1. a pi-format session, written by ctxd")
        session = write_sample(root)
        _say(f"wrote {session.path}")
        _say(f"  mode {oct(os.stat(session.path).st_mode & 0o777)}, {len(session.file)} entries")
        for summary in list_sessions([root]):
            _say(f"  listed: {summary.name!r} ({summary.entries} entries, cwd {summary.cwd})")

        _heading("2. the tree (* = active path, ◀ = leaf; long runs collapsed)")
        for line in render_tree(session, 6):
            _say(line)

        _heading("3. the context for the next request (pi's rules)")
        ctx = live_context(session).context()
        for line in render_context(ctx):
            _say(line)
        openai = to_openai(ctx.agent_messages())
        _say(f"as OpenAI chat messages: {len(openai)} messages, roles {[m['role'] for m in openai][:8]}…")

        from ctxd.cli import demo_more

        demo_more.run(session, root, _say, _heading)

        _heading("8. the daemon: a scripted client, and another process writing the file")
        from ctxd.cli import demo_daemon

        demo_daemon.run(session.path, root, _say)

        _heading("9. the leaf survives a restart (pi lands on it too)")
        session.refresh()  # the daemon and the other process wrote to it meanwhile
        reopened = Session.open(session.path)
        _say(f"leaf after reopening: {reopened.leaf_id()} (was {session.leaf_id()})")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(run_demo())
