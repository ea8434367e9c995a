"""Fuzzing one long-lived daemon with random params and garbage frames: it answers or ignores, never dies.

Every frame sent has a correct Content-Length (a wrong one desynchronises any LSP stream, by design
of the framing).  After every example a ``session/list`` ping must be answered, every request with
an id must get exactly one well-formed answer, and no answer may be an internal error (-32603: a
bug in ctxd).
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from ctxd.service import protocol as p

from .harness import SERVER_COMMAND, conversation, encode, frame, parse_frames, server_env

FIELDS = [
    "session",
    "entryId",
    "cwd",
    "root",
    "name",
    "entries",
    "messages",
    "parentId",
    "durability",
    "collapse",
    "offset",
    "limit",
    "leafId",
    "format",
    "truncateToolResults",
    "contextWindow",
    "includeMessages",
    "instructions",
    "dryRun",
    "keepRecentTokens",
    "workDoneToken",
    "summarize",
    "label",
    "roots",
]
KNOWN_CODES = {-32600, -32601, -32602, -32000, -32800}
KNOWN_CODES |= {-31000, -31001, -31002, -31003, -31010, -31011, -31012, -31013, -31020}
ANSWER_SECONDS = 10.0


class SyncDaemon:
    """A raw ``ctxd serve`` for a synchronous test: frames in, strictly parsed frames out."""

    def __init__(self) -> None:
        self.process = subprocess.Popen(
            SERVER_COMMAND,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=server_env(),
        )
        self.messages: list[dict[str, Any]] = []
        self.error: BaseException | None = None
        self.stderr = bytearray()
        self._cond = threading.Condition()
        self._ids = 0
        self._threads = [
            threading.Thread(target=self._read_stdout, daemon=True),
            threading.Thread(target=self._read_stderr, daemon=True),
        ]
        for t in self._threads:
            t.start()

    def _read_stdout(self) -> None:
        assert self.process.stdout is not None
        rest = b""
        fd = self.process.stdout.fileno()
        try:
            while chunk := os.read(fd, 65536):
                messages, rest = parse_frames(rest + chunk)
                with self._cond:
                    self.messages += messages
                    self._cond.notify_all()
        except BaseException as exc:  # a malformed frame: remembered, reported by the test
            self.error = exc
        with self._cond:
            self._cond.notify_all()

    def _read_stderr(self) -> None:
        assert self.process.stderr is not None
        while chunk := os.read(self.process.stderr.fileno(), 65536):
            self.stderr += chunk[-100_000:]
            del self.stderr[:-200_000]

    def send_bytes(self, data: bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(data)
        self.process.stdin.flush()

    def request(self, method: Any, params: Any = None, *, with_params: bool = True) -> int:
        self._ids += 1
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": self._ids, "method": method}
        if with_params:
            message["params"] = params
        self.send_bytes(encode(message))
        return self._ids

    def answers(self, msg_id: int) -> list[dict[str, Any]]:
        return [m for m in self.messages if "method" not in m and m.get("id") == msg_id]

    def answer(self, msg_id: int, timeout: float = ANSWER_SECONDS) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        with self._cond:
            while not (found := self.answers(msg_id)):
                assert self.error is None, f"the daemon wrote a malformed frame: {self.error}"
                assert self.process.poll() is None, f"the daemon died ({self.process.returncode}): {self.tail()}"
                remaining = deadline - time.monotonic()
                assert remaining > 0, f"no answer to request {msg_id} within {timeout}s"
                self._cond.wait(remaining)
        return found[0]

    def call(self, method: str, params: Any = None) -> dict[str, Any]:
        return self.answer(self.request(method, params))

    def tail(self) -> str:
        return self.stderr[-3000:].decode("utf-8", "replace")

    def close(self) -> int:
        try:
            if self.process.poll() is None:
                self.call("shutdown")
                self.send_bytes(encode({"jsonrpc": "2.0", "method": "exit"}))
            return self.process.wait(timeout=20)
        finally:
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait()


# --- strategies -----------------------------------------------------------------------------------

HUGE = "x" * 200_000
SPECIAL_STRINGS = ["", ".", "..", "../..", "../../etc/passwd", "/etc/passwd", "/", "\x00", "a\x00b", "~", HUGE, "é✓🙂"]
leaves = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=30)
    | st.sampled_from(SPECIAL_STRINGS)
)
keys = st.text(max_size=8) | st.sampled_from([*FIELDS, "jsonrpc", "id", "method", "type", "role", "content"])
json_values = st.recursive(
    leaves, lambda kids: st.lists(kids, max_size=4) | st.dictionaries(keys, kids, max_size=4), max_leaves=12
)


def params_for(session: str, session_id: str, entry_ids: list[str]) -> st.SearchStrategy[Any]:
    real = st.sampled_from([session, session_id, os.path.basename(session)])
    entry = st.sampled_from(entry_ids) | st.text(max_size=10)
    message = st.fixed_dictionaries(
        {"role": st.sampled_from(["user", "assistant", "toolResult", "custom", "bashExecution", "x"])},
        optional={
            "content": json_values,
            "stopReason": st.sampled_from(["stop", "error", "aborted", "toolUse", "length"]) | json_values,
            "errorMessage": st.sampled_from(["prompt is too long", "context length exceeded"]) | json_values,
            "usage": json_values | st.fixed_dictionaries({"totalTokens": st.integers(-(2**40), 2**40)}),
        },
    )
    entry_body = st.dictionaries(
        st.sampled_from(["type", "id", "parentId", "message", "targetId", "label"]), json_values
    )
    realistic = st.fixed_dictionaries(
        {"session": real},
        optional={
            "entryId": entry,
            "leafId": entry,
            "parentId": entry | st.none(),
            "messages": st.lists(message | json_values, max_size=3),
            "entries": st.lists(entry_body | json_values, max_size=3),
            **{f: json_values for f in FIELDS if f not in ("session", "entryId", "leafId", "parentId", "messages")},
        },
    )
    return st.one_of(json_values, st.dictionaries(st.sampled_from(FIELDS), json_values, max_size=6), realistic)


GARBAGE = [
    frame(b"{not json"),
    frame(b"[1, 2, 3]"),
    frame(b"42"),
    frame(b"null"),
    frame(b"{}"),
    frame(b'{"jsonrpc": "2.0", "id": 99992, "method": "session/list", "params": {"x": "\xff"}}'),
    frame(b'"just a string"'),
    frame(b'{"jsonrpc": "1.0", "id": 99999, "method": "session/list"}'),
    frame(b'{"id": 99998, "method": "session/list"}'),
    frame(b'{"jsonrpc": "2.0", "id": null, "method": "session/list"}'),
    frame(b'{"jsonrpc": "2.0", "id": {"a": 1}, "method": "session/list"}'),
    frame(b'{"jsonrpc": "2.0", "id": 99997, "method": 7}'),
    frame(b'{"jsonrpc": "2.0", "id": 99996}'),
    frame(b'{"jsonrpc": "2.0", "id": 99995, "result": {"unasked": true}}'),
    frame(b'{"jsonrpc": "2.0", "id": 99994, "error": {"code": 1, "message": "unasked"}}'),
    frame(b'{"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": [1]}}'),
    frame(b'{"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": 123456}}'),
    frame(b'{"jsonrpc": "2.0", "method": "initialized", "params": {}}'),
    frame(b'{"jsonrpc": "2.0", "id": 99993, "method": "session/list", "params": {"x": {"jsonrpc": "2.0", "id": [1]}}}'),
    frame(b""),
    b"Content-Length: 2\r\nContent-Type: application/vscode-jsonrpc; charset=utf-8\r\n\r\n{}",
]
METHODS = [*p.METHODS, "initialize", "session/nope", "", "$/unknown", "textDocument/hover", "workspace/symbol"]
cases = st.one_of(
    st.tuples(st.just("request"), st.sampled_from(METHODS), st.just(None)),
    st.tuples(st.just("request-no-params"), st.sampled_from(METHODS), st.none()),
    st.tuples(st.just("notification"), st.sampled_from([*METHODS, "$/cancelRequest", "initialized"]), st.just(None)),
    st.tuples(st.just("garbage"), st.sampled_from(GARBAGE), st.none()),
)


def test_random_params_and_garbage_never_kill_the_daemon(tmp_path: Path) -> None:
    daemon = SyncDaemon()
    try:
        init = daemon.call("initialize", {"capabilities": {}, "initializationOptions": {"roots": [str(tmp_path)]}})
        assert "result" in init, init
        daemon.send_bytes(encode({"jsonrpc": "2.0", "method": "initialized", "params": {}}))
        created = daemon.call(p.SESSION_CREATE, {"cwd": "/fuzz"})["result"]
        session, session_id = created["path"], created["sessionId"]
        ids = daemon.call(p.SESSION_APPEND, {"session": session, "messages": conversation(6, 20)})["result"]["ids"]
        params = params_for(session, session_id, ids)
        sent: list[int] = []
        log: list[str] = []
        internal: list[tuple[Any, Any, dict[str, Any]]] = []

        @settings(
            max_examples=150,
            deadline=None,
            database=None,
            phases=[Phase.generate],  # one shared daemon: shrinking a sequence-dependent failure only wastes time
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        )
        @given(case=cases, data=st.data())
        def run(case: tuple[str, Any, Any], data: st.DataObject) -> None:
            kind, what, _ = case
            log.append(f"{kind} {what!r:.200}")
            if kind == "garbage":
                daemon.send_bytes(what)
            elif kind == "notification":
                body = json.dumps({"jsonrpc": "2.0", "method": what, "params": data.draw(params)}).encode()
                log.append(f"  {body!r:.300}")
                daemon.send_bytes(frame(body))
            else:
                value = data.draw(params) if kind == "request" else None
                log.append(f"  {json.dumps(value)!r:.300}")
                msg_id = daemon.request(what, value, with_params=kind == "request")
                sent.append(msg_id)
                answer = daemon.answer(msg_id)
                assert answer["jsonrpc"] == "2.0"
                assert ("result" in answer) != ("error" in answer), answer
                if "error" in answer:
                    error = answer["error"]
                    assert isinstance(error["code"], int) and isinstance(error["message"], str), answer
                    if error["code"] == -32603:
                        internal.append((what, value, error))
                    else:
                        assert error["code"] in KNOWN_CODES, (what, value, answer)
            ping = daemon.call(p.SESSION_LIST, {})
            assert "result" in ping, ping

        try:
            run()
        except BaseException:
            print("\n".join(log[-12:]))
            print(daemon.tail())
            raise
        assert not internal, f"internal errors (bugs): {internal[:5]}"
        final = daemon.call(p.SESSION_LIST, {})
        assert session in [s["path"] for s in final["result"]["sessions"]]
        assert daemon.call(p.SESSION_OPEN, {"session": session})["result"]["path"] == session
        # Every request was answered exactly once.
        answered = [m["id"] for m in daemon.messages if "method" not in m]
        assert all(answered.count(i) == 1 for i in sent)
        assert daemon.close() == 0
    finally:
        if daemon.process.poll() is None:
            daemon.process.kill()
            daemon.process.wait()
