"""Record real exchanges with ``ctxd serve`` for docs/protocol.md.

    python tests/server/protocol_examples.py                      # print every example
    python tests/server/protocol_examples.py --update docs/protocol.md

Each example is a list of the JSON-RPC messages on the wire, both ways, recorded through
``ctxd.client``'s trace.  ``--update`` replaces the code block after each
``<!-- example: NAME -->`` marker in the document.  Strings longer than 240 characters are
shortened to their start and "…(+N chars)"; nothing else is changed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from fakes.openai_server import FakeOpenAIServer, slow  # noqa: E402

from ctxd.client import ClientError, CtxdClient  # noqa: E402

BASE = Path("/tmp/ctxd-protocol-examples")
WHY = "It happens when the editor sends an empty buffer on startup, and the traceback ends in parse()."
HOW = "The lexer returns an empty list for an empty buffer, so the parser should return an empty Module."
TEST = "Use pytest, and cover a buffer that holds only whitespace and comments as well."
DONE = "Both cases pass now: tests/test_parser.py::test_empty_input and ::test_blank_input."
ROOT = BASE / "sessions"
_DAMAGED_LINES: list[Any] = [
    {"type": "session", "version": 3, "id": "0199d1c2-5d2a-7a10-8c3b-3f6b2d9e4a11",
     "timestamp": "2026-01-01T09:00:00.000Z", "cwd": "/home/me/damaged"},
    {"type": "message", "id": "a1000001", "parentId": None, "timestamp": "2026-01-01T09:00:00.000Z",
     "message": {"role": "user", "content": "Read the config.", "timestamp": 1767258000000}},
    {"type": "message", "id": "a1000002", "parentId": "a1000001", "timestamp": "2026-01-01T09:00:05.000Z",
     "message": {"role": "assistant", "content": [{"type": "toolCall", "id": "call_1", "name": "read",
                 "arguments": {"path": "config.toml"}}], "stopReason": "toolUse", "timestamp": 1767258005000}},
    '{"type":"message","id":"a1000003","parentId":"a1000002","mess',
    {"type": "message", "id": "a1000004", "parentId": "a1000003", "timestamp": "2026-01-01T09:00:09.000Z",
     "message": {"role": "assistant", "content": [{"type": "text", "text": "It sets port 8080."}],
                 "stopReason": "stop", "timestamp": 1767258009000}},
    "",
]  # fmt: skip
DAMAGED = "".join((x if isinstance(x, str) else json.dumps(x, separators=(",", ":"))) + "\n" for x in _DAMAGED_LINES)
"""A session whose tool result line was torn (a writer died mid-line, its line terminated later):
the next entry's parent is missing, a blank line follows."""
MAX_STRING = 240


def shorten(value: Any) -> Any:
    if isinstance(value, str) and len(value) > MAX_STRING:
        return value[:200] + f"…(+{len(value) - 200} chars)"
    if isinstance(value, list):
        return [shorten(v) for v in value]
    if isinstance(value, dict):
        return {k: shorten(v) for k, v in value.items()}
    return value


class Recorder:
    """Collects the wire messages of the current example."""

    def __init__(self) -> None:
        self.examples: dict[str, list[tuple[str, dict[str, Any]]]] = {}
        self.current: list[tuple[str, dict[str, Any]]] | None = None
        self.keep: Callable[[str, dict[str, Any]], bool] = lambda d, m: True

    def trace(self, direction: str, message: dict[str, Any]) -> None:
        if self.current is not None and self.keep(direction, message):
            self.current.append((direction, json.loads(json.dumps(message))))

    def start(self, name: str, keep: Callable[[str, dict[str, Any]], bool] | None = None) -> None:
        self.current = self.examples.setdefault(name, [])
        self.keep = keep or (lambda d, m: True)

    def stop(self) -> None:
        self.current = None


def only(*methods: str) -> Callable[[str, dict[str, Any]], bool]:
    """Keep requests/responses, and notifications of these methods only."""
    return lambda d, m: "id" in m or m.get("method") in methods


def msg(role: str, text: str, **extra: Any) -> dict[str, Any]:
    if role == "user":
        return {"role": "user", "content": text, "timestamp": 1767261600000}
    return {
        "role": "assistant",
        "content": [{"type": "text", "text": text}],
        "provider": "anthropic",
        "model": "claude-sonnet-4-5",
        "stopReason": extra.pop("stopReason", "stop"),
        "timestamp": 1767261605000,
        **extra,
    }


def usage(total: int) -> dict[str, Any]:
    return {"input": total - 40, "output": 40, "cacheRead": 0, "cacheWrite": 0, "totalTokens": total}


async def record(rec: Recorder) -> None:
    shutil.rmtree(BASE, ignore_errors=True)
    ROOT.mkdir(parents=True)
    with FakeOpenAIServer(default_text="## Goal\nFix the parser crash on empty input.") as llm:
        options = {
            "roots": [str(ROOT)],
            "watch": True,
            "autoCompact": True,
            "hooks": {"compactWillRun": True},
            "compaction": {"contextWindow": 32000, "reserveTokens": 4000, "keepRecentTokens": 60},
        }
        env = {  # no config file, and no default roots from this machine
            "CTXD_CONFIG": str(BASE / "none.json"),
            "PI_CODING_AGENT_DIR": str(BASE / "none"),
            "CLAUDE_CONFIG_DIR": str(BASE / "none"),
            "CODEX_HOME": str(BASE / "none"),
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        }
        client = CtxdClient(initialization_options=options, env=env, trace=rec.trace, stderr=asyncio.subprocess.DEVNULL)
        rec.start("initialize")
        await client.start()
        rec.stop()
        client.on_request("compact/willRun", lambda params: None)

        async def call(name: str, method: str, params: Any, keep: Any = None, settle: float = 0.3) -> Any:
            rec.start(name, keep)
            try:
                return await client.request(method, params)
            except ClientError:
                return None
            finally:
                await asyncio.sleep(settle)
                rec.stop()

        created = await call("session/create", "session/create", {"cwd": "/home/me/parser", "name": "parser fix"})
        path = created["path"]
        first = await call(
            "session/append",
            "session/append",
            {
                "session": path,
                "messages": [
                    msg("user", "The parser crashes on empty input. " + WHY),
                    msg(
                        "assistant",
                        "parse() reads tokens[0] without a check; I will add a guard. " + HOW,
                        usage=usage(1450),
                    ),
                ],
            },
        )
        ids = first["ids"]
        await call(
            "session/append entries",
            "session/append",
            {
                "session": path,
                "entries": [{"type": "model_change", "provider": "openai", "modelId": "gpt-5"}],
                "messages": [msg("user", "Also add a test. " + TEST)],
                "parentId": ids[1],
            },
            keep=only(),
        )
        await client.request(
            "session/append",
            {"session": path, "messages": [msg("assistant", "Added test_empty_input. " + DONE, usage=usage(1900))]},
        )
        await call("session/list", "session/list", {"cwd": "/home/me/parser"})
        await call("session/open", "session/open", {"session": created["sessionId"]})
        await call("session/tree", "session/tree", {"session": path, "limit": 3})
        await call("session/entry", "session/entry", {"session": path, "entryId": ids[0]})
        await call(
            "session/label", "session/label", {"session": path, "entryId": ids[0], "label": "bug report"}, keep=only()
        )
        await call("session/fork", "session/fork", {"session": path, "entryId": ids[1]})
        await call("session/stats", "session/stats", {"session": path})
        await call("context/build", "context/build", {"session": path})
        await call(
            "context/build openai", "context/build", {"session": path, "format": "openai", "includeMessages": False}
        )

        big = await client.request("session/create", {"cwd": "/home/me/logs"})
        await client.request(
            "session/append",
            {
                "session": big["path"],
                "messages": [
                    msg("user", "What is in the build log?"),
                    msg(
                        "assistant",
                        "",
                        stopReason="toolUse",
                        content=[
                            {"type": "toolCall", "id": "call_1", "name": "read", "arguments": {"path": "build.log"}}
                        ],
                    ),
                    {
                        "role": "toolResult",
                        "toolCallId": "call_1",
                        "toolName": "read",
                        "content": [{"type": "text", "text": "\n".join(f"step {i}: ok" for i in range(3000))}],
                        "isError": False,
                        "timestamp": 1767261606000,
                    },
                ],
            },
        )
        await call(
            "context/build truncated",
            "context/build",
            {
                "session": big["path"],
                "format": "openai",
                "truncateToolResults": True,
                "contextWindow": 8000,
                "includeMessages": False,
            },
        )
        held = await client.request("context/build", {"session": big["path"], "includeMessages": False})
        await client.request(
            "session/append",
            {"session": big["path"], "messages": [msg("assistant", "The build passed: 3000 steps, all ok.")]},
        )
        await call(
            "context/build since",
            "context/build",
            {"session": big["path"], "sinceLeafId": held["leafId"], "sinceRevision": held["revision"]},
        )

        await call("compact dryRun", "compact", {"session": path, "dryRun": True})
        await call("compact", "compact", {"session": path, "workDoneToken": "compact-1"}, settle=0.5)
        await call("session/ledger", "session/ledger", {"session": path})
        await call("session/facts", "session/facts", {"session": path})

        # Branching: plain, then with a summary of the branch left behind.
        await client.request(
            "session/append", {"session": path, "messages": [msg("user", "Now refactor the lexer. " + WHY)]}
        )
        await call("branch", "branch", {"session": path, "entryId": ids[1]})
        await client.request(
            "session/append",
            {
                "session": path,
                "messages": [msg("user", "Try a regex lexer."), msg("assistant", "Rewrote lex() with re.finditer.")],
            },
        )
        await call("branch summarize", "branch", {"session": path, "entryId": ids[1], "summarize": True})

        # An agent's own compaction, branch summary and tool results (pi's extension): nothing written.
        await call(
            "compact/summarize",
            "compact/summarize",
            {
                "messages": [
                    msg("user", "The parser crashes on empty input. " + WHY),
                    msg(
                        "assistant",
                        "",
                        stopReason="toolUse",
                        content=[{"type": "toolCall", "id": "c1", "name": "read", "arguments": {"path": "parser.py"}}],
                    ),
                    {
                        "role": "toolResult",
                        "toolCallId": "c1",
                        "toolName": "read",
                        "content": [{"type": "text", "text": "def parse(tokens):\n    return tokens[0]"}],
                        "isError": False,
                        "timestamp": 1767261606000,
                    },
                ],
                "previousSummary": None,
                "fileOps": {"read": ["parser.py"], "written": [], "edited": []},
                "reason": "threshold",
                "firstKeptEntryId": "a1b2c3d4",
                "tokensBefore": 30500,
                "settings": {
                    "model": "openai/gpt-4o-mini",
                    "apiBase": llm.url,
                    "apiKey": "sk-...",
                    "reserveTokens": 4000,
                },
                "modelWindow": 128000,
                "workDoneToken": "pi-compact-1",
            },
            keep=only("$/progress"),
        )
        await call(
            "branch/summarize",
            "branch/summarize",
            {
                "entries": [
                    {"type": "message", "id": "e1", "parentId": None, "message": msg("user", "Try a regex lexer.")},
                    {"type": "message", "id": "e2", "parentId": "e1", "message": msg("assistant", "Rewrote lex().")},
                ],
                "instructions": "Say whether the regex lexer worked.",
            },
        )
        await call(
            "context/truncate",
            "context/truncate",
            {
                "messages": [
                    {
                        "role": "toolResult",
                        "toolCallId": "call_1",
                        "toolName": "bash",
                        "content": [{"type": "text", "text": "\n".join(f"step {i}: ok" for i in range(3000))}],
                        "isError": False,
                        "timestamp": 1767261606000,
                    }
                ],
                "contextWindow": 8000,
            },
        )

        # Errors.
        await call("error invalid params", "session/tree", {"session": path, "limit": "ten"})
        await call("error missing field", "session/open", {})
        await call("error unknown session", "session/open", {"session": "/etc/passwd"})
        await call("error unknown entry", "session/entry", {"session": path, "entryId": "00000000"})
        await call("error invalid entry", "session/append", {"session": path, "messages": [{"content": "no role"}]})
        bad = ROOT / "broken.jsonl"
        bad.write_text('{"type": "message", "id": "aaaaaaaa"}\n')
        await call("error bad header", "session/open", {"session": str(bad)}, keep=only())
        bad.unlink()
        await asyncio.sleep(0.6)
        await call(
            "error nothing to compact",
            "compact",
            {"session": path, "keepRecentTokens": 100000},
            keep=only("compaction/status"),
        )
        await call("error unknown method", "session/rename", {"session": path})
        await call("error second initialize", "initialize", {"capabilities": {}})

        # Auto-compaction: the threshold (32000 - 4000), then a context overflow.
        auto = await client.request("session/create", {"cwd": "/home/me/auto"})
        await client.request(
            "session/append",
            {
                "session": auto["path"],
                "messages": [msg("user", "Summarise the design doc. " * 20), msg("assistant", "Done. " * 40)],
            },
        )
        rec.start("auto threshold", only("compaction/status", "context/usage", "compact/willRun"))
        mark = client.mark()
        await client.request(
            "session/append",
            {
                "session": auto["path"],
                "messages": [msg("user", "Next section."), msg("assistant", "Here it is.", usage=usage(29000))],
            },
        )
        await client.wait_for("compaction/status", lambda s: s["state"] != "running", since=mark)
        await asyncio.sleep(0.3)
        rec.stop()
        rec.start("auto overflow", only("compaction/status"))
        mark = client.mark()
        await client.request(
            "session/append",
            {
                "session": auto["path"],
                "messages": [
                    msg("user", "And the appendix, in full. " * 20),
                    msg(
                        "assistant",
                        "",
                        stopReason="error",
                        errorMessage="prompt is too long: 204109 tokens > 200000 maximum",
                    ),
                ],
            },
        )
        await client.wait_for("compaction/status", lambda s: s["state"] != "running", since=mark)
        await asyncio.sleep(0.3)
        rec.stop()

        # What fills the context and how it grew (two compactions, an overflow); followed from then on.
        await call("context/composition", "context/composition", {"session": auto["path"], "top": 3})
        rec.start("context/compositionChanged", only("context/compositionChanged"))
        mark = client.mark()
        await client.request(
            "session/append", {"session": auto["path"], "messages": [msg("user", "Thanks. Now the index, please.")]}
        )
        await client.wait_for("context/compositionChanged", lambda c: True, since=mark)
        await asyncio.sleep(0.3)
        rec.stop()

        # The hook: the client supplies the summary.
        client.on_request("compact/willRun", lambda params: {"summary": "## Goal\nSummary written by the client."})
        await client.request(
            "session/append",
            {
                "session": path,
                "messages": [msg("user", "Next: the CLI flags. " + WHY), msg("assistant", "Listed them. " + HOW)],
            },
        )
        await call("compact hook", "compact", {"session": path}, keep=only("compact/willRun", "compaction/status"))
        client.on_request("compact/willRun", lambda params: None)

        # Files written by another process.
        await client.request("session/open", {"session": path})
        leaf = (await client.request("session/open", {"session": path}))["leafId"]
        rec.start("external append", only("session/didChange", "context/usage"))
        line = {
            "type": "message",
            "id": "5eed5eed",
            "parentId": leaf,
            "timestamp": "2026-01-01T10:00:00.000Z",
            "message": msg("user", "(typed in another agent)"),
        }
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(line) + "\n")
        await client.wait_for("context/usage", lambda u: u["leafId"] == "5eed5eed")
        rec.stop()
        other = ROOT / "--home-me-other--" / "2026-01-01T10-00-00-000Z_0b5e55ed-aaaa-7bbb-8ccc-000000000001.jsonl"
        rec.start("external create and delete", only("session/didCreate", "session/didDelete"))
        other.parent.mkdir()
        await asyncio.sleep(1.5)  # the watcher picks up the new directory
        header = {
            "type": "session",
            "version": 3,
            "id": "0b5e55ed-aaaa-7bbb-8ccc-000000000001",
            "timestamp": "2026-01-01T10:00:00.000Z",
            "cwd": "/home/me/other",
        }
        other.write_text(json.dumps(header) + "\n")
        await client.wait_for("session/didCreate", lambda n: n["session"] == str(other))
        other.unlink()
        await client.wait_for("session/didDelete", lambda n: n["session"] == str(other))
        rec.stop()

        # Cancelling a compaction that waits for a (slow) model.
        await client.close()
        options["compaction"] = {
            **options["compaction"],
            "model": "openai/gpt-4o-mini",
            "apiBase": llm.url,
            "apiKey": "sk-...",
        }
        options["hooks"] = {}
        client = CtxdClient(initialization_options=options, env=env, trace=rec.trace, stderr=asyncio.subprocess.DEVNULL)
        await client.start()
        await client.request(
            "session/append",
            {
                "session": path,
                "messages": [msg("user", "More work. " * 30), msg("assistant", "Done. " * 30), msg("user", "Thanks.")],
            },
        )
        llm.script(slow(5))
        rec.start("cancel", only("compaction/status", "$/cancelRequest"))
        mark = client.mark()
        task = asyncio.create_task(client.request("compact", {"session": path}))
        await client.wait_for("compaction/status", lambda s: s["state"] == "running", since=mark)
        await asyncio.sleep(0.3)
        task.cancel()
        try:
            await client.wait_for("compaction/status", lambda s: s["state"] == "cancelled", since=mark)
        except TimeoutError:
            print([n for n in client.notifications[mark:]], file=sys.stderr)
            raise
        await asyncio.sleep(0.5)
        rec.stop()
        rec.start("shutdown")
        await client.close()
        rec.stop()

        # session/check on a damaged file (a daemon of its own: the examples above keep their ids).
        client = CtxdClient(initialization_options=options, env=env, trace=rec.trace, stderr=asyncio.subprocess.DEVNULL)
        await client.start()
        damaged = ROOT / "--home-me-damaged--" / "damaged.jsonl"
        damaged.parent.mkdir(parents=True, exist_ok=True)
        damaged.write_text(DAMAGED)
        await call("session/check", "session/check", {"session": str(damaged), "repair": True}, keep=only())
        await client.close()

        # session/pin (a daemon of its own too).
        client = CtxdClient(initialization_options=options, env=env, trace=rec.trace, stderr=asyncio.subprocess.DEVNULL)
        await client.start()
        notes = await client.request("session/create", {"cwd": "/home/me/parser"})
        said = await client.request(
            "session/append",
            {
                "session": notes["path"],
                "messages": [msg("user", "Remember: the staging database is read-only."), msg("assistant", "Noted.")],
            },
        )
        await call("session/pin", "session/pin", {"session": notes["path"], "entryId": said["ids"][0]}, keep=only())
        await client.close()


async def record_archives(rec: Recorder) -> None:
    """``session/list`` beside ctxd's archive of Claude Code transcripts (a daemon of its own)."""
    from ctxd.store.archive import archive_transcript

    base = BASE / "archives"
    projects = base / "claude" / "projects"
    live = projects / "-home-me-service" / "5f0c2a1e-7d7b-4c1e-9f43-2b8a3f0e9d11.jsonl"
    live.parent.mkdir(parents=True)
    common = {"sessionId": live.stem, "cwd": "/home/me/service", "version": "2.1.330", "isSidechain": False}
    lines = [
        {
            "type": "user",
            "uuid": "u1",
            "parentUuid": None,
            "timestamp": "2026-11-22T12:00:00.000Z",
            **common,
            "message": {"role": "user", "content": "Add a /health endpoint to the service."},
        },
        {
            "type": "assistant",
            "uuid": "a1",
            "parentUuid": "u1",
            "timestamp": "2026-11-22T12:00:05.000Z",
            **common,
            "message": {
                "id": "msg_1",
                "role": "assistant",
                "model": "claude-opus-5-5",
                "stop_reason": "end_turn",
                "content": [{"type": "text", "text": "Added /health."}],
            },
        },
    ]
    live.write_text("".join(json.dumps(line) + "\n" for line in lines))
    archive = base / "data" / "ctxd" / "archive"
    archive_transcript(str(live), str(archive))
    options = {"roots": [str(base / "pi")], "transcriptRoots": [str(projects)], "archiveRoots": [str(archive)]}
    env = {"CTXD_CONFIG": str(BASE / "none.json"), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    client = CtxdClient(initialization_options=options, env=env, stderr=asyncio.subprocess.DEVNULL)
    await client.start()
    client.trace = rec.trace  # only the one exchange below
    rec.start("session/list archives")
    await client.request("session/list", {"cwd": "/home/me/service"})
    rec.stop()
    await client.close()


async def record_opencode_archive(rec: Recorder) -> None:
    """``session/archive`` of the real opencode session (tests/data/opencode), twice: the copy, then no change; and
    ``compact/facts`` of it (one compaction, by opencode)."""
    from opencode.rows import DATA, SESSION

    base = BASE / "opencode"
    base.mkdir(parents=True)
    db = base / "opencode" / "opencode.db"
    db.parent.mkdir()
    shutil.copyfile(DATA, db)
    options = {"roots": [str(base / "pi")], "transcriptRoots": [], "opencodeDatabases": [str(db)], "watch": False}
    env = {
        "CTXD_CONFIG": str(BASE / "none.json"),
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "XDG_DATA_HOME": str(base / "data"),
        "XDG_STATE_HOME": str(base / "state"),
    }
    client = CtxdClient(initialization_options=options, env=env, stderr=asyncio.subprocess.DEVNULL)
    await client.start()
    client.trace = rec.trace
    rec.start("session/archive", only("session/archive"))
    await client.request("session/archive", {"session": SESSION})
    await client.request("session/archive", {"session": SESSION})
    rec.stop()
    rec.start("compact/facts", only("compact/facts"))
    await client.request("compact/facts", {"session": SESSION})
    rec.stop()
    await client.close()


_HISTORY: list[dict[str, Any]] = [
    {"type": "session", "version": 3, "id": "0199e4a0-3c1f-7d22-9b1e-5a7c2f4d8e21",
     "timestamp": "2026-11-20T10:00:00.000Z", "cwd": "/home/me/checkout"},
    {"type": "message", "id": "b2000001", "parentId": None, "timestamp": "2026-11-20T10:00:00.000Z",
     "message": {"role": "user", "timestamp": 1795168800000,
                 "content": "Find why checkout is slow. Keep the public API unchanged."}},
    {"type": "message", "id": "b2000002", "parentId": "b2000001", "timestamp": "2026-11-20T10:00:04.000Z",
     "message": {"role": "assistant", "stopReason": "toolUse", "timestamp": 1795168804000,
                 "content": [{"type": "toolCall", "id": "call_1", "name": "bash",
                              "arguments": {"command": "./loadtest --hosts 12"}}]}},
    {"type": "message", "id": "b2000003", "parentId": "b2000002", "timestamp": "2026-11-20T10:01:10.000Z",
     "message": {"role": "toolResult", "toolCallId": "call_1", "toolName": "bash", "isError": False,
                 "timestamp": 1795168870000,
                 "content": [{"type": "text", "text": "p99 latency 731.25 ms (budget 500 ms) on 12 hosts\n"
                                                      + "".join(f"host {i:02d}: p99 {700 + 3 * i}.0 ms\n"
                                                                for i in range(40))}]}},
    {"type": "message", "id": "b2000004", "parentId": "b2000003", "timestamp": "2026-11-20T10:01:20.000Z",
     "message": {"role": "assistant", "stopReason": "stop", "timestamp": 1795168880000,
                 "content": [{"type": "text", "text": "p99 is over budget; the cart handler dominates."}]}},
    {"type": "message", "id": "b2000005", "parentId": "b2000004", "timestamp": "2026-11-20T10:02:00.000Z",
     "message": {"role": "user", "content": "Then profile the cart handler.", "timestamp": 1795168920000}},
    {"type": "compaction", "id": "b2000006", "parentId": "b2000005", "timestamp": "2026-11-20T10:02:01.000Z",
     "summary": "## Goal\nFind why checkout is slow.", "firstKeptEntryId": "b2000005", "tokensBefore": 9100},
    {"type": "message", "id": "b2000007", "parentId": "b2000006", "timestamp": "2026-11-20T10:02:30.000Z",
     "message": {"role": "assistant", "stopReason": "stop", "timestamp": 1795168950000,
                 "content": [{"type": "text", "text": "Profiling the cart handler."}]}},
]  # fmt: skip


async def record_history(rec: Recorder) -> None:
    """history/search and history/expand on a session whose compaction summarised a figure away
    (a daemon of its own, with its own history index)."""
    base = BASE / "history"
    session = base / "sessions" / "--home-me-checkout--" / "2026-11-20T10-00-00-000Z_checkout.jsonl"
    session.parent.mkdir(parents=True)
    session.write_text("".join(json.dumps(line) + "\n" for line in _HISTORY))
    options = {"roots": [str(base / "sessions")], "watch": True}
    env = {
        "CTXD_CONFIG": str(BASE / "none.json"),
        "XDG_DATA_HOME": str(base / "data"),
        "PI_CODING_AGENT_DIR": str(BASE / "none"),
        "CLAUDE_CONFIG_DIR": str(BASE / "none"),
        "CODEX_HOME": str(BASE / "none"),
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    }
    client = CtxdClient(initialization_options=options, env=env, stderr=asyncio.subprocess.DEVNULL)
    await client.start()
    client.trace = rec.trace
    rec.start("history/search")
    await client.request("history/search", {"query": "p99 latency", "limit": 3, "waitMs": 5000})
    rec.stop()
    rec.start("history/expand")
    await client.request("history/expand", {"session": str(session), "entryId": "b2000006", "maxChars": 1000})
    rec.stop()
    rec.start("compact/prompt")
    await client.request("compact/prompt", {})
    rec.stop()
    await client.close()


_TEAM: list[dict[str, Any]] = [
    {"type": "session", "version": 3, "id": "0199e7b1-2a4c-7e10-8f3d-6c1b9a0e5d42",
     "timestamp": "2026-11-24T14:00:00.000Z", "cwd": "/home/me/src/parser"},
    {"type": "message", "id": "c3000001", "parentId": None, "timestamp": "2026-11-24T14:00:00.000Z",
     "message": {"role": "user", "content": "CI fails on the locale test again.", "timestamp": 1795528800000}},
    {"type": "message", "id": "c3000002", "parentId": "c3000001", "timestamp": "2026-11-24T14:03:10.000Z",
     "message": {"role": "assistant", "stopReason": "stop", "timestamp": 1795528990000,
                 "content": [{"type": "text", "text": "The CI image has no de_DE.UTF-8 locale: the locale test "
                              "needs it. Fixed by installing locales-all in the CI image (ci/Dockerfile)."}]}},
]  # fmt: skip


async def record_team(rec: Recorder) -> None:
    """history/search with ``scope: "team"``: a daemon publishing to a real PostgreSQL 15 (tests/pgserver.py),
    searched as a role granted the project (skipped, saying so, without PostgreSQL's server binaries or psycopg)."""
    from pgserver import SUPERPASSWORD, SUPERUSER, PgServer, binaries

    try:
        import psycopg
    except ImportError:
        print("history/search (team): not recorded, psycopg is not installed (the team extra)", file=sys.stderr)
        return
    if binaries() is None:
        print("history/search (team): not recorded, no PostgreSQL server binaries", file=sys.stderr)
        return
    from ctxd.team import driver, migrate

    base = BASE / "team"
    session = base / "sessions" / "--home-me-src-parser--" / "2026-11-24T14-00-00-000Z_locale.jsonl"
    session.parent.mkdir(parents=True)
    session.write_text("".join(json.dumps(line) + "\n" for line in _TEAM))
    server = PgServer(root=str(base / "pg"))
    try:
        passfile = base / "pgpass"
        passfile.write_text(f"*:*:*:{SUPERUSER}:{SUPERPASSWORD}\n*:*:*:alice:pw-alice-Zq81x\n")
        passfile.chmod(0o600)
        os.environ["PGPASSFILE"] = str(passfile)
        with psycopg.connect(server.dsn(SUPERUSER, "postgres"), autocommit=True) as admin:
            admin.execute("CREATE DATABASE team")
            admin.execute("CREATE ROLE alice LOGIN PASSWORD 'pw-alice-Zq81x'")
        conn = driver.connect(server.dsn(SUPERUSER, "team"))
        migrate.init(conn, grants={"alice": ["parser"]})
        conn.close()
        team = {"dsn": server.dsn("alice", "team"), "projects": ["*"], "user": "alice", "machine": "laptop-a"}
        options = {"roots": [str(base / "sessions")], "watch": False, "team": team}
        env = {
            "CTXD_CONFIG": str(BASE / "none.json"),
            "XDG_DATA_HOME": str(base / "data"),
            "PI_CODING_AGENT_DIR": str(BASE / "none"),
            "CLAUDE_CONFIG_DIR": str(BASE / "none"),
            "CODEX_HOME": str(BASE / "none"),
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            "PGPASSFILE": str(passfile),
        }
        client = CtxdClient(initialization_options=options, env=env, stderr=asyncio.subprocess.DEVNULL)
        await client.start()
        params = {"query": "locale CI", "scope": "team", "limit": 3}
        for _ in range(300):  # until the daemon has indexed and published the session
            found = await client.request("history/search", params)
            if found["hits"] and found["queued"] == 0:
                break
            await asyncio.sleep(0.1)
        client.trace = rec.trace
        rec.start("history/search (team)")
        await client.request("history/search", params)
        rec.stop()
        await client.close()
    finally:
        server.close()


def compact_json(value: Any, indent: int = 0, used: int = 0, width: int = 100) -> str:
    """JSON indented by two, with objects and arrays that fit in ``width`` kept on one line
    (``used``: characters already on the line before the value)."""
    flat = json.dumps(value, ensure_ascii=False)
    if used + len(flat) <= width or not isinstance(value, dict | list) or not value:
        return flat
    pad = " " * (indent + 2)
    if isinstance(value, list):
        items = [pad + compact_json(v, indent + 2, indent + 2, width) for v in value]
    else:
        items = []
        for k, v in value.items():
            key = json.dumps(k, ensure_ascii=False) + ": "
            items.append(pad + key + compact_json(v, indent + 2, indent + 2 + len(key), width))
    open_, close = ("[", "]") if isinstance(value, list) else ("{", "}")
    return open_ + "\n" + ",\n".join(items) + "\n" + " " * indent + close


def render(messages: list[tuple[str, dict[str, Any]]]) -> str:
    lines = []
    for direction, message in messages:
        arrow = "-->" if direction == "send" else "<--"
        lines.append(f"{arrow} {compact_json(shorten(message), 0, 4)}")
    return "```jsonc\n" + "\n".join(lines) + "\n```"


def update(
    document: Path, examples: dict[str, list[tuple[str, dict[str, Any]]]], only: list[str] | None = None
) -> list[str]:
    text = document.read_text(encoding="utf-8")
    missing: list[str] = []

    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        if only and name not in only:
            return match.group(0)
        if name not in examples:
            missing.append(name)
            return match.group(0)
        return f"<!-- example: {name} -->\n{render(examples[name])}"

    # A block: the marker, then ```jsonc, lines that do not start with ```, and the closing ```.
    text = re.sub(r"<!-- example: (.+?) -->\n```jsonc\n(?:(?!```)[^\n]*\n)*```", replace, text)
    document.write_text(text, encoding="utf-8")
    return missing


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--update", type=Path, help="a markdown file with <!-- example: NAME --> markers")
    parser.add_argument("--only", action="append", help="with --update: rewrite only this example (repeatable)")
    args = parser.parse_args()
    rec = Recorder()
    asyncio.run(record(rec))
    asyncio.run(record_archives(rec))
    asyncio.run(record_opencode_archive(rec))
    asyncio.run(record_history(rec))
    asyncio.run(record_team(rec))
    if args.update:
        missing = update(args.update, rec.examples, args.only)
        if missing:
            print(f"no example recorded for: {missing}", file=sys.stderr)
            return 1
        return 0
    for name, messages in rec.examples.items():
        print(f"### {name}\n<!-- example: {name} -->\n{render(messages)}\n")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    sys.exit(main())
