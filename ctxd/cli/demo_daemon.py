"""The demo's daemon chapter: a scripted client drives ``ctxd serve`` while another process
writes to the session file, and the notifications are printed as they arrive."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

from ctxd.client import CtxdClient

Say = Callable[[str], None]


def _short(params: Any) -> str:
    if not isinstance(params, dict):
        return str(params)
    keep = {k: v for k, v in params.items() if k not in ("session",)}
    if "ids" in keep:
        keep["ids"] = keep["ids"][:3]
    return json.dumps(keep)[:140]


async def _drive(path: str, root: str, say: Say) -> None:
    started = time.perf_counter()
    options = {"roots": [root], "watch": True, "autoCompact": False}
    async with CtxdClient(initialization_options=options, stderr=subprocess.DEVNULL) as client:
        methods = client.capabilities.get("experimental", {}).get("ctxd", {}).get("methods", [])
        say(
            f"started {client.server_info.get('name')} {client.server_info.get('version')} "
            f"in {(time.perf_counter() - started) * 1000:.0f} ms; methods: {', '.join(methods)}"
        )

        def printer(method: str) -> Callable[[Any], None]:
            return lambda params: say(f"  <- {method} {_short(params)}")

        for method in ("session/didChange", "session/didCreate", "context/usage", "compaction/status"):
            client.on_notification(method, printer(method))
        listed = await client.request("session/list", {})
        say(f"-> session/list: {len(listed['sessions'])} session(s)")
        opened = await client.request("session/open", {"session": path})
        say(
            f"-> session/open: {opened['entries']} entries, leaf {opened['leafId']}, "
            f"{opened['usage']['tokens']:,}/{opened['usage']['window']:,} tokens"
        )

        say("another process appends a line to the file (as an agent would):")
        line = {
            "type": "message",
            "id": "feedc0de",
            "parentId": opened["leafId"],
            "timestamp": "2026-11-22T12:00:00.000Z",
            "message": {"role": "user", "content": "From another terminal: what changed?"},
        }
        code = f"open({path!r}, 'a').write({json.dumps(line)!r} + '\\n')"
        since = client.mark()
        subprocess.run([sys.executable, "-c", code], check=True)
        await client.wait_for("session/didChange", lambda p: "feedc0de" in p.get("ids", []), since=since)

        say("-> session/append through the daemon:")
        reply = await client.request(
            "session/append",
            {
                "session": path,
                "messages": [{"role": "assistant", "content": [{"type": "text", "text": "The rounding."}]}],
            },
        )
        say(f"   ids {reply['ids']}, compaction due: {reply['compactionDue']} ({reply['reason']})")
        await asyncio.sleep(0.05)
        plan = await client.request("compact", {"session": path, "dryRun": True, "keepRecentTokens": 200})
        say(
            f"-> compact (dry run): keep from line {plan['firstKeptLine']}, summarise {plan['messagesToSummarize']}"
            f" messages (+{plan['turnPrefixMessages']} of a split turn), {plan['tokensBefore']:,}"
            f" -> ~{plan['estimatedTokensAfter']:,} tokens"
        )
        ledger = await client.request("session/ledger", {"session": path})
        say(f"-> session/ledger: {len(ledger['compactions'])} compaction(s) on record")
    say(f"daemon shut down cleanly (exit code {client.returncode})")


def run(path: str, root: str, say: Say) -> None:
    asyncio.run(_drive(path, root, say))
