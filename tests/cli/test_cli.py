"""The CLI, run as a real subprocess (``python -m ctxd``)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from conftest import REPO, reference
from helpers.factories import assistant, chain, user, write
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxd.cli.render import dump


def ctxd(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ctxd", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, **(env or {})},
        timeout=120,
    )


def test_context_json_contract() -> None:
    out = ctxd("context", str(reference("pi", "before-compaction.jsonl")), "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    for key in ("leafId", "model", "thinkingLevel", "messages", "estimatedTokens", "contextTokens", "diagnostics"):
        assert key in data
    assert data["model"] == "anthropic/claude-opus-4-5" and data["thinkingLevel"] == "off"
    assert (len(data["messages"]), data["estimatedTokens"], data["contextTokens"]) == (446, 139_429, 180_820)
    first = data["messages"][0]
    assert {"role", "entryId", "line", "tokens"} <= set(first) and first["role"] == "compactionSummary"
    assert all(isinstance(m["line"], int) and m["line"] >= 2 for m in data["messages"])


def test_context_openai_and_leaf(tmp_path: Path) -> None:
    e = chain(user, assistant, user, assistant)
    path = write(tmp_path / "s.jsonl", e)
    out = ctxd("context", path, "--json", "--format", "openai", "--leaf", e[1]["id"])
    data = json.loads(out.stdout)
    assert data["leafId"] == e[1]["id"]
    assert [m["role"] for m in data["openai"]] == ["user", "assistant"]
    assert [m["line"] for m in data["messages"]] == [2, 3]


def test_tree_sessions_label_branch_fork(tmp_path: Path) -> None:
    e = chain(user, assistant, user, assistant)
    root = tmp_path / "root"
    (root / "--p--").mkdir(parents=True)
    path = write(root / "--p--" / "s.jsonl", e)
    assert ctxd("label", path, e[0]["id"], "start").returncode == 0
    tree = ctxd("tree", path)
    assert tree.returncode == 0 and "[start]" in tree.stdout and "◀ leaf" in tree.stdout
    assert json.loads(ctxd("branch", path, e[1]["id"], "--json").stdout)["leafId"] == e[1]["id"]
    data = json.loads(ctxd("tree", path, "--json").stdout)
    assert data["leafId"] == e[1]["id"]
    leaf_rows = [r for r in data["rows"] if r.get("isLeaf")]
    assert [r["id"] for r in leaf_rows] == [e[1]["id"]]
    forked = json.loads(ctxd("fork", path, e[2]["id"], "--json").stdout)["path"]
    assert Path(forked).parent == Path(path).parent
    sessions = json.loads(ctxd("sessions", "--root", str(root), "--json").stdout)["sessions"]
    assert {s["path"] for s in sessions} == {path, forked}


def test_errors_are_clear_and_nonzero(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"type":"message"}\n')
    out = ctxd("context", str(bad))
    assert out.returncode == 2 and "not a session header" in out.stderr and out.stdout == ""
    out = ctxd("context", str(bad), "--json")
    assert json.loads(out.stdout)["error"]["data"]["line"] == 1
    missing = ctxd("tree", str(tmp_path / "nope.jsonl"))
    assert missing.returncode == 2 and "no such session file" in missing.stderr


def test_demo_runs() -> None:
    out = ctxd("demo")
    assert out.returncode == 0, out.stderr
    assert "◀ leaf" in out.stdout and "the context for the next request" in out.stdout


def test_exact_token_counts_for_a_named_model(tmp_path: Path) -> None:
    e = chain(lambda p: user(p, "word " * 1000), assistant)
    path = write(tmp_path / "s.jsonl", e)
    out = ctxd("context", path, "--json", "--count-model", "gpt-4o")
    assert out.returncode == 0, out.stderr
    exact = json.loads(out.stdout)["exactTokens"]
    assert exact["model"] == "gpt-4o" and len(exact["perMessage"]) == 2
    # 1,000 words are 1,000 tokens in o200k (pi's estimate says 1,250); a message adds a few more.
    assert 1_000 <= exact["perMessage"][0] <= 1_020
    assert exact["tokens"] >= exact["perMessage"][0] and json.loads(out.stdout)["estimatedTokens"] >= 1_250


def test_serve_over_tcp_on_loopback(tmp_path: Path) -> None:
    import socket
    import time

    from ctxd.client import decode_frames, encode_frame

    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    daemon = subprocess.Popen(
        [sys.executable, "-m", "ctxd", "serve", "--tcp", f"127.0.0.1:{port}"], cwd=REPO, stderr=subprocess.DEVNULL
    )
    try:
        for _ in range(200):
            try:
                conn = socket.create_connection(("127.0.0.1", port))
                break
            except OSError:
                time.sleep(0.05)
        init = {"capabilities": {}, "initializationOptions": {"roots": [str(tmp_path)], "transcriptRoots": []}}
        conn.sendall(encode_frame({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init}))
        conn.sendall(encode_frame({"jsonrpc": "2.0", "id": 2, "method": "session/list", "params": {}}))
        got: list[dict[str, object]] = []
        buf = b""
        while len(got) < 2:
            buf += conn.recv(65536)
            msgs, buf = decode_frames(buf)
            got += msgs
        assert got[1] == {"jsonrpc": "2.0", "id": 2, "result": {"roots": [str(tmp_path)], "sessions": []}}
        conn.sendall(encode_frame({"jsonrpc": "2.0", "id": 3, "method": "shutdown"}))
        conn.sendall(encode_frame({"jsonrpc": "2.0", "method": "exit"}))
        assert daemon.wait(30) == 0
    finally:
        daemon.kill()
    refused = subprocess.run(
        [sys.executable, "-m", "ctxd", "serve", "--tcp", "0.0.0.0:1"], capture_output=True, text=True
    )
    assert refused.returncode == 2 and "loopback" in refused.stderr


json_values = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(10**30), max_value=10**30),
        st.floats(allow_nan=True, allow_infinity=True),
        st.text(max_size=8),
        st.sampled_from(["\ud800", "\u2028", "\x00\x1f\x7f", "é 😀", "</script>", '"\\']),
    ),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=4), inner, max_size=4)),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(value=json_values)
def test_json_output_is_the_standard_librarys_indented_json(value: Any) -> None:
    """``--json`` output is written by a fast path (C encoder, msgspec's indentation): byte for byte what
    ``json.dumps(..., ensure_ascii=False, indent=2)`` writes, lone surrogates and NaN included."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        dump(value)
    assert out.getvalue() == json.dumps(value, ensure_ascii=False, indent=2) + "\n"
