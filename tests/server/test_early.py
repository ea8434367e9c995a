"""The first ``session/list`` is answered while pygls still loads (ctxd.server.early), with the
answer the server gives; messages that change sessions keep their order (reads after them wait)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.factories import header

from ctxd.service import protocol as p

from .harness import RawDaemon

pytestmark = pytest.mark.asyncio(loop_scope="module")


def _session(root: Path) -> Path:
    folder = root / "--proj--"
    folder.mkdir(parents=True)
    path = folder / "2026-01-01T00-00-00-000Z_abc.jsonl"
    entry = {"type": "message", "id": "e1", "parentId": None, "timestamp": "2026-01-01T00:00:00Z"}
    entry["message"] = {"role": "user", "content": "first request"}
    path.write_text(json.dumps(header(id="abc", cwd="/proj")) + "\n" + json.dumps(entry) + "\n")
    return path


async def test_the_first_listing_does_not_wait_for_pygls(tmp_path: Path) -> None:
    path = _session(tmp_path)
    daemon = await RawDaemon(CTXD_LOG_LEVEL="DEBUG").start()
    try:
        daemon.request(
            "initialize",
            {"capabilities": {}, "initializationOptions": {"roots": [str(tmp_path)], "watch": False}},
            msg_id=1,
        )
        daemon.send({"jsonrpc": "2.0", "method": "initialized", "params": {}})
        early = daemon.request(p.SESSION_LIST, {})
        listed = await daemon.response(early)
        assert [s["path"] for s in listed["result"]["sessions"]] == [str(path.resolve())]
        assert b"session/list answered while the server loads" in daemon.stderr
        later = await daemon.call(p.SESSION_LIST, {})  # from the server: the same answer
        assert later["result"] == listed["result"]
        assert (await daemon.call("shutdown"))["result"] is None
        daemon.send({"jsonrpc": "2.0", "method": "exit"})
        assert await daemon.wait() == 0
    finally:
        await daemon.close()


async def test_a_read_after_a_write_waits_for_it(tmp_path: Path) -> None:
    """A listing sent behind a create is left to the server (which orders them as it always has)."""
    daemon = await RawDaemon(CTXD_LOG_LEVEL="DEBUG").start()
    try:
        options = {"roots": [str(tmp_path)], "watch": False}
        daemon.request("initialize", {"capabilities": {}, "initializationOptions": options}, msg_id=1)
        created = daemon.request(p.SESSION_CREATE, {"cwd": "/w"})
        listed = daemon.request(p.SESSION_LIST, {})
        assert "result" in await daemon.response(created) and "result" in await daemon.response(listed)
        assert b"answered while the server loads" not in daemon.stderr
        bad = await daemon.call(p.SESSION_LIST, {"roots": ["/elsewhere"]})
        assert bad["error"]["code"] == -31001  # answered by the server, as always
        assert (await daemon.call("shutdown"))["result"] is None
        daemon.send({"jsonrpc": "2.0", "method": "exit"})
        assert await daemon.wait() == 0
    finally:
        await daemon.close()


async def test_what_changed_before_the_watch_began_is_reported(tmp_path: Path) -> None:
    """A listing answered early comes before the watcher is live: a line appended in between is
    reported once it is (the listed rows are checked against the files)."""
    path = _session(tmp_path)
    daemon = await RawDaemon(CTXD_LOG_LEVEL="DEBUG").start()
    try:
        daemon.request(
            "initialize",
            {"capabilities": {}, "initializationOptions": {"roots": [str(tmp_path)], "watch": True}},
            msg_id=1,
        )
        daemon.send({"jsonrpc": "2.0", "method": "initialized", "params": {}})
        listed = await daemon.response(daemon.request(p.SESSION_LIST, {}))
        assert listed["result"]["sessions"] and b"answered while the server loads" in daemon.stderr
        entry = {"type": "message", "id": "e2", "parentId": "e1", "timestamp": "2026-01-01T00:00:01Z"}
        entry["message"] = {"role": "user", "content": "second request"}
        with open(path, "a") as f:
            f.write(json.dumps(entry) + "\n")
        note = await daemon.notification(p.DID_CHANGE, lambda params: params.get("session") == str(path.resolve()))
        assert note["origin"] == "external"
        assert (await daemon.call("shutdown"))["result"] is None
        daemon.send({"jsonrpc": "2.0", "method": "exit"})
        assert await daemon.wait() == 0
    finally:
        await daemon.close()
