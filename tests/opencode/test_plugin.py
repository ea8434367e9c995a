"""The ctxd plugin inside real opencode 1.18.33 (npm ``opencode-ai``), configured as a user would (``plugin`` in
opencode.json naming integrations/opencode/src/index.ts, ``ctxd serve`` as the daemon), against the fake Chat
Completions server: the must-keep facts reach opencode's compaction prompt, the facts the fake summary omitted
reach the first request after the compaction, an oversized bash output is cut for the model and the
database alike, and ctxd's archive holds a copy of the session (made on the plugin's session events)."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

from fakes.openai_server import FakeOpenAIServer

from ctxd.compaction.recall import RECALL_HINT
from ctxd.compaction.summary.prompts import SHAPE_INSTRUCTIONS
from ctxd.store.opencode import session_path
from ctxd.store.opening import open_session_file

from .harness import (
    LONG_OUTPUT_COMMAND,
    REPO,
    SUMMARY,
    CompactingResponder,
    OpencodeHome,
    is_compaction_request,
    opencode_binary,
)

PLUGIN = REPO / "integrations" / "opencode" / "src" / "index.ts"
GOAL = "Fix the crash in src/parser.py when the input is empty. Do not change the public API of parse()."
NOTE = Path(os.environ.get("CTXD_OPENCODE_REQUEST_NOTE", "/nonexistent/opencode-request.md"))
"""Where the first request after the compaction is written for a report (set the variable to keep it)."""


def text_of(message: dict[str, object]) -> str:
    content = message.get("content")
    return content if isinstance(content, str) else json.dumps(content)


def test_the_plugin_keeps_the_facts_through_a_real_opencode_compaction(tmp_path: Path) -> None:
    binary = opencode_binary()
    command = LONG_OUTPUT_COMMAND
    with FakeOpenAIServer() as server:
        server.responder = CompactingResponder(command=command)
        env = {
            "CTXD_OPENCODE_COMMAND": f"{Path(sys.executable).parent / 'ctxd'} serve",
            "CTXD_OPENCODE_TOOL_OUTPUT_CHARS": "2000",
            "CTXD_CONFIG": str(tmp_path / "no-config.json"),
            "PI_CODING_AGENT_DIR": str(tmp_path / "pi"),
        }
        home = OpencodeHome(tmp_path / "oc", server, binary, plugins=[PLUGIN.as_uri()], extra_env=env)
        home.write_config()
        run = home.run(GOAL)
        assert run.returncode == 0, run.stderr[-3000:]
        after, injected = assert_the_plugin_acted(home, [r.body for r in server.requests])
    if NOTE.parent.is_dir():  # the request, for the report (opencode's long system prompt and tools shortened)
        messages = [
            {**m, "content": text_of(m)[:300] + " [...]"} if m["role"] == "system" and text_of(m) not in injected else m
            for m in after["messages"]
        ]
        shown = json.dumps({"model": after.get("model"), "messages": messages}, indent=1)
        NOTE.write_text(f"# opencode: the first request after a compaction\n\n```json\n{shown}\n```\n")


def assert_the_plugin_acted(home: OpencodeHome, bodies: list[dict[str, Any]]) -> tuple[dict[str, Any], list[str]]:
    """The must-keep facts reached opencode's compaction prompt, the facts its summary lacked reached the first
    request after it (a system message), and the bash output was cut for the model and the database; that first
    request and the injected system texts."""
    compactions = [i for i, b in enumerate(bodies) if is_compaction_request(b)]
    assert len(compactions) == 1, [text_of(b["messages"][-1])[:80] for b in bodies]
    prompt = text_of(bodies[compactions[0]]["messages"][-1])
    assert "## What this compaction must keep" in prompt and "src/parser.py" in prompt
    assert SHAPE_INSTRUCTIONS in prompt  # the summary's shape: ctxd's own (state first, then task by task)
    after = bodies[compactions[0] + 1]  # the first request after the compaction
    systems = [text_of(m) for m in after["messages"] if m["role"] == "system"]
    injected = [s for s in systems if s.startswith("## Must keep (ctxd): facts from before the compaction")]
    assert injected and "src/parser.py" in injected[0] and "public API of parse()" in injected[0]
    assert injected[0].endswith(RECALL_HINT)
    assert any(SUMMARY in text_of(m) for m in after["messages"])  # opencode's own summary is there too
    # The bash output reached the model cut (its head and tail, by ctxd's rules for a log), and opencode stored
    # the cut version.
    tool = next(m for b in bodies for m in b["messages"] if m["role"] == "tool")
    assert "ctxd truncated this tool result" in text_of(tool) and len(text_of(tool)) < 3000
    assert text_of(tool).rstrip().endswith("hello-from-bash")
    with sqlite3.connect(f"file:{home.database}?mode=ro", uri=True) as conn:
        stored = [json.loads(d) for (d,) in conn.execute("SELECT data FROM part WHERE data LIKE '%\"tool\"%'")]
        (session_id,) = [row[0] for row in conn.execute("SELECT id FROM session")]
    output = next(p["state"]["output"] for p in stored if p.get("type") == "tool")
    assert "ctxd truncated this tool result" in output and len(output) < 3000
    # ctxd archived the session (after the compaction, and when it went idle): the copy reads as the live one.
    (copy,) = (home.data / "ctxd" / "archive" / "opencode").glob(f"*/{session_id}.jsonl")
    assert oct(copy.stat().st_mode & 0o777) == oct(0o600)
    live, archived = open_session_file(session_path(str(home.database), session_id)), open_session_file(str(copy))
    assert archived.entries(range(len(archived.heads))) == live.entries(range(len(live.heads)))
    assert any(h.type == "compaction" for h in archived.heads)
    return after, injected


def test_the_plugin_type_checks_against_opencodes_plugin_api() -> None:
    opencode_binary()  # installs @opencode-ai/plugin beside opencode
    tsc = REPO / ".cache" / "pi" / "node_modules" / ".bin" / "tsc"
    if not tsc.exists():
        subprocess.run(["bash", str(REPO / "scripts" / "pi.sh")], check=True, capture_output=True, timeout=900)
    node = subprocess.run(["bash", str(REPO / "scripts" / "node24.sh")], check=True, capture_output=True, text=True)
    env = {**os.environ, "PATH": f"{node.stdout.strip()}{os.pathsep}{os.environ.get('PATH', '')}"}
    done = subprocess.run(
        [str(tsc), "-p", "tsconfig.json"], cwd=PLUGIN.parents[1], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr
