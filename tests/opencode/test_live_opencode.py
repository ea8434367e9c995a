"""Real opencode 1.18.33 (npm ``opencode-ai``, scripts/opencode.sh) writing its database while a watching ctxd
daemon follows it: the session appears, and the turn, the bash call and the auto-compaction opencode stores
reach ctxd's tree and context live, without ctxd ever writing the database."""

from __future__ import annotations

import asyncio
import hashlib
import os
from pathlib import Path

import pytest
from fakes.openai_server import FakeOpenAIServer
from server.harness import call, start_ctxd

from ctxd.service import protocol as p

from .harness import SUMMARY, CompactingResponder, OpencodeHome, opencode_binary

pytestmark = pytest.mark.asyncio


async def test_a_watching_daemon_follows_a_real_opencode_run_through_its_compaction(tmp_path: Path) -> None:
    binary = opencode_binary()
    with FakeOpenAIServer() as server:
        server.responder = CompactingResponder()
        home = OpencodeHome(tmp_path / "oc", server, binary)
        home.write_config()
        db = str(home.database)
        options = {"roots": [str(tmp_path / "pi")], "opencodeDatabases": [db], "watch": True, "autoCompact": False}
        async with start_ctxd(options) as ctxd:
            notes = ctxd.notes  # type: ignore[attr-defined]
            run = asyncio.create_task(asyncio.to_thread(home.run, "Say hello using bash"))
            created = await notes.wait(p.DID_CREATE, lambda c: db.rsplit(os.sep, 1)[0] in c["session"], timeout=60)
            path = created["session"]
            assert path.startswith(os.path.realpath(db) + "#ses_")
            opened = await call(ctxd, p.SESSION_OPEN, {"session": path})  # while opencode is still writing
            assert opened["readOnly"] is True
            done = await run
            assert done.returncode == 0, done.stderr[-2000:]
            before = hashlib.sha256(Path(db).read_bytes()).hexdigest()

            async def settled() -> dict[str, object]:
                for _ in range(100):  # bounded: opencode's last writes reach the watcher within seconds
                    built: dict[str, object] = await call(ctxd, p.CONTEXT_BUILD, {"session": path})
                    messages = built["messages"]
                    assert isinstance(messages, list)
                    if "Done (turn 3)." in str(messages[-1]["message"]):
                        return built
                    await asyncio.sleep(0.1)
                raise AssertionError("the daemon never saw opencode's last answer")

            built = await settled()
            assert notes.of(p.DID_CHANGE, path), "no session/didChange for the live session"
            messages = built["messages"]
            assert isinstance(messages, list)
            assert [m["role"] for m in messages] == ["compactionSummary", "user", "assistant"]
            assert messages[0]["message"]["summary"] == SUMMARY
            tree = await call(ctxd, p.SESSION_TREE, {"session": path, "limit": 100})
            rows = {r["role"]: r for r in tree["rows"]}
            assert [r["type"] for r in tree["rows"]].count("compaction") == 1
            assert "hello-from-bash" in rows["toolResult"]["preview"]
            assert hashlib.sha256(Path(db).read_bytes()).hexdigest() == before
            # ctxd's context is what opencode sent in its last request (opencode's "What did we do so far?"
            # and the summary are ctxd's compaction summary), plus the answer to it.
            sent = [m for m in server.requests[-1].body["messages"] if m["role"] != "system"]
            assert [m["role"] for m in sent] == ["user", "assistant", "user"]
            assert sent[1]["content"] == messages[0]["message"]["summary"]
            assert sent[2]["content"] == messages[1]["message"]["content"][0]["text"]
