"""Bad input never kills or wedges the daemon: deep bodies, broken frame headers, requests before
``initialize``, invalid options, odd notifications and huge names, each through a real daemon
spoken to byte by byte, which must answer (or ignore) and keep serving."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ctxd.service import protocol as p

from .harness import RawDaemon, frame

pytestmark = pytest.mark.asyncio

SERVER_NOT_INITIALIZED = -32002


async def started(tmp_path: Path, **options: Any) -> RawDaemon:
    daemon = await RawDaemon().start()
    answer = await daemon.initialize({"roots": [str(tmp_path)], "watch": False, **options})
    assert "result" in answer
    return daemon


async def still_serving(daemon: RawDaemon) -> None:
    listed = await daemon.call(p.SESSION_LIST, {}, timeout=10)
    assert "result" in listed, listed
    assert daemon.process is not None and daemon.process.returncode is None


async def finish(daemon: RawDaemon) -> None:
    assert (await daemon.call("shutdown"))["result"] is None
    daemon.send({"jsonrpc": "2.0", "method": "exit"})
    assert await daemon.wait() == 0
    assert b"Traceback" not in daemon.stderr, daemon.stderr.decode(errors="replace")[-3000:]


def errors_with_null_id(daemon: RawDaemon) -> list[dict[str, Any]]:
    return [m["error"] for m in daemon.messages if "error" in m and m.get("id") is None]


# --- frames -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("depth", [1_000, 100_000])
async def test_a_deeply_nested_body_is_a_parse_error(tmp_path: Path, depth: int) -> None:
    daemon = await started(tmp_path)
    try:
        deep = "[" * depth + "]" * depth
        body = f'{{"jsonrpc": "2.0", "id": 7, "method": "session/list", "params": {{"x": {deep}}}}}'
        daemon.send_bytes(frame(body.encode()))
        await still_serving(daemon)
        assert [e["code"] for e in errors_with_null_id(daemon)] == [-32700]
        assert "nested too deeply" in errors_with_null_id(daemon)[0]["message"]
        await finish(daemon)
    finally:
        await daemon.close()


async def test_a_deep_message_that_parses_is_answered(tmp_path: Path) -> None:
    """Nested just under what the parser takes: refused (the store keeps 100 levels), but answered, and
    served after; every answer about the session too."""
    daemon = await started(tmp_path)
    try:
        path = (await daemon.call(p.SESSION_CREATE, {"cwd": "/deep"}))["result"]["path"]
        for depth in (300, 900):
            content: Any = "x"
            for _ in range(depth):
                content = [content]
            message = {"role": "user", "content": [{"type": "text", "text": "hi", "extra": content}]}
            answer = await daemon.call(p.SESSION_APPEND, {"session": path, "messages": [message]})
            assert "result" in answer or answer["error"]["code"] != -32603, answer
            for method in (p.CONTEXT_BUILD, p.SESSION_TREE, p.SESSION_OPEN):
                answer = await daemon.call(method, {"session": path}, timeout=20)
                assert "result" in answer or answer["error"]["code"] != -32603, (method, answer)
        await still_serving(daemon)
        await finish(daemon)
    finally:
        await daemon.close()


@pytest.mark.parametrize(
    "header",
    [
        b"Content-Type: application/vscode-jsonrpc; charset=utf-8\r\n",
        b"Content-Length: abc\r\n",
        b"Content-Length: -5\r\n",
        b"Content-Length: 12 34\r\n",
        b"Content-Length: 99999999999999999999\r\n",
        b"X-Whatever: 1\r\nContent-Length:\r\n",
        b"Content-Length: abc\r\nX-Long: " + b"x" * 70_000 + b"\r\n",
    ],
    ids=["no-length", "abc", "negative", "two-numbers", "huge", "empty", "long-header-line"],
)
async def test_a_frame_without_a_valid_content_length_is_answered_and_skipped(tmp_path: Path, header: bytes) -> None:
    daemon = await started(tmp_path)
    try:
        lost = json.dumps({"jsonrpc": "2.0", "id": 50, "method": p.SESSION_LIST}).encode()
        daemon.send_bytes(header + b"\r\n" + lost)
        await still_serving(daemon)  # the next frame follows the lost body directly, as on the wire
        [error] = errors_with_null_id(daemon)
        assert error["code"] == -32700 and "Content-Length" in error["message"]
        assert not [m for m in daemon.messages if m.get("id") == 50]
        assert b"Content-Length" in daemon.stderr  # the reason is logged too
        await still_serving(daemon)
        await finish(daemon)
    finally:
        await daemon.close()


async def test_a_lost_frame_with_a_large_body_is_skipped_too(tmp_path: Path) -> None:
    daemon = await started(tmp_path)
    try:
        lost = json.dumps({"jsonrpc": "2.0", "id": 51, "method": p.SESSION_LIST, "params": {"x": "y" * 300_000}})
        daemon.send_bytes(b"Content-Length: many\r\n\r\n" + lost.encode())
        await still_serving(daemon)
        assert [e["code"] for e in errors_with_null_id(daemon)] == [-32700]
        await finish(daemon)
    finally:
        await daemon.close()


# --- lifecycle --------------------------------------------------------------------------------------


async def test_requests_before_initialize_are_refused(tmp_path: Path) -> None:
    daemon = await RawDaemon().start()
    try:
        early = await daemon.call(p.SESSION_LIST, {})
        assert early["error"]["code"] == SERVER_NOT_INITIALIZED
        early = await daemon.call(p.SESSION_CREATE, {"cwd": "/early"})
        assert early["error"]["code"] == SERVER_NOT_INITIALIZED
        daemon.send({"jsonrpc": "2.0", "method": "initialized", "params": {}})  # a notification: ignored
        await daemon.initialize({"roots": [str(tmp_path)], "watch": False})
        listed = await daemon.call(p.SESSION_LIST, {})
        assert listed["result"]["roots"] == [str(tmp_path)]
        assert not any(tmp_path.iterdir())  # nothing was created by the early request
        await finish(daemon)
    finally:
        await daemon.close()


@pytest.mark.parametrize("options", ["abc", [], 5, True])
async def test_invalid_initialization_options_are_reported(tmp_path: Path, options: Any) -> None:
    daemon = await RawDaemon().start()
    try:
        answer = await daemon.initialize(options)
        assert "result" in answer
        await still_serving(daemon)
        warnings = [m["params"] for m in daemon.messages if m.get("method") == "window/logMessage"]
        assert warnings and warnings[0]["type"] == 2
        assert "initializationOptions" in warnings[0]["message"] and "defaults" in warnings[0]["message"]
        assert b"initializationOptions" in daemon.stderr
        await finish(daemon)
    finally:
        await daemon.close()


async def test_invalid_individual_options_are_reported(tmp_path: Path) -> None:
    daemon = await RawDaemon().start()
    try:
        options = {
            "roots": [],
            "hooks": "yes",
            "compaction": {"keepRecent": 5, "triggerPercent": 3, "reserveTokens": 1.5},
            "transcriptRoots": "abc",
        }
        await daemon.initialize(options)
        listed = await daemon.call(p.SESSION_LIST, {})
        assert listed["result"]["roots"] and listed["result"]["roots"][0].endswith("sessions")  # the default root
        texts = " | ".join(m["params"]["message"] for m in daemon.messages if m.get("method") == "window/logMessage")
        for name in ("roots", "hooks", "keepRecent", "triggerPercent", "reserveTokens", "transcriptRoots"):
            assert name in texts, (name, texts)
        await finish(daemon)
    finally:
        await daemon.close()


async def test_each_problem_names_its_source_and_the_lower_layer_stays(tmp_path: Path) -> None:
    """The config file's problems reach stderr naming the file; the options' reach the client naming
    initializationOptions; a bad option keeps the file's value, a bad file value the default."""
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"compaction": {"reserveTokens": 4_000, "contextWindow": "big"}, "watchStepMs": 0}))
    daemon = await RawDaemon(CTXD_CONFIG=str(config), CTXD_DURABILITY="often").start()
    try:
        options = {"roots": [str(tmp_path)], "watch": False, "compaction": {"reserveTokens": -1, "keepRecent": 1}}
        assert "result" in await daemon.initialize(options)
        created = await daemon.call(p.SESSION_CREATE, {"cwd": "/proj"})
        usage = created["result"]["usage"]
        assert (usage["window"], usage["threshold"]) == (200_000, 196_000)  # the default window, the file's reserve
        texts = [m["params"]["message"] for m in daemon.messages if m.get("method") == "window/logMessage"]
        assert texts == [
            "ctxd configuration: initializationOptions: compaction.reserveTokens: expected an integer, 0 or more, "
            "got -1; using 4000",
            "ctxd configuration: initializationOptions: compaction.keepRecent: unknown option, ignored",
        ]
        await finish(daemon)
        logged = daemon.stderr.decode()
        assert (
            f'{config}: compaction.contextWindow: expected a positive integer or null, got "big"; using null' in logged
        )
        assert f"{config}: watchStepMs: expected a positive integer, got 0; using 10" in logged
        assert 'CTXD_DURABILITY: durability: expected flush, fsync or fsync-batch, got "often"' in logged
    finally:
        await daemon.close()


@pytest.mark.parametrize("params", [None, {}, [], {"id": "nobody"}, {"id": None}, "x"])
async def test_cancel_request_with_odd_params_is_ignored_quietly(tmp_path: Path, params: Any) -> None:
    daemon = await started(tmp_path)
    try:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": "$/cancelRequest"}
        if params is not None:
            message["params"] = params
        daemon.send(message)
        await still_serving(daemon)
        assert not errors_with_null_id(daemon)
        await finish(daemon)  # asserts no traceback on stderr
    finally:
        await daemon.close()


# --- huge free text ---------------------------------------------------------------------------------

HUGE = 10 * 1024 * 1024


async def test_huge_names_and_labels_are_capped_in_payloads(tmp_path: Path) -> None:
    daemon = await started(tmp_path, watch=True)
    try:
        refused = await daemon.call(p.SESSION_CREATE, {"cwd": "/big", "name": "n" * 5_000})
        assert refused["error"]["code"] == -32602 and refused["error"]["data"] == {"field": "name"}
        path = (await daemon.call(p.SESSION_CREATE, {"cwd": "/big", "name": "small"}))["result"]["path"]
        message = {"role": "user", "content": "q"}
        leaf = (await daemon.call(p.SESSION_APPEND, {"session": path, "messages": [message]}))["result"]["leafId"]
        refused = await daemon.call(
            p.SESSION_APPEND, {"session": path, "entries": [{"type": "session_info", "name": "n" * 5_000}]}
        )
        assert refused["error"]["code"] == -31003 and "name" in refused["error"]["message"]
        # Another writer (pi, a script) wrote a 10 MB name and a 1 MB label into the file.
        with open(path, "a") as f:
            for entry in (
                {"type": "session_info", "id": "0000aaaa", "parentId": leaf, "name": "N" * HUGE},
                {"type": "label", "id": "0000bbbb", "parentId": "0000aaaa", "targetId": leaf, "label": "L" * 2**20},
            ):
                f.write(json.dumps(entry | {"timestamp": "2025-01-01T00:00:00.000Z"}) + "\n")
        await daemon.notification(p.DID_CHANGE, lambda c: "0000bbbb" in c["ids"], timeout=10)
        # Back to back, as a busy client would: each answer stays small.
        asked = [daemon.request(p.SESSION_LIST, {}) for _ in range(10)]
        for msg_id in asked:
            listed = await daemon.response(msg_id, timeout=60)
            assert len(json.dumps(listed)) < 4_000
            [row] = [s for s in listed["result"]["sessions"] if s["path"] == path]
            assert len(row["name"]) == p.TEXT_CAP and row["name"].startswith("NNN") and row["name"].endswith("…")
        opened = (await daemon.call(p.SESSION_OPEN, {"session": path}))["result"]
        assert len(opened["name"]) == p.TEXT_CAP
        tree = (await daemon.call(p.SESSION_TREE, {"session": path, "collapse": 0}))["result"]
        assert len(tree["name"]) == p.TEXT_CAP
        assert len(json.dumps(tree)) < 8_000, "no row carries the name or the label whole"
        entry = (await daemon.call(p.SESSION_ENTRY, {"session": path, "entryId": "0000aaaa"}))["result"]
        assert entry["entry"]["name"] == "N" * HUGE  # the whole text, on demand
        error = (await daemon.call(p.SESSION_OPEN, {"session": "x" * HUGE}))["error"]
        assert error["code"] == -31001 and len(json.dumps(error)) < 8_000  # not echoed whole
        await finish(daemon)
    finally:
        await daemon.close()
