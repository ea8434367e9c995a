"""Running the real Claude Code (npm ``@anthropic-ai/claude-code``) offline against the fake Anthropic server.

Each :class:`ClaudeCode` has a private home, Claude config folder (``CLAUDE_CONFIG_DIR``), project folder and XDG
data/state folders (where ctxd's hooks archive and log), and runs ``claude -p`` with the hooks of the ctxd
plugin (installed with ``claude plugin install`` or loaded with ``--plugin-dir``). Telemetry, auto-update and
other non-essential traffic are off; the only network is 127.0.0.1.

The binary comes from ``$CTXD_CLAUDE_CODE`` (``make unit`` sets it after ``scripts/claude-code.sh`` installs
it) or the cache that script fills; without either the tests skip, saying how to install it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import pytest
from fakes.anthropic_server import FakeAnthropicServer
from helpers.agent_versions import CLAUDE_CODE

REPO = Path(__file__).resolve().parents[2]
VERSION = CLAUDE_CODE
"""The release the tests run (scripts/versions.env)."""
PLUGIN = REPO / "integrations" / "claude-code"
TOOLS = "Bash Edit Write Read"
"""Allowed without a prompt (``--allowedTools``): -p mode cannot ask, and root may not skip permissions."""


def npm_agent(variable: str, cache: str, command: str, missing: str) -> str:
    """An agent's executable: ``$variable`` when set (it must be executable), else the one a scripts/*.sh
    installed into ``.cache/<cache>``; the test skips with ``missing`` when there is neither."""
    explicit = os.environ.get(variable)
    if explicit:
        if not os.access(explicit, os.X_OK):
            pytest.fail(f"{variable}={explicit} is not an executable")
        return explicit
    cached = REPO / ".cache" / cache / "node_modules" / ".bin" / command
    if cached.exists():
        return str(cached)
    pytest.skip(missing)


def claude_binary() -> str:
    return npm_agent(
        "CTXD_CLAUDE_CODE",
        f"claude-code-{VERSION}",
        "claude",
        f"Claude Code {VERSION} is not installed: run `bash scripts/claude-code.sh` (make unit does)",
    )


def ctxd_bin_dir() -> str:
    """The folder holding this environment's ``ctxd`` command."""
    found = Path(sys.executable).parent / "ctxd"
    if not found.exists():
        pytest.fail(f"no ctxd command beside {sys.executable}: install the package (make .venv/.installed)")
    return str(found.parent)


@attrs.define
class Run:
    returncode: int
    stdout: str
    stderr: str
    seconds: float

    @property
    def result(self) -> dict[str, Any]:
        """Claude's ``--output-format json`` result object."""
        try:
            value = json.loads(self.stdout)
        except ValueError:
            raise AssertionError(f"claude printed no JSON result:\n{self.stdout}\n{self.stderr}") from None
        assert isinstance(value, dict)
        return value


@attrs.define
class ClaudeCode:
    base: Path
    server: FakeAnthropicServer
    binary: str = attrs.field(factory=claude_binary)
    extra_env: dict[str, str] = attrs.field(factory=dict)
    plugin_dir: Path | None = None
    """Load the plugin with ``--plugin-dir`` (else it must be installed: :meth:`install_plugin`)."""

    def __attrs_post_init__(self) -> None:
        for folder in (self.home, self.config, self.project, self.data, self.state):
            folder.mkdir(parents=True, exist_ok=True)

    @property
    def home(self) -> Path:
        return self.base / "home"

    @property
    def config(self) -> Path:
        return self.base / "claude"

    @property
    def project(self) -> Path:
        return self.base / "project"

    @property
    def data(self) -> Path:
        return self.base / "data"

    @property
    def state(self) -> Path:
        return self.base / "state"

    @property
    def archive(self) -> Path:
        return self.data / "ctxd" / "archive"

    @property
    def log(self) -> Path:
        return self.state / "ctxd" / "hooks.log"

    def env(self) -> dict[str, str]:
        env = {
            "HOME": str(self.home),
            "PATH": os.pathsep.join([ctxd_bin_dir(), "/usr/local/bin", "/usr/bin", "/bin"]),
            "LANG": "C.UTF-8",
            "TMPDIR": str(self.base),
            "CLAUDE_CONFIG_DIR": str(self.config),
            "ANTHROPIC_BASE_URL": self.server.url,
            "ANTHROPIC_API_KEY": "fake-key",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_AUTOUPDATER": "1",
            "DISABLE_ERROR_REPORTING": "1",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "XDG_DATA_HOME": str(self.data),
            "XDG_STATE_HOME": str(self.state),
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        }
        env.update(self.extra_env)
        return env

    def install_plugin(self, marketplace: Path = REPO) -> Run:
        """``claude plugin install ctxd --marketplace REPO``: the README's command, into the private config."""
        return self._run(["plugin", "install", "ctxd", "--marketplace", str(marketplace)], cwd=self.home)

    def run(self, prompt: str, *, resume: str | None = None, timeout: float = 120) -> Run:
        args = ["-p", prompt, "--output-format", "json", "--allowedTools", TOOLS]
        if resume:
            args += ["--resume", resume]
        if self.plugin_dir is not None:
            args += ["--plugin-dir", str(self.plugin_dir)]
        return self._run(args, cwd=self.project, timeout=timeout)

    def converse(
        self, *prompts: str, timeout: float = 120, after: Callable[[int, dict[str, Any]], None] | None = None
    ) -> list[dict[str, Any]]:
        """One Claude Code process taking ``prompts`` one after the other, as a user types them (stream-json):
        each is sent once the previous one has its result (``after(i, result)`` runs then). The result objects,
        in order."""
        args = ["-p", "--input-format", "stream-json", "--output-format", "stream-json", "--verbose"]
        args += ["--allowedTools", TOOLS]
        if self.plugin_dir is not None:
            args += ["--plugin-dir", str(self.plugin_dir)]
        process = subprocess.Popen(
            [self.binary, *args],
            cwd=self.project,
            env=self.env(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        assert process.stdin is not None and process.stdout is not None
        results: list[dict[str, Any]] = []
        try:
            for prompt in prompts:
                message = {"type": "user", "message": {"role": "user", "content": prompt}}
                process.stdin.write(json.dumps(message) + "\n")
                process.stdin.flush()
                for line in process.stdout:
                    event = json.loads(line)
                    if event.get("type") == "result":
                        results.append(event)
                        if after is not None:
                            after(len(results) - 1, event)
                        break
            process.stdin.close()
            process.wait(timeout=timeout)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
        return results

    def _run(self, args: list[str], *, cwd: Path, timeout: float = 120) -> Run:
        started = time.monotonic()
        done = subprocess.run(
            [self.binary, *args],
            cwd=cwd,
            env=self.env(),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        return Run(done.returncode, done.stdout, done.stderr, time.monotonic() - started)

    def transcript(self, session_id: str) -> Path:
        found = list((self.config / "projects").glob(f"*/{session_id}.jsonl"))
        assert len(found) == 1, f"transcript of {session_id}: {found}"
        return found[0]

    def log_text(self) -> str:
        return self.log.read_text(encoding="utf-8") if self.log.exists() else ""

    def cleanup(self) -> None:
        shutil.rmtree(self.base, ignore_errors=True)
