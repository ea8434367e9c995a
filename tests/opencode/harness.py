"""Running real opencode (``opencode-ai`` from npm, :file:`scripts/opencode.sh`) offline in tests.

:class:`OpencodeHome` is a private set of XDG directories (data, config, state, cache) and a config whose
only provider is ``@ai-sdk/openai-compatible`` pointed at a fake Chat Completions server on 127.0.0.1
(:mod:`tests.fakes.openai_server`). Its model's window is small, so a turn that the fake reports as large
makes opencode compact the session on its own. :func:`compacting_responder` scripts the fake: a bash tool call,
an answer reporting a large prompt, then a summary for opencode's compaction request.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import attrs
import pytest
from fakes.openai_server import Action, FakeOpenAIServer, reply, tool_call

REPO = Path(__file__).resolve().parents[2]
WINDOW = 20_000
"""The fake model's context window (tokens) in opencode's config."""
LARGE = 19_000
"""Prompt tokens the fake reports to push opencode over its compaction threshold."""
LONG_OUTPUT_COMMAND = "seq 1 1500; echo hello-from-bash"
"""A bash command whose output (6,894 characters) is over the plugin's 2,000-character limit and under opencode's
own cut (2,000 lines, 51,200 bytes), so what reaches the model depends on ctxd's cut alone. A longer output is
cut by opencode first, and what its preview keeps depends on how the output was chunked: past 100 KB in one
chunk (a loaded machine) only the last chunk is kept."""
SUMMARY = "## Goal\nSay hello with bash.\n\n## Progress\nRan `echo hello-from-bash`; it printed hello-from-bash."
"""What the fake answers opencode's compaction request with."""


def opencode_binary() -> str:
    """The private opencode, installed from npm on first use (skips the test only when that install fails)."""
    explicit = os.environ.get("CTXD_OPENCODE")
    if explicit:
        return explicit
    out = subprocess.run(
        ["bash", str(REPO / "scripts" / "opencode.sh")], check=False, capture_output=True, text=True, timeout=900
    )
    if out.returncode != 0:
        pytest.skip(f"opencode-ai could not be installed from npm (unreachable?): {out.stderr.strip()[-300:]}")
    return out.stdout.strip().splitlines()[-1]


@attrs.define
class OpencodeHome:
    root: Path
    server: FakeOpenAIServer
    binary: str
    plugins: list[str] = attrs.field(factory=list)
    extra_env: dict[str, str] = attrs.field(factory=dict)
    windows: dict[str, int] = attrs.field(factory=lambda: {"fake-model": WINDOW})
    """The provider's models (``fake/<name>``) and each one's context window (tokens); the first is the default."""

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def database(self) -> Path:
        return self.data / "opencode" / "opencode.db"

    @property
    def workdir(self) -> Path:
        return self.root / "work"

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENCODE", "XDG_"))}
        env.update(
            HOME=str(self.root / "home"),
            XDG_DATA_HOME=str(self.data),
            XDG_CONFIG_HOME=str(self.root / "config"),
            XDG_STATE_HOME=str(self.root / "state"),
            XDG_CACHE_HOME=str(self.root / "cache"),
            OPENCODE_DISABLE_MODELS_FETCH="1",
            OPENCODE_DISABLE_AUTOUPDATE="1",
            OPENCODE_DISABLE_SHARE="1",
            OPENCODE_DISABLE_LSP_DOWNLOAD="1",
            NO_PROXY="127.0.0.1,localhost",
            PWD=str(self.workdir),
        )
        env.update(self.extra_env)
        return env

    def write_config(self) -> None:
        for name in ("home", "config/opencode", "state", "cache", "work", "data"):
            (self.root / name).mkdir(parents=True, exist_ok=True)
        config: dict[str, Any] = {
            "$schema": "https://opencode.ai/config.json",
            "autoupdate": False,
            "share": "disabled",
            "model": f"fake/{next(iter(self.windows))}",
            "small_model": f"fake/{next(iter(self.windows))}",
            "permission": {"bash": "allow", "edit": "allow", "webfetch": "deny"},
            "provider": {
                "fake": {
                    "npm": "@ai-sdk/openai-compatible",
                    "name": "Fake",
                    "options": {"baseURL": self.server.url, "apiKey": "fake-key"},
                    "models": {
                        name: {"name": f"Fake {name}", "tool_call": True, "limit": {"context": window, "output": 2_000}}
                        for name, window in self.windows.items()
                    },
                }
            },
        }
        if self.plugins:
            config["plugin"] = self.plugins
        (self.root / "config" / "opencode" / "opencode.json").write_text(json.dumps(config, indent=2))

    def run(self, *args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
        """``opencode run``; ``timeout`` bounds a run that hangs (one takes seconds; 60 s once ran out on CI's 2 cores
        shared with the other suites)."""
        return subprocess.run(
            [self.binary, "run", *args],
            cwd=self.workdir,
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )


def is_compaction_request(body: dict[str, Any]) -> bool:
    last = (body.get("messages") or [{}])[-1]
    content = last.get("content")
    text = content if isinstance(content, str) else json.dumps(content)
    return "summary" in text.lower() and ("continu" in text.lower() or "compact" in text.lower())


def is_title_request(body: dict[str, Any]) -> bool:
    first = (body.get("messages") or [{}])[0]
    content = first.get("content")
    text = content if isinstance(content, str) else json.dumps(content)
    return "title generator" in text.lower() or "generate a title" in text.lower()


class CompactingResponder:
    """Scripts the fake for one compaction: title requests get a title, compaction requests the summary;
    the first turn runs bash once, and the answer after its result reports a prompt near the window (so
    opencode compacts); every later request gets a short answer with small usage."""

    def __init__(self, summary: str = SUMMARY, command: str = "echo hello-from-bash") -> None:
        self.summary = summary
        self.command = command
        self.turns = 0

    def __call__(self, body: dict[str, Any], index: int) -> Action | None:
        if is_title_request(body):
            return reply("Hello with bash")
        if is_compaction_request(body):
            return reply(self.summary)
        self.turns += 1
        if self.turns == 1:
            call = {"command": self.command, "description": "Say hello"}
            return tool_call("bash", call, call_id=f"call_bash_{index}")
        if self.turns == 2:
            usage = {"prompt_tokens": LARGE, "completion_tokens": 20, "total_tokens": LARGE + 20}
            return reply("It printed hello-from-bash.", usage=usage)
        return reply(f"Done (turn {self.turns}).")
