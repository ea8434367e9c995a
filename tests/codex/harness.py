"""Running the real Codex CLI (npm ``@openai/codex``) offline against the fake Responses API server.

Each :class:`Codex` has a private ``CODEX_HOME`` whose ``config.toml`` defines a custom model provider ``fake``
(``base_url`` = the fake server, ``wire_api = "responses"``) and a low ``model_auto_compact_token_limit``, so
that the fake's large reported usage makes Codex compact. With a non-OpenAI provider a compaction is a plain
``/v1/responses`` request whose last user item is Codex's compaction prompt (``FakeResponsesServer`` tells them
apart). Commands run without a sandbox or approvals; the only network is 127.0.0.1.

The binary comes from ``$CTXD_CODEX`` (``make unit`` sets it after ``scripts/codex.sh`` installs it) or the cache
that script fills; without either the tests skip, saying how to install it.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import attrs
import pytest
from claude_code.harness import ctxd_bin_dir, npm_agent
from fakes.responses_server import FakeResponsesServer
from helpers.agent_versions import CODEX

REPO = Path(__file__).resolve().parents[2]
VERSION = CODEX
"""The release the tests run (scripts/versions.env)."""


def codex_binary() -> str:
    return npm_agent(
        "CTXD_CODEX",
        f"codex-{VERSION}",
        "codex",
        f"Codex {VERSION} is not installed: run `bash scripts/codex.sh` (make unit does; it needs npm)",
    )


def node_bin() -> str:
    """The private Node 24's bin folder (the npm package's launcher is a Node script)."""
    done = subprocess.run(["bash", str(REPO / "scripts" / "node24.sh")], capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        pytest.skip(f"Node 24 is not installed (scripts/node24.sh needs npm): {done.stderr.strip()[-300:]}")
    return done.stdout.strip()


@attrs.define
class Run:
    returncode: int
    stdout: str
    stderr: str
    seconds: float


@attrs.define
class Codex:
    base: Path
    server: FakeResponsesServer
    compact_limit: int = 3000
    extra_config: str = ""
    """TOML put into config.toml before the provider's table (top-level keys such as compact_prompt, or tables)."""
    extra_env: dict[str, str] = attrs.field(factory=dict)
    extra_path: list[str] = attrs.field(factory=list)
    """Folders put before ``PATH`` (where the hooks find ``ctxd``)."""
    binary: str = attrs.field(factory=codex_binary)
    write_config: bool = True
    """Whether :meth:`exec` writes config.toml (False once ``ctxd setup codex`` has added to it)."""

    @property
    def home(self) -> Path:
        return self.base / "codex-home"

    @property
    def work(self) -> Path:
        return self.base / "project"

    def config(self) -> str:
        return (
            'model = "fake-model"\nmodel_provider = "fake"\n'
            f"model_auto_compact_token_limit = {self.compact_limit}\n"
            'model_reasoning_summary = "none"\n'
            f"{self.extra_config}\n"
            "[model_providers.fake]\n"
            f'name = "fake"\nbase_url = "{self.server.url}"\nwire_api = "responses"\n'
            "request_max_retries = 0\nstream_max_retries = 0\n"
        )

    def env(self) -> dict[str, str]:
        keep = {k: v for k, v in os.environ.items() if k in ("LANG", "LC_ALL", "TERM", "TMPDIR")}
        path = ":".join([*self.extra_path, node_bin(), os.environ.get("PATH", "/usr/bin:/bin")])
        home = self.base / "home"
        home.mkdir(exist_ok=True)
        env = dict(keep, PATH=path, HOME=str(home), CODEX_HOME=str(self.home), RUST_LOG="error")
        env.update(self.extra_env)
        return env

    def exec(self, prompt: str, *args: str, resume: bool = False, timeout: float = 60) -> Run:
        """``codex exec PROMPT`` (or ``codex exec resume --last PROMPT``) in the project folder."""
        self.home.mkdir(parents=True, exist_ok=True)
        self.work.mkdir(parents=True, exist_ok=True)
        if self.write_config:
            (self.home / "config.toml").write_text(self.config())
        head = [self.binary, "exec"] + (["resume", "--last"] if resume else [])
        command = [*head, "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox", *args, prompt]
        if not resume:
            command[2:2] = ["-C", str(self.work)]
        start = time.monotonic()
        done = subprocess.run(
            command,
            cwd=self.work,
            env=self.env(),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        return Run(done.returncode, done.stdout, done.stderr, time.monotonic() - start)

    def rollouts(self) -> list[Path]:
        return sorted((self.home / "sessions").rglob("rollout-*.jsonl"))


def ctxd_command() -> str:
    """This environment's ``ctxd`` command (the hooks run it)."""
    return str(Path(ctxd_bin_dir()) / "ctxd")
