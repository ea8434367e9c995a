"""Real pi (scripts/versions.env) with ctxd's extension installed by ``ctxd setup pi`` from the pipx-installed wheel
(the self-contained package, ctxd's TypeScript client vendored): a conversation that crosses pi's threshold compacts
through ctxd against the fake OpenAI server; ``--uninstall`` leaves pi's settings as before. Also: the npm tarball
``make dist`` packs from the same package installs with ``pi install``."""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from .conftest import REPO, Installed, tool_dir

PI_TESTS = REPO / "integrations" / "pi" / "tests"


@pytest.fixture(scope="module")
def pi_tests() -> Iterator[tuple[ModuleType, ModuleType]]:
    """pi's harness and its compaction conversation (integrations/pi/tests), imported from their files."""
    sys.path.insert(0, str(PI_TESTS))
    try:
        import pi_harness

        spec = importlib.util.spec_from_file_location("pi_compaction_scenes", PI_TESTS / "test_compaction.py")
        assert spec is not None and spec.loader is not None
        scenes = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(scenes)
        yield pi_harness, scenes
    finally:
        sys.path.remove(str(PI_TESTS))


def user_settings(pi: Any) -> bytes:
    """The user's pi settings before ctxd: the harness's compaction settings, in pi's own layout."""
    return (json.dumps({"compaction": pi.compaction, "defaultThinkingLevel": "off"}, indent=2) + "\n").encode()


def test_pi_compacts_through_the_extension_ctxd_setup_installed(
    installed: Installed, tmp_path: Path, pi_tests: tuple[ModuleType, ModuleType]
) -> None:
    from fakes.openai_server import FakeOpenAIServer

    harness, scenes = pi_tests
    node, cli = harness.tools()
    with FakeOpenAIServer(default_text="## Goal\nFake summary from the model.") as llm:
        # No -e: only what `ctxd setup pi` installed; no ctxd on PATH and none importable from this checkout.
        pi = harness.Pi(tmp_path, llm, with_ctxd=False, write_settings=False, env={"PYTHONPATH": ""})
        pi.agent.mkdir(parents=True)
        settings = pi.agent / "settings.json"
        before = user_settings(pi)
        settings.write_bytes(before)
        env = installed.env(
            PATH=f"{tool_dir(tmp_path, 'pi', [node, cli])}:{installed.env()['PATH']}",
            PI_CODING_AGENT_DIR=str(pi.agent),
            XDG_DATA_HOME=str(tmp_path / "data"),
        )
        out = installed.run("setup", "pi", env=env).stdout
        copy = tmp_path / "data" / "ctxd" / "integrations" / "pi"
        assert f"ran: {tmp_path / 'pi-bin' / 'pi'} install {copy}" in out, out
        written = json.loads(settings.read_text())
        assert written["ctxd"]["command"] == [str(installed.ctxd.resolve()), "serve"]
        assert "../../../clients" not in (copy / "src" / "client.ts").read_text()
        assert installed.run("setup", "pi", env=env).stdout.startswith("pi: nothing to change")

        pi.extra_env.update(CTXD_PI_LOG=str(pi.log))
        with pi:
            scenes.deploy_conversation(pi, llm)
            (entry,) = scenes.compactions(pi.entries())
            assert entry["fromHook"] is True  # ctxd wrote the summary pi stored
            ledger = entry["details"]["ctxd"]
            assert ledger["trigger"] == "threshold"
            # The wheel has no litellm: pi's model cannot summarise, the offline summariser does and says why.
            assert ledger["path"].startswith("fallback"), ledger
            assert any("pip install 'ctxd[llm]'" in failure for failure in ledger["failures"]), ledger
            assert "make deploy-staging" in entry["summary"]
            daemons = [cmd for _, cmd in harness.children(pi.process.pid) if " serve" in cmd]
            assert daemons and str(installed.ctxd.resolve().parent) in daemons[0], daemons

        doctor = json.loads(installed.run("doctor", "--json", env=env).stdout)
        assert doctor["ok"] is True, doctor

        removed = installed.run("setup", "pi", "--uninstall", env=env).stdout
        assert "restore " in removed, removed
        assert settings.read_bytes() == before
        assert not copy.exists()


def test_the_npm_tarball_installs_with_pi_install(
    installed: Installed, tmp_path: Path, pi_tests: tuple[ModuleType, ModuleType]
) -> None:
    """``make dist``'s recipe: the package assembled by the wheel's ctxd, ``npm pack``ed, ``pi install``ed."""
    harness, _ = pi_tests
    node, cli = harness.tools()
    package = tmp_path / "package"
    python = installed.ctxd.resolve().parent / "python"
    subprocess.run(
        [str(python), "-c", f"from ctxd.setup.pi import assemble; assemble({str(package)!r})"],
        check=True,
        cwd=tmp_path,
        env=installed.env(),
    )
    npm = shutil.which("npm", path="/usr/local/bin:/usr/bin:/bin")
    if npm is None:
        pytest.skip("no npm among the system tools")
    packed = subprocess.run(
        [npm, "pack", "--silent", "--pack-destination", str(tmp_path)],
        cwd=package,
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
        env=installed.env(PATH=f"{Path(node).parent}:/usr/bin:/bin"),
    ).stdout.strip()
    tarball = tmp_path / packed
    listed = subprocess.run(["tar", "-tzf", str(tarball)], capture_output=True, text=True, check=True).stdout
    assert "package/src/ctxd-client/client.ts" in listed
    agent = tmp_path / "agent"
    agent.mkdir()
    env = installed.env(PATH=f"{Path(node).parent}:/usr/bin:/bin", PI_CODING_AGENT_DIR=str(agent))
    done = subprocess.run(
        [node, cli, "install", f"npm:ctxd-pi@file:{tarball}"], env=env, capture_output=True, text=True, timeout=180
    )
    assert done.returncode == 0, done.stdout + done.stderr
    unpacked = agent / "npm" / "node_modules" / "ctxd-pi"
    assert (unpacked / "src" / "ctxd-client" / "index.ts").exists()
    assert "./ctxd-client/index" in (unpacked / "src" / "client.ts").read_text()
