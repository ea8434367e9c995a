"""Drive the ctxd daemon from Python with ``ctxd.client``.

Spawns ``ctxd serve`` with a temporary session root, creates a session, appends a short coding
conversation, prints the session tree and the context built for a model, then previews a
compaction (dry run) and runs one (offline summariser, no API key needed) — printing every
notification the daemon sends as it arrives.

    python examples/client_example.py
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

try:
    import ctxd  # noqa: F401
except ImportError:  # running from a checkout without ctxd installed
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [sys.path[0], os.environ.get("PYTHONPATH")]))

from ctxd.client import ClientError, CtxdClient, Notification


def show_notification(note: Notification) -> None:
    params = note.params if isinstance(note.params, dict) else {}
    if note.method == "$/progress":
        value = params.get("value", {})
        text = value.get("message") or value.get("title") or ""
        detail = f"{value.get('kind')} {text} {value.get('percentage', '')}"
    elif note.method == "compaction/status":
        tokens = f"{params.get('tokensBefore')} -> {params.get('tokensAfter')}"
        detail = f"{params.get('state')} trigger={params.get('trigger')} tokens {tokens}"
    elif note.method == "context/usage":
        detail = f"{params.get('tokens')} tokens of {params.get('window')} ({params.get('percent')}%)"
    elif note.method == "session/didChange":
        detail = f"{len(params.get('ids', []))} new entries, leaf {params.get('leafId')} ({params.get('origin')})"
    else:
        detail = os.path.basename(str(params.get("session", ""))) or json.dumps(note.params)[:80]
    print(f"  ~ {note.method}: {detail}")


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text, "timestamp": 1_700_000_000_000}


def assistant(text: str, tokens: int, calls: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": [{"type": "text", "text": text}, *(calls or [])],
        "provider": "example",
        "model": "example-model",
        "stopReason": "toolUse" if calls else "stop",
        "usage": {"input": tokens, "output": 50, "cacheRead": 0, "cacheWrite": 0, "totalTokens": tokens + 50},
        "timestamp": 1_700_000_000_000,
    }


def conversation() -> list[dict[str, Any]]:
    read = {"type": "toolCall", "id": "call_1", "name": "read", "arguments": {"path": "src/parser.py"}}
    edit = {"type": "toolCall", "id": "call_2", "name": "edit", "arguments": {"path": "src/parser.py"}}
    filler = " The parser walks the token stream and builds the tree one node at a time." * 12
    return [
        user("The parser crashes on empty input. Can you find out why?" + filler),
        assistant("Let me read the parser first." + filler, 900, [read]),
        {
            "role": "toolResult",
            "toolCallId": "call_1",
            "toolName": "read",
            "content": [{"type": "text", "text": "def parse(tokens):\n    first = tokens[0]\n" + filler}],
            "isError": False,
            "timestamp": 1_700_000_000_000,
        },
        assistant(
            "`parse` reads tokens[0] without checking for an empty list. I will guard it." + filler, 1400, [edit]
        ),
        {
            "role": "toolResult",
            "toolCallId": "call_2",
            "toolName": "edit",
            "content": [{"type": "text", "text": "edited src/parser.py"}],
            "isError": False,
            "timestamp": 1_700_000_000_000,
        },
        user("Great. Now add a test for it." + filler),
        assistant("Added tests/test_parser.py::test_empty_input; it passes." + filler, 2100),
    ]


async def main() -> int:
    with tempfile.TemporaryDirectory() as root:
        options = {"roots": [root], "watch": True, "autoCompact": False, "compaction": {"keepRecentTokens": 300}}
        async with CtxdClient(initialization_options=options) as client:
            info = client.server_info
            print(f"connected to {info.get('name')} {info.get('version')}")
            client.on_notification("*", show_notification)

            created = await client.request("session/create", {"cwd": "/tmp/example-project", "name": "parser fix"})
            path = created["path"]
            print(f"created session {created['sessionId']}\n  {path}")

            appended = await client.request("session/append", {"session": path, "messages": conversation()})
            print(f"appended {len(appended['ids'])} messages; context {appended['usage']['tokens']} tokens")

            tree = await client.request("session/tree", {"session": path})
            print(f"\nsession tree ({tree['total']} rows):")
            for row in tree["rows"]:
                mark = "*" if row.get("onActivePath") else " "
                print(f"  {mark} {row.get('id', '…')} {row.get('role', row['type']):<12} {row.get('preview', '')[:60]}")

            built = await client.request("context/build", {"session": path, "format": "openai"})
            print(f"\ncontext for the model: {len(built['openai'])} messages, {built['contextTokens']} tokens")
            for message in built["openai"]:
                text = message.get("content") or json.dumps(message.get("tool_calls"))
                print(f"  {message['role']:<9} {str(text)[:70]}")

            plan = await client.request("compact", {"session": path, "dryRun": True})
            print(
                f"\ndry run: summarise {plan['messagesToSummarize']} messages, keep {plan['keptMessages']} "
                f"from {plan['firstKeptEntryId']}; "
                f"about {plan['tokensBefore']} -> {plan['estimatedTokensAfter']} tokens"
            )

            print("\ncompacting:")
            mark = client.mark()
            result = await client.request("compact", {"session": path, "workDoneToken": "example"})
            status = await client.wait_for("compaction/status", lambda s: s["state"] != "running", since=mark)
            await client.wait_for("$/progress", lambda x: x["value"]["kind"] == "end", since=mark)
            print(f"compaction {status['state']}: entry {result['entryId']} via {result['path']}")
            print("summary:\n  " + "\n  ".join(result["summary"].splitlines()[:8]))

            after = await client.request("context/build", {"session": path})
            print(f"\ncontext now: {len(after['messages'])} messages, about {after['estimatedTokens']} tokens")

            try:
                await client.request("session/open", {"session": "/etc/passwd"})
            except ClientError as exc:
                print(f"\nas expected, outside the roots: error {exc.code}: {exc.message}")
        print(f"daemon exited with code {client.returncode}")
        return 0 if client.returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
