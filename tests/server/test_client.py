"""ctxd.client, the pygls-free asyncio client, against a real daemon; and the example that uses it."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fakes.openai_server import FakeOpenAIServer, slow

from ctxd.client import ClientError, CtxdClient, Notification, ServerExitedError, decode_frames, encode_frame
from ctxd.service import protocol as p

from .harness import REPO, conversation, read_entries, server_env


def test_frames_round_trip() -> None:
    message = {"jsonrpc": "2.0", "id": 1, "method": "x", "params": {"text": "héllo ✓"}}
    data = encode_frame(message) + encode_frame({"jsonrpc": "2.0", "method": "y"})
    assert data.startswith(
        b"Content-Length: %d\r\n\r\n"
        % len('{"jsonrpc":"2.0","id":1,"method":"x","params":{"text":"héllo ✓"}}'.encode())
    )
    decoded, rest = decode_frames(data + data[:10])
    assert decoded == [message, {"jsonrpc": "2.0", "method": "y"}] and rest == data[:10]
    with pytest.raises(ValueError):
        decode_frames(b"garbage\r\n\r\n{}")


def test_client_does_not_import_pygls() -> None:
    code = "import sys, ctxd.client\nprint([m for m in sys.modules if m.split('.')[0] in ('pygls', 'lsprotocol')])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=server_env(), check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.asyncio
async def test_requests_notifications_errors_and_the_hook(tmp_path: Path) -> None:
    with FakeOpenAIServer() as llm:
        options = {
            "roots": [str(tmp_path)],
            "watch": False,
            "autoCompact": False,
            "hooks": {"compactWillRun": True},
            "compaction": {"model": "openai/x", "apiBase": llm.url, "apiKey": "sk-test", "keepRecentTokens": 300},
        }
        async with CtxdClient(initialization_options=options, env=server_env()) as client:
            assert client.server_info["name"] == "ctxd"
            assert client.capabilities["experimental"]["ctxd"]["methods"] == list(p.METHODS)

            seen: list[Any] = []
            everything: list[Notification] = []
            later: list[Any] = []

            async def async_callback(params: Any) -> None:
                later.append(params)

            client.on_notification(p.DID_CREATE, seen.append)
            client.on_notification(p.DID_CREATE, async_callback)
            stop = client.on_notification("*", everything.append)

            mark = client.mark()
            created = await client.request(p.SESSION_CREATE, {"cwd": "/proj"})
            path = created["path"]
            note = await client.wait_for(p.DID_CREATE, lambda n: n["session"] == path, since=mark)
            assert note["sessionId"] == created["sessionId"]
            await asyncio.sleep(0.05)
            assert seen == [note] and later == [note]
            assert everything[0].method == p.DID_CREATE and everything[0].params == note
            stop()

            appended = await client.request(p.SESSION_APPEND, {"session": path, "messages": conversation(6)})
            usage = await client.wait_for(p.CONTEXT_USAGE, since=mark)
            assert usage["leafId"] == appended["leafId"]
            assert len(everything) == 1  # unsubscribed
            assert [n.method for n in client.notifications][:3] == [p.DID_CREATE, p.DID_CHANGE, p.CONTEXT_USAGE]

            with pytest.raises(ClientError) as info:
                await client.request(p.SESSION_OPEN, {"session": 5})
            assert info.value.code == -32602 and info.value.data == {"field": "session"}
            with pytest.raises(ClientError) as info:
                await client.request(p.SESSION_ENTRY, {"session": path, "entryId": "00000000"})
            assert info.value.code == -31002
            with pytest.raises(TimeoutError):
                await client.wait_for("no/such/notification", timeout=0.2)

            # The willRun hook: an error answer does not stop the compaction; a summary replaces the model's.
            asked: list[Any] = []

            def refuse(params: Any) -> Any:
                asked.append(params)
                raise ClientError(-32000, "not now")

            client.on_request(p.COMPACT_WILL_RUN, refuse)
            result = await client.request(p.COMPACT, {"session": path})
            assert result["path"] == "model" and asked[0]["session"] == path

            async def supply(params: Any) -> Any:
                return {"summary": "FROM THE CLIENT"}

            client.on_request(p.COMPACT_WILL_RUN, supply)
            await client.request(p.SESSION_APPEND, {"session": path, "messages": conversation(4)})
            result = await client.request(p.COMPACT, {"session": path})
            assert result["path"] == "hook" and result["summary"].startswith("FROM THE CLIENT")

            # Cancelling the awaiting task sends $/cancelRequest: the slow compaction is cancelled.
            client.on_request(p.COMPACT_WILL_RUN, lambda params: None)
            await client.request(p.SESSION_APPEND, {"session": path, "messages": conversation(4)})
            size = len(read_entries(path))
            llm.script(slow(3.0))
            mark = client.mark()
            task = asyncio.create_task(client.request(p.COMPACT, {"session": path}))
            await client.wait_for(p.COMPACTION_STATUS, lambda s: s["state"] == "running", since=mark)
            for _ in range(250):  # until the model call is in flight
                if llm.requests and llm.requests[-1].finished is None:
                    break
                await asyncio.sleep(0.02)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            status = await client.wait_for(p.COMPACTION_STATUS, lambda s: s["state"] != "running", since=mark)
            assert status["state"] == "cancelled"
            await asyncio.sleep(3.0)  # past the model's late answer
            assert len(read_entries(path)) == size

            # A timeout cancels too.
            llm.script(slow(3.0))
            with pytest.raises(TimeoutError):
                await client.request(p.COMPACT, {"session": path}, timeout=0.5)
            await client.wait_for(p.COMPACTION_STATUS, lambda s: s["state"] == "cancelled", since=mark)
        assert client.returncode == 0


@pytest.mark.asyncio
async def test_a_daemon_that_dies(tmp_path: Path) -> None:
    client = CtxdClient(initialization_options={"roots": [str(tmp_path)]}, env=server_env())
    await client.start()
    try:
        waiting = asyncio.create_task(client.wait_for(p.DID_CREATE, timeout=10))
        assert client.process is not None
        client.process.kill()
        with pytest.raises(ServerExitedError):
            await waiting
        with pytest.raises(ServerExitedError):
            await client.request(p.SESSION_LIST, {})
    finally:
        assert await client.close() not in (0, None)


@pytest.mark.parametrize("shape", ["empty", "clone"])
def test_the_daemon_starts_beside_a_folder_named_ctxd(tmp_path: Path, shape: str) -> None:
    """A working directory holding a folder named ``ctxd`` (a clone of this repository, say) must not
    shadow the package the daemon runs: the client's default command and the example, from there."""
    folder = tmp_path / "ctxd"
    folder.mkdir()
    if shape == "clone":
        (folder / "ctxd").mkdir()  # no __init__.py: a namespace package, were it imported
        (folder / "README.md").write_text("a clone\n")
    env = {**server_env(), "PYTHONPATH": os.environ.get("PYTHONPATH", "")}  # ctxd as installed
    code = (
        "import asyncio, tempfile\n"
        "from ctxd.client import CtxdClient\n"
        "async def main():\n"
        "    async with CtxdClient(initialization_options={'roots': [tempfile.mkdtemp()], 'watch': False}) as c:\n"
        "        print('listed', (await c.request('session/list', {}))['sessions'])\n"
        "asyncio.run(main())\n"
    )
    script = tmp_path / "use_client.py"
    script.write_text(code)
    out = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, env=env, cwd=str(tmp_path), timeout=60
    )
    assert out.returncode == 0 and "listed []" in out.stdout, out.stdout + out.stderr
    example = subprocess.run(
        [sys.executable, str(REPO / "examples" / "client_example.py")],
        capture_output=True,
        text=True,
        env=env,
        cwd=str(tmp_path),
        timeout=60,
    )
    assert example.returncode == 0 and "daemon exited with code 0" in example.stdout, example.stdout + example.stderr


def test_the_example_runs() -> None:
    out = subprocess.run(
        [sys.executable, str(REPO / "examples" / "client_example.py")],
        capture_output=True,
        text=True,
        env={**server_env(), "PYTHONPATH": os.environ.get("PYTHONPATH", "")},  # the example finds ctxd itself
        cwd=str(REPO.parent),
        timeout=60,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    text = out.stdout
    assert "connected to ctxd" in text
    assert "session tree (" in text and "* " in text
    assert "context for the model: " in text
    assert "dry run: summarise" in text
    assert "~ $/progress: begin" in text and "~ $/progress: end" in text
    assert "~ compaction/status: running" in text and "~ compaction/status: succeeded" in text
    assert "~ session/didChange" in text and "~ context/usage" in text
    assert "compaction succeeded: entry" in text
    assert "error -31001" in text
    assert "daemon exited with code 0" in text
