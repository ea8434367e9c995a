"""Secrets never leave the process: an API key a provider echoes back in an error (no ``sk-``
prefix to give it away) appears in no answer, notification, log line or session file.

The key comes from ``initializationOptions``, from the provider's environment variable, or from
any credential-looking environment variable; the fake OpenAI server echoes it in its errors.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fakes.openai_server import FakeOpenAIServer, error

from ctxd.service import protocol as p

from .harness import REPO, RawDaemon, assistant, conversation, server_env, user

CONFIGURED = "ctxdcfgkey0123456789abcdef"
FROM_ENV = "envprovkey9876543210zyxwvu"
OTHER = "unrelatedtoken-55aa66bb77cc"


def echo(key: str, status: int = 401) -> Any:
    """An error that echoes the key, as providers do ("Incorrect API key provided: ...")."""
    return error(status, f"Incorrect API key provided: {key}. Also seen: {OTHER}", kind="invalid_request_error")


def assert_nowhere(keys: tuple[str, ...], *texts: bytes | str) -> None:
    for text in texts:
        data = text.encode() if isinstance(text, str) else text
        for key in keys:
            assert key.encode() not in data, (key, data[max(0, data.find(key.encode()) - 300) :][:600])


async def run_daemon(tmp_path: Path, llm: FakeOpenAIServer, options: dict[str, Any], **env: str) -> RawDaemon:
    """A daemon that compacts (manual, threshold), branches with a summary, and logs at DEBUG, all
    through a provider that answers every call with an error echoing the keys."""
    daemon = await RawDaemon(CTXD_LOG_LEVEL="DEBUG", **env).start()
    compaction = {
        "model": "openai/x",
        "apiBase": llm.url,
        "contextWindow": 4000,
        "reserveTokens": 1000,
        "keepRecentTokens": 300,
        "maxAttempts": 1,
        **options.pop("compaction", {}),
    }
    try:
        await daemon.initialize({"roots": [str(tmp_path)], "watch": True, "compaction": compaction, **options})
        created = (await daemon.call(p.SESSION_CREATE, {"cwd": "/proj"}))["result"]
        path = created["path"]
        ids = (await daemon.call(p.SESSION_APPEND, {"session": path, "messages": conversation(6)}))["result"]["ids"]
        compacted = await daemon.call(p.COMPACT, {"session": path})
        assert compacted["result"]["failures"], compacted  # the model failed; the fallback summarised
        branched = await daemon.call(p.BRANCH, {"session": path, "entryId": ids[3], "summarize": True})
        assert branched["result"]["failures"], branched
        await daemon.call(p.SESSION_APPEND, {"session": path, "messages": [user("q"), assistant("a", total=3900)]})
        await daemon.notification(
            p.COMPACTION_STATUS, lambda s: s["trigger"] == "threshold" and s["state"] != "running"
        )
        await daemon.call(p.SESSION_LEDGER, {"session": path})
        # An error answer too.
        await daemon.call(p.COMPACT, {"session": path, "leafId": "nosuchid"})
        assert (await daemon.call("shutdown"))["result"] is None
        daemon.send({"jsonrpc": "2.0", "method": "exit"})
        assert await daemon.wait() == 0
        daemon.session_path = path  # type: ignore[attr-defined]
        return daemon
    finally:
        await daemon.close()


@pytest.mark.asyncio
@pytest.mark.parametrize("where", ["options", "provider-env", "ctxd-env"])
async def test_an_echoed_key_leaves_no_trace(tmp_path: Path, where: str) -> None:
    with FakeOpenAIServer() as llm:
        llm.responder = lambda body, i: echo(CONFIGURED if where != "provider-env" else FROM_ENV)
        options: dict[str, Any] = {}
        env = {"MY_SERVICE_TOKEN": OTHER}
        if where == "options":
            options["compaction"] = {"apiKey": CONFIGURED}
            env["OPENAI_API_KEY"] = FROM_ENV
        elif where == "provider-env":
            env["OPENAI_API_KEY"] = FROM_ENV
        else:
            env["CTXD_API_KEY"] = CONFIGURED
        daemon = await run_daemon(tmp_path, llm, options, **env)
        assert llm.requests  # the provider was asked (and answered with the keys)
    path = daemon.session_path  # type: ignore[attr-defined]
    ledger = [json.loads(line) for line in Path(path).read_text().splitlines()]
    failures = [e["details"]["ctxd"]["failures"] for e in ledger if e.get("type") in ("compaction", "branch_summary")]
    assert failures and all(failures), "the fallbacks should have recorded why"
    assert "***" in json.dumps(failures)
    assert_nowhere((CONFIGURED, FROM_ENV, OTHER), bytes(daemon.stdout), bytes(daemon.stderr), Path(path).read_bytes())


def ctxd_cli(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ctxd", *args],
        capture_output=True,
        text=True,
        env=server_env(**env),
        cwd=REPO,
        timeout=120,
    )


def test_the_cli_never_shows_an_echoed_key(tmp_path: Path) -> None:
    env = {"OPENAI_API_KEY": FROM_ENV, "MY_SERVICE_TOKEN": OTHER, "CTXD_LOG_LEVEL": "DEBUG"}
    with FakeOpenAIServer() as llm:
        llm.responder = lambda body, i: echo(FROM_ENV)
        env["OPENAI_API_BASE"] = llm.url  # `branch` has no --api-base: litellm reads it here
        entries = [{"type": "session", "version": 3, "id": "s1", "timestamp": "2025-01-01T00:00:00Z", "cwd": "/p"}]
        parent = None
        for i, message in enumerate(conversation(6)):
            entries.append(
                {"type": "message", "id": f"{i:08x}", "parentId": parent, "timestamp": "2025-01-01T00:00:01Z"}
                | {"message": message}
            )
            parent = f"{i:08x}"
        text = "".join(json.dumps(e) + "\n" for e in entries)
        session, other = tmp_path / "s.jsonl", tmp_path / "t.jsonl"
        session.write_text(text)
        other.write_text(text)
        model = ("--model", "openai/x", "--keep-recent-tokens", "300")
        outs = [
            ctxd_cli("compact", str(session), *model, **env),
            ctxd_cli("compact", str(other), *model, "--api-base", llm.url, "--json", **env),
            ctxd_cli("branch", str(session), "00000003", "--summarize", "--model", "openai/x", "--json", **env),
            ctxd_cli("branch", str(session), "00000005", "--summarize", "--model", "openai/x", **env),
        ]
        assert len(llm.requests) >= 3
    for out in outs:
        assert "Traceback" not in out.stderr
    assert "***" in outs[1].stdout  # the failure was reported, redacted
    assert_nowhere(
        (FROM_ENV, OTHER),
        *(o.stdout for o in outs),
        *(o.stderr for o in outs),
        session.read_bytes(),
        other.read_bytes(),
    )
