"""Real pi (from npm, installed by scripts/pi.sh; the version: scripts/versions.env) in RPC mode with ctxd's extension,
against the recording fake OpenAI server on 127.0.0.1 (tests/fakes/openai_server.py).

:class:`Pi` writes pi's agent directory (``models.json`` naming the fake server's model with a
small window, ``settings.json`` with compaction settings and the extension's ``ctxd`` settings),
starts ``node cli.js --mode rpc -e integrations/pi``, reads its JSONL records in a thread, and
offers commands, waits and the session file.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from fakes.openai_server import FakeOpenAIServer, RecordedRequest

REPO = Path(__file__).resolve().parents[3]
EXTENSION = REPO / "integrations" / "pi"
HERE = Path(__file__).resolve().parent
TIMEOUT = 90.0
"""How long a wait for pi's answer may take before the test fails: a bound, not a speed the test checks (pi and the
daemon answer in a few seconds; on CI's 2 cores shared with the other suites a wait of 30 s once ran out)."""
CTXD_COMMAND = [sys.executable, "-m", "ctxd", "serve"]
KEY = "sk-pi-test-key"


def _tools() -> tuple[str, str]:
    """(node, pi's cli.js): scripts/node24.sh and scripts/pi.sh install them once."""
    node_bin = subprocess.run(
        ["bash", str(REPO / "scripts" / "node24.sh")], check=True, capture_output=True, text=True, timeout=600
    ).stdout.strip()
    cli = subprocess.run(
        ["bash", str(REPO / "scripts" / "pi.sh")], check=True, capture_output=True, text=True, timeout=900
    ).stdout.strip()
    return os.path.join(node_bin, "node"), cli


_TOOLS: tuple[str, str] | None = None


def tools() -> tuple[str, str]:
    global _TOOLS
    if _TOOLS is None:
        _TOOLS = _tools()
    return _TOOLS


class Pi:
    """One pi process; use as a context manager."""

    def __init__(
        self,
        home: Path,
        llm: FakeOpenAIServer,
        *,
        window: int = 4_000,
        reserve: int = 1_000,
        keep_recent: int = 300,
        ctxd: dict[str, Any] | None = None,
        env: dict[str, str] | None = None,
        extensions: list[Path] | None = None,
        with_ctxd: bool = True,
        write_settings: bool = True,
    ) -> None:
        self.home = home
        self.llm = llm
        self.agent = home / "agent"
        self.work = home / "work"
        self.log = home / "ctxd-pi.log"
        self.window = window
        self.ctxd_settings = {"command": CTXD_COMMAND, "logFile": str(self.log), **(ctxd or {})}
        self.compaction = {"reserveTokens": reserve, "keepRecentTokens": keep_recent}
        self.extra_env = env or {}
        self.extensions = ([EXTENSION] if with_ctxd else []) + (extensions or [])
        self.write_settings = write_settings
        """False: settings.json is left as the test (or `ctxd setup pi`) wrote it."""
        self.records: list[dict[str, Any]] = []
        self.stderr = bytearray()
        self.process: subprocess.Popen[bytes] | None = None
        self._cond = threading.Condition()
        self._next = 0

    # --- lifecycle -------------------------------------------------------------------------------

    def start(self) -> Pi:
        node, cli = tools()
        self.agent.mkdir(parents=True, exist_ok=True)
        self.work.mkdir(parents=True, exist_ok=True)
        models = {
            "providers": {
                "fake": {
                    "baseUrl": self.llm.url,
                    "api": "openai-completions",
                    "apiKey": KEY,
                    "models": [{"id": "fake-model", "contextWindow": self.window, "maxTokens": 1_000}],
                }
            }
        }
        (self.agent / "models.json").write_text(json.dumps(models))
        if self.write_settings:
            path = self.agent / "settings.json"
            settings = json.loads(path.read_text()) if path.exists() else {}  # e.g. packages `pi install` added
            settings.update(compaction=self.compaction, ctxd=self.ctxd_settings)
            path.write_text(json.dumps(settings))
        env = {k: v for k, v in os.environ.items() if not k.startswith(("CTXD_", "PI_"))}
        env.update(
            PI_CODING_AGENT_DIR=str(self.agent),
            HOME=str(self.home),
            PATH=os.path.dirname(node) + os.pathsep + env.get("PATH", ""),
            # The daemon pi's extension starts: ctxd importable, no config file, no network for litellm.
            PYTHONPATH=os.pathsep.join(x for x in (str(REPO), env.get("PYTHONPATH", "")) if x),
            CTXD_CONFIG=str(self.home / "no-ctxd-config.json"),
            LITELLM_LOCAL_MODEL_COST_MAP="True",
        )
        env.update(self.extra_env)
        argv = [node, cli, "--mode", "rpc", "--provider", "fake", "--model", "fake-model"]
        for ext in self.extensions:
            argv += ["-e", str(ext)]
        self.process = subprocess.Popen(
            argv, cwd=self.work, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._read_stderr, daemon=True).start()
        return self

    def __enter__(self) -> Pi:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self, timeout: float = 15) -> int | None:
        """Close pi's stdin (an orderly shutdown, as pi's RPC docs ask), then wait; kill if stuck."""
        p = self.process
        if p is None:
            return None
        with contextlib.suppress(OSError):
            if p.stdin is not None and not p.stdin.closed:
                p.stdin.close()
        try:
            return p.wait(timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(5)
            raise AssertionError(f"pi did not exit within {timeout}s; stderr: {self.stderr[-2000:]!r}") from None

    def pi(self, *args: str) -> subprocess.CompletedProcess[str]:
        """Run pi's CLI once (``pi install ...``) with this agent directory."""
        node, cli = tools()
        self.agent.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "PI_CODING_AGENT_DIR": str(self.agent), "HOME": str(self.home)}
        return subprocess.run([node, cli, *args], env=env, capture_output=True, text=True, timeout=120, check=True)

    def kill(self) -> None:
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(10)

    def _read(self) -> None:
        assert self.process is not None and self.process.stdout is not None
        for line in self.process.stdout:
            with contextlib.suppress(ValueError):
                record = json.loads(line)
                with self._cond:
                    self.records.append(record)
                    self._cond.notify_all()
        with self._cond:
            self._cond.notify_all()

    def _read_stderr(self) -> None:
        assert self.process is not None and self.process.stderr is not None
        for chunk in iter(lambda: self.process.stderr.read1(4096), b""):  # type: ignore[union-attr]
            self.stderr.extend(chunk)

    # --- records ---------------------------------------------------------------------------------

    def mark(self) -> int:
        with self._cond:
            return len(self.records)

    def wait(self, predicate: Callable[[dict[str, Any]], bool], *, since: int = 0, timeout: float = TIMEOUT) -> Any:
        """The first record from ``since`` on that matches."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for record in self.records[since:]:
                    if predicate(record):
                        return record
                remaining = deadline - time.monotonic()
                if remaining <= 0 or (self.process is not None and self.process.poll() is not None):
                    kinds = [r.get("type") for r in self.records[since:]]
                    raise AssertionError(
                        f"no matching record within {timeout}s; saw {kinds}; stderr: {self.stderr[-1500:]!r}"
                    )
                self._cond.wait(min(remaining, 0.2))

    def send(self, command: dict[str, Any]) -> str:
        assert self.process is not None and self.process.stdin is not None
        self._next += 1
        command = {"id": f"t{self._next}", **command}
        self.process.stdin.write((json.dumps(command) + "\n").encode())
        self.process.stdin.flush()
        return str(command["id"])

    def command(self, command: dict[str, Any], *, timeout: float = TIMEOUT) -> dict[str, Any]:
        """Send a command and return its response (``success`` checked by the caller)."""
        since = self.mark()
        cid = self.send(command)
        response: dict[str, Any] = self.wait(
            lambda r: r.get("type") == "response" and r.get("id") == cid, since=since, timeout=timeout
        )
        return response

    def prompt(self, text: str, *, timeout: float = TIMEOUT) -> int:
        """Prompt, wait until pi settles (no retry or compaction left to run); returns the mark before."""
        since = self.mark()
        response = self.command({"type": "prompt", "message": text}, timeout=timeout)
        assert response["success"], response
        self.wait(lambda r: r.get("type") == "agent_settled", since=since, timeout=timeout)
        return since

    def notes(self, since: int = 0) -> list[str]:
        """Messages the extensions showed (ctx.ui.notify)."""
        return [
            str(r.get("message"))
            for r in self.records[since:]
            if r.get("type") == "extension_ui_request" and r.get("method") == "notify"
        ]

    def session_file(self) -> Path:
        data = self.command({"type": "get_state"})["data"]
        return Path(data["sessionFile"])

    def entries(self) -> list[dict[str, Any]]:
        with open(self.session_file(), encoding="utf-8") as f:
            return [json.loads(line) for line in f if line.strip()]

    def daemon_pid(self, timeout: float = 15) -> int:
        """The daemon pi's extension runs, once it has answered initialize (the extension's log says so)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            pids = self.ctxd_pids()
            log = self.log.read_text() if self.log.exists() else ""
            if len(pids) == 1 and f"serving {self.agent / 'sessions'} (pid {pids[0]})" in log:
                return pids[0]
            time.sleep(0.05)
        raise AssertionError(f"pi's extension did not start ctxd: {self.ctxd_pids()}")

    def ctxd_pids(self) -> list[int]:
        """The ctxd daemons pi started (its children running ``ctxd serve``)."""
        assert self.process is not None
        return [pid for pid, cmd in children(self.process.pid) if "ctxd" in cmd and "serve" in cmd]


def children(ppid: int) -> Iterator[tuple[int, str]]:
    """(pid, command line) of the live processes whose parent is ``ppid``."""
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", encoding="utf-8") as f:
                stat = f.read()
            with open(f"/proc/{name}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        if fields[0] != "Z" and int(fields[1]) == ppid:
            yield int(name), cmd


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
            stat = f.read()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2 :].split()[0] != "Z"


def wait_gone(pid: int, timeout: float = 10) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        time.sleep(0.05)
    return False


def chat_requests(llm: FakeOpenAIServer, since: int = 0) -> list[RecordedRequest]:
    """pi's own requests to the model (streamed), in order."""
    return [r for r in llm.requests[since:] if r.streamed]


def ctxd_requests(llm: FakeOpenAIServer, since: int = 0) -> list[RecordedRequest]:
    """ctxd's summarisation requests (litellm, not streamed), in order."""
    return [r for r in llm.requests[since:] if r.method == "POST" and not r.streamed]


def text_of(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(b.get("text", "")) for b in content if isinstance(b, dict))
    return ""
