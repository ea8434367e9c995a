"""A conversation with file edits and commands, then ``/compact``, in the real Claude Code with the ctxd plugin
installed the way the README says (``claude plugin install ctxd --marketplace <repo>``).

What must hold: the transcript is archived (0600) before the compaction; the summarisation request carries
ctxd's must-keep facts as instructions; the first request after the compaction carries the facts the (fake)
summary left out, and not those it kept; ctxd reads the 2.1.330 transcript across the boundary.
"""

from __future__ import annotations

import json
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
from fakes.anthropic_server import FakeAnthropicServer, RecordedRequest, ToolUse, Turn, call, say

from ctxd.compaction.recall import RECALL_HINT
from ctxd.compaction.summary.prompts import SHAPE_INSTRUCTIONS

from .harness import ClaudeCode

FIRST = (
    "Build a tiny HTTP service in app.py that listens on port 8123. Never modify config.yaml: it belongs to the "
    "ops team. Use only the standard library."
)
SECOND = "Also add a /health endpoint that answers ok."
SUMMARY = (
    "<analysis>The user wants a small service.</analysis>\n<summary>\n1. Primary Request and Intent: Build a tiny "
    "HTTP service in app.py that listens on port 8123.\n2. Files and Code Sections: {app} was created and edited."
    "\n3. Checks: python3 -m py_compile app.py && echo compiled-ok passed.\n</summary>"
)
"""The fake summary: quotes the goal, names the file and one command; leaves out the config.yaml constraint, the
/health request and the other command."""
HEADING = "facts from before the compaction that its summary left out"


@attrs.define
class Conversation:
    claude: ClaudeCode
    server: FakeAnthropicServer
    session: str
    transcript: Path
    install: Any
    runs: list[Any]
    before_compaction: int
    """How many requests the server had seen before ``/compact``."""

    def after_compaction(self) -> list[RecordedRequest]:
        return self.server.requests[self.before_compaction :]


@pytest.fixture(scope="module")
def conversation(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Conversation]:
    with FakeAnthropicServer() as server:
        claude = ClaudeCode(tmp_path_factory.mktemp("claude"), server)
        install = claude.install_plugin()
        app = str(claude.project / "app.py")
        server.summary_text = SUMMARY.format(app=app)
        server.script(
            call("Write", file_path=app, content="PORT = 8123\n"),
            call("Bash", command="python3 -c 'import app; print(app.PORT)'"),
            call("Edit", file_path=app, old_string="PORT = 8123\n", new_string="import http.server\n\nPORT = 8123\n"),
            call("Bash", command="python3 -m py_compile app.py && echo compiled-ok"),
            say("app.py serves on port 8123 and compiles."),
        )
        runs = [claude.run(FIRST)]
        session = runs[0].result["session_id"]
        server.script(
            call("Read", file_path=app),
            call("Edit", file_path=app, old_string="PORT = 8123\n", new_string="PORT = 8123\nHEALTH = '/health'\n"),
            say("Added /health."),
        )
        runs.append(claude.run(SECOND, resume=session))
        before = len(server.requests)
        runs.append(claude.run("/compact", resume=session))
        server.script(say("Next I would add tests."))
        runs.append(claude.run("What is next?", resume=session))
        yield Conversation(claude, server, session, claude.transcript(session), install, runs, before)


def test_the_plugin_installs_and_claude_code_runs_with_it(conversation: Conversation) -> None:
    assert conversation.install.returncode == 0, conversation.install.stdout + conversation.install.stderr
    for run in conversation.runs:
        assert run.returncode == 0, run.stdout + run.stderr
    assert conversation.runs[0].result["result"] == "app.py serves on port 8123 and compiles."
    assert conversation.runs[-1].result["result"] == "Next I would add tests."
    assert (
        conversation.claude.project / "app.py"
    ).read_text() == "import http.server\n\nPORT = 8123\nHEALTH = '/health'\n"
    assert "error" not in conversation.claude.log_text()


def test_the_transcript_is_archived_privately_before_the_compaction(conversation: Conversation) -> None:
    copies = list(conversation.claude.archive.glob(f"claude/*/{conversation.session}.jsonl"))
    assert len(copies) == 1
    copy = copies[0]
    assert stat.S_IMODE(copy.stat().st_mode) == 0o600
    for folder in (copy.parent, copy.parent.parent, conversation.claude.archive):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    live = conversation.transcript.read_bytes()
    archived = copy.read_bytes()
    # SessionEnd of the last run brought the copy up to the live file; it holds the history before /compact.
    assert live.startswith(archived) and archived.endswith(b"\n")
    assert FIRST.encode() in archived and b'"compact_boundary"' in archived
    log = conversation.claude.log_text()
    assert f"PreCompact session={conversation.session} PreCompact: archived " in log


def test_the_summarisation_request_carries_ctxds_facts(conversation: Conversation) -> None:
    summary_requests = [r for r in conversation.after_compaction() if r.kind == "summary"]
    assert len(summary_requests) == 1
    prompt = summary_requests[0].messages[-1]
    text = json.dumps(prompt)
    assert "Additional Instructions:" in text and "ctxd (context keeper)" in text
    for fact in ("config.yaml", "/health", "port 8123", "py_compile"):
        assert fact in text, fact
    # The shape of ctxd's own summaries: the state first, then task by task.
    assert json.dumps(SHAPE_INSTRUCTIONS)[1:-1] in text


def test_the_first_request_after_the_compaction_carries_the_facts_the_summary_lacks(
    conversation: Conversation,
) -> None:
    first = next(r for r in conversation.after_compaction() if r.kind == "main")
    assert "Build a tiny HTTP service in app.py that listens on port 8123" in first.text  # the summary is in
    blocks = [t for t in _texts(first) if HEADING in t]
    assert len(blocks) == 1, _texts(first)
    # Claude Code puts SessionStart's additionalContext into a system message with its own texts.
    block = blocks[0][blocks[0].index("## Must keep (ctxd)") :].split("\n\n")[0]
    print("\nctxd re-injected after the compaction:\n" + block)
    # What the summary left out comes back ...
    assert "- User constraint: Never modify config.yaml: it belongs to the ops team." in block
    assert "Also add a /health endpoint that answers ok." in block
    assert "python3 -c 'import app; print(app.PORT)'" in block
    # ... and what it kept does not.
    assert "Files modified" not in block and "py_compile" not in block and "Goal" not in block


def _texts(request: RecordedRequest) -> list[str]:
    out = []
    for message in request.messages:
        content = message.get("content")
        texts = (
            [content] if isinstance(content, str) else [b.get("text", "") for b in content or [] if isinstance(b, dict)]
        )
        out += [t for t in texts if isinstance(t, str)]
    return out


def test_ctxd_reads_the_transcript_across_the_boundary(conversation: Conversation) -> None:
    from ctxd.context.build import build_context
    from ctxd.tree.session import Session

    session = Session.open(str(conversation.transcript))
    assert not [d for d in session.file.diagnostics if "not in the file" in d.message]
    compactions = [h for h in session.file.heads if h.type == "compaction"]
    assert len(compactions) == 1
    ctx = build_context(session.file, session.tree)
    roles = [m.role for m in ctx.messages]
    assert roles[0] == "compactionSummary"
    assert "HTTP service in app.py" in ctx.messages[0].message["summary"]
    # 2.1.330 keeps the last answer verbatim: ctxd's context has it after the summary, as Claude sends it.
    assert ctx.messages[1].message["role"] == "assistant"
    assert "Added /health." in json.dumps(ctx.messages[1].message)
    assert ctx.messages[-1].message["role"] == "assistant"
    assert "Next I would add tests." in json.dumps(ctx.messages[-1].message)
    # The history before the boundary is still in the tree.
    texts = json.dumps([session.file.entries(range(len(session.file.heads)))])
    assert FIRST in texts and "compiled-ok" in texts


def test_after_an_automatic_compaction_the_facts_its_summary_lacks_go_with_the_next_tool_result(
    claude: ClaudeCode, anthropic: FakeAnthropicServer
) -> None:
    """Claude compacts by itself when a response reports a context near its window; the turn goes on at once.
    Claude Code 2.1.330 runs SessionStart(compact) before it writes the summary and adds nothing PostCompact says,
    so ctxd checks the summary PostCompact brings and hands what it lacks over with the next tool result: the
    facts the summary lacked reach the model, those it had do not come again."""
    claude.extra_env["CLAUDE_CODE_AUTO_COMPACT_WINDOW"] = "200000"
    anthropic.summary_text = "<summary>Ran some echo commands. The user said: Never touch config.yaml.</summary>"
    anthropic.script(
        call("Bash", command="echo one"),
        Turn(tools=(ToolUse("Bash", {"command": "echo two"}),), input_tokens=195_000),  # near the window
        call("Bash", command="echo three"),
        say("Done."),
    )
    run = claude.run("Never touch config.yaml. Run echo one, two, three.")
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.result["result"] == "Done."
    kinds = [r.kind for r in anthropic.requests]
    assert kinds == ["main", "main", "summary", "main", "main"]
    assert "ctxd (context keeper)" in json.dumps(anthropic.requests[2].messages[-1])
    assert not [t for t in _texts(anthropic.requests[3]) if "## Must keep (ctxd)" in t]
    (text,) = [t for t in _texts(anthropic.requests[4]) if "## Must keep (ctxd)" in t]
    assert "PostToolUse:Bash hook additional context: ## Must keep (ctxd)" in text
    block = text[text.index("## Must keep (ctxd)") :].split("\n\n")[0]
    assert block.splitlines()[0] == "## Must keep (ctxd): facts from before the compaction that its summary left out"
    assert "`echo two`" in block and "- Goal: Never touch config.yaml. Run echo one, two, three." in block
    assert "- User constraint" not in block  # the summary has it
    assert RECALL_HINT in text
    log = claude.log_text()
    assert "PostCompact: the summary lacks" in log and "PostToolUse: re-injected" in log


def test_in_one_session_the_next_prompt_after_compact_carries_the_missing_facts(
    claude: ClaudeCode, anthropic: FakeAnthropicServer
) -> None:
    """As a user types them: a request, ``/compact``, the next request (UserPromptSubmit hands the facts over)."""
    anthropic.summary_text = "<summary>The user said: Never touch config.yaml.</summary>"
    anthropic.script(call("Bash", command="echo one"), say("Ran it."), say("Next: tests."))
    results = claude.converse("Never touch config.yaml. Run echo one.", "/compact", "What is next?")
    assert [r.get("result") for r in results] == ["Ran it.", "", "Next: tests."]
    assert [r.kind for r in anthropic.requests] == ["main", "main", "summary", "main"]
    (block,) = [t for t in _texts(anthropic.requests[3]) if "## Must keep (ctxd)" in t]
    assert "UserPromptSubmit hook additional context: ## Must keep (ctxd)" in block
    block = block[block.index("## Must keep (ctxd)") :].split("\n\n")[0]
    assert block.splitlines()[0] == "## Must keep (ctxd): facts from before the compaction that its summary left out"
    assert "`echo one`" in block
    assert "User constraint" not in block  # the summary kept it
    assert "UserPromptSubmit: re-injected" in claude.log_text()
