"""opencode set up the way a user sets it up: ``ctxd setup opencode`` into private XDG dirs, then real opencode
1.18.33 with no ctxd on PATH and no CTXD_OPENCODE_COMMAND: the plugin copy in ctxd's data folder runs this ctxd
by its absolute path, the facts reach the first request after the compaction, and ``--uninstall`` puts
opencode.json back byte for byte."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from claude_code.harness import ctxd_bin_dir
from fakes.openai_server import FakeOpenAIServer

from .harness import LONG_OUTPUT_COMMAND, CompactingResponder, OpencodeHome, opencode_binary
from .test_plugin import GOAL, assert_the_plugin_acted


def ctxd_command() -> str:
    return str(Path(ctxd_bin_dir()) / "ctxd")


def test_opencode_set_up_by_ctxd_setup_keeps_the_facts_and_uninstalls_cleanly(tmp_path: Path) -> None:
    set_up_and_check(tmp_path, ctxd_command())


def set_up_and_check(tmp_path: Path, ctxd: str) -> None:
    """The whole scenario with ``ctxd`` (this checkout's, or the one pipx installed from the wheel)."""
    binary = opencode_binary()
    with FakeOpenAIServer() as server:
        server.responder = CompactingResponder(command=LONG_OUTPUT_COMMAND)
        env = {"CTXD_OPENCODE_TOOL_OUTPUT_CHARS": "2000", "CTXD_CONFIG": str(tmp_path / "no-config.json")}
        home = OpencodeHome(tmp_path / "oc", server, binary, extra_env=env)
        home.write_config()
        config = home.root / "config" / "opencode" / "opencode.json"
        before = config.read_bytes()
        paths = os.environ.get("PATH", "/usr/bin:/bin").split(os.pathsep)
        bare = os.pathsep.join(d for d in paths if not os.path.exists(os.path.join(d, "ctxd")))
        home.extra_env["PATH"] = bare + os.pathsep + str(Path(binary).parent)
        env = home.env()
        env.pop("CTXD_OPENCODE_COMMAND", None)

        def setup(*args: str) -> subprocess.CompletedProcess[str]:
            argv = [ctxd, "setup", "opencode", *args]
            return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=180, check=False)

        dry = setup("--dry-run")
        assert dry.returncode == 0 and "would change" in dry.stdout, dry.stdout + dry.stderr
        assert config.read_bytes() == before
        done = setup()
        assert done.returncode == 0, done.stderr
        again = setup()
        assert again.returncode == 0 and "nothing to change" in again.stdout, again.stdout + again.stderr
        settings = json.loads(config.read_text())
        [url] = settings["plugin"]
        assert url.startswith("file://" + str(home.data / "ctxd" / "integrations" / "opencode"))
        assert settings["mcp"]["ctxd"] == {"type": "local", "command": [os.path.realpath(ctxd), "mcp"]}

        run = home.run(GOAL)
        assert run.returncode == 0, run.stderr[-3000:]
        assert_the_plugin_acted(home, [r.body for r in server.requests])
        names = {t.get("function", {}).get("name") for r in server.requests for t in r.body.get("tools") or []}
        assert "ctxd_search_history" in names  # opencode started `ctxd mcp` from mcp.ctxd: its tools reach the model

        doctor = subprocess.run(
            [ctxd, "doctor", "--json"], env=env, capture_output=True, text=True, timeout=120, check=False
        )
        report = json.loads(doctor.stdout)
        assert doctor.returncode == 0 and report["ok"], doctor.stdout
        assert {c["check"] for c in report["checks"]} >= {"plugin", "daemon command", "mcp server"}

        gone = setup("--uninstall")
        assert gone.returncode == 0, gone.stderr
        assert config.read_bytes() == before
        assert not (home.data / "ctxd" / "integrations" / "opencode").exists()
