"""Five compactions in one real Claude Code session (manual ``/compact`` and automatic, mixed) with the ctxd plugin:
the facts the user planted before the first one (a path, a validation command, a hard constraint, an error
stated in one sentence) reach the model in the first request after *each* compaction, though the (fake) summaries
keep only the path (the first one the error too); the goal stays the session's first request. Then the user says
the error is fixed and takes the constraint back, and after a sixth compaction neither is re-injected. The same
session run again with ctxd's state dir wiped after the first compaction (and the notes emptied after the third)
gives the model the same facts: ctxd rebuilds them from the transcript.

With ``CTXD_LEDGER_TRANSCRIPT=FILE`` set, the test writes the conversation as markdown to FILE: the prompts, each
compaction, the facts ctxd re-injected after it and the session's ledger in ctxd's notes (for the closing note).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import attrs
import pytest
from fakes.anthropic_server import FakeAnthropicServer, RecordedRequest, ToolUse, Turn, call, say
from helpers.planted import ERROR, FACTS, GOAL, NEVER, PATH, PLANTED

from .harness import ClaudeCode
from .test_compaction import _texts

SUMMARY = "<summary>Work on the loader goes on; the manifest is deploy/zeta/manifest.toml.</summary>"
"""The fake summary: it keeps only the path."""
FIRST_SUMMARY = f"<summary>Work on the loader goes on; the manifest is deploy/zeta/manifest.toml. {ERROR}</summary>"
"""The first compaction's fake summary keeps the error too: ctxd re-injects it only after the second one (from the
ledger: the error is still open, and that summary lacks it)."""
AUTO = ("Run the checks.", "Run the checks again.")
"""The prompts whose turn Claude Code compacts by itself (a response reports a context near the window)."""
CLOSING = "I fixed ERR_ZETA_4711 in the loader, and you may push to the release branch now."
"""Said after the fifth compaction: the error is fixed, the constraint taken back (the sixth compaction)."""
NEAR_WINDOW = 195_000
"""A response reporting this many input tokens makes Claude Code (window 200,000) compact at once."""


@attrs.define
class Session:
    claude: ClaudeCode
    server: FakeAnthropicServer
    results: list[dict[str, Any]]
    ledgers: list[tuple[int, dict[str, Any]]]
    """``(prompt number, the ledger in ctxd's notes)`` after every prompt."""
    prompts: list[str]
    snapshots: list[Path] = attrs.field(factory=list)
    """After each prompt: ``transcript.jsonl`` and ``state`` (ctxd's state dir) as they were then."""

    @property
    def session_id(self) -> str:
        return str(self.results[0]["session_id"])

    def handed_over(self) -> list[tuple[RecordedRequest, str]]:
        """For each compaction, the request that brought the model ctxd's block, and the block: the first main
        request after it whose newest message carries one. After a manual ``/compact`` that is the next prompt's
        request; after an automatic one (Claude Code adds nothing to the request that follows it at once) the
        next one, with the next tool result or prompt."""
        requests = self.server.requests
        out = []
        for i, request in enumerate(requests):
            if request.kind != "summary":
                continue
            after = []
            for later in requests[i + 1 :]:
                if later.kind == "summary":
                    break
                if later.kind == "main":
                    after.append(later)
            found = [(r, _block(r, newest=True)) for r in after[:2]]
            out.append(next(((r, b) for r, b in found if b), (after[0], "")))
        return out


def _auto(command: str) -> Turn:
    """A tool call whose response reports a context near the window: Claude Code compacts before going on."""
    return Turn(tools=(ToolUse("Bash", {"command": command}),), input_tokens=NEAR_WINDOW)


PROMPTS = [
    f"{GOAL} {PLANTED}",
    ERROR,
    "/compact",
    "Add the parser for the manifest.",
    AUTO[0],
    "Write the cache module.",
    "/compact",
    "Test the cache.",
    AUTO[1],
    "Update the docs.",
    "/compact",
    "What is next?",
    CLOSING,
    "/compact",
    "Go on.",
]


def _converse(claude: ClaudeCode, server: FakeAnthropicServer, wipe: Mapping[int, str] = {}) -> Session:
    """The scripted session; after prompt ``i`` (0-based) of ``wipe``, ctxd's state is changed: ``"lost"`` removes
    the state dir, ``"empty"`` leaves the session's notes ``{}``."""
    claude.extra_env["CLAUDE_CODE_AUTO_COMPACT_WINDOW"] = "200000"
    server.summary_text = FIRST_SUMMARY
    server.script(
        call("Bash", command="echo loader-start"),
        say("Started the loader."),
        say("Noted the CI failure."),
        # /compact (1)
        call("Bash", command="echo parser"),
        say("Parser added."),
        call("Bash", command="echo check-one"),
        _auto("echo check-two"),  # automatic (2), then the turn goes on
        say("Checks ran."),
        call("Bash", command="echo cache-module"),
        say("Cache module written."),
        # /compact (3)
        call("Bash", command="echo cache-test"),
        say("Cache tested."),
        call("Bash", command="echo check-three"),
        _auto("echo check-four"),  # automatic (4)
        say("Checks ran again."),
        call("Bash", command="echo docs"),
        say("Docs updated."),
        # /compact (5)
        say("Next: wire the loader into the CLI."),
        say("Good to hear."),
        # /compact (6): after the fix and the withdrawal
        say("Going on."),
    )
    ledgers: list[tuple[int, dict[str, Any]]] = []
    snapshots: list[Path] = []
    state = claude.state / "ctxd"

    def after(i: int, result: dict[str, Any]) -> None:
        session_id = str(result.get("session_id"))
        path = state / "claude" / f"{session_id}.json"
        if path.exists():
            ledgers.append((i, json.loads(path.read_text(encoding="utf-8")).get("ledger") or {}))
        # The transcript and ctxd's state as they are now, for the tests that rebuild the facts without the state.
        snapshot = claude.base / "snapshots" / str(i)
        shutil.copytree(state, snapshot / "state", ignore=shutil.ignore_patterns("*.log", ".lock"))
        shutil.copyfile(claude.transcript(session_id), snapshot / "transcript.jsonl")
        snapshots.append(snapshot)
        if PROMPTS[i] == "/compact":
            server.summary_text = SUMMARY
        if wipe.get(i) == "lost":
            shutil.rmtree(state)
        elif wipe.get(i) == "empty":
            path.write_text("{}", encoding="utf-8")

    results = claude.converse(*PROMPTS, timeout=300, after=after)
    return Session(claude, server, results, ledgers, PROMPTS, snapshots)


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Session]:
    from .harness import PLUGIN

    with FakeAnthropicServer() as server:
        claude = ClaudeCode(tmp_path_factory.mktemp("ledger"), server, plugin_dir=PLUGIN)
        made = _converse(claude, server)
        out = os.environ.get("CTXD_LEDGER_TRANSCRIPT")
        if out:
            Path(out).write_text(_transcript(made), encoding="utf-8")
        yield made


def test_five_compactions_manual_and_automatic_ran(session: Session) -> None:
    assert [r.get("result") for r in session.results] == [
        "Started the loader.",
        "Noted the CI failure.",
        "",
        "Parser added.",
        "Checks ran.",
        "Cache module written.",
        "",
        "Cache tested.",
        "Checks ran again.",
        "Docs updated.",
        "",
        "Next: wire the loader into the CLI.",
        "Good to hear.",
        "",
        "Going on.",
    ], "\n".join(
        f"{r.kind} {r.response.text if r.response else ''} {r.response.tools if r.response else ''}"
        for r in session.server.requests
        if r.kind != "other"
    )
    assert len(session.server.of_kind("summary")) == 6
    log = session.claude.log_text()
    assert "error" not in log.lower(), log
    assert log.count("PreCompact: ") == 6


def test_every_planted_fact_reaches_the_first_request_after_each_compaction(session: Session) -> None:
    handed = session.handed_over()
    assert len(handed) == 6
    for n, (request, block) in enumerate(handed[:5], 1):
        text = request.text
        for fact in FACTS:
            assert fact in text, f"compaction {n}: {fact!r} is not in the request after it"
        assert block, f"compaction {n}: no ctxd block"
        # The goal stays the session's first request (the fake summary lacks it, so ctxd sends it).
        assert f"- Goal: {GOAL}" in block, f"compaction {n}:\n{block}"
        for later in ("Add the parser", "Run the checks", "Write the cache", "Test the cache", "Update the docs"):
            assert f"- Goal: {later}" not in block


def test_the_ledger_in_ctxds_notes_carries_the_facts_with_where_they_were_seen(session: Session) -> None:
    ledger = dict(session.ledgers)[10]  # after the fifth compaction
    assert ledger["compactions"] == 5 and ledger["goal"].startswith(GOAL)
    by_text = {f["text"]: f for f in ledger["facts"]}
    constraint = by_text[NEVER]
    assert constraint["kind"] == "constraint" and constraint["status"] == "open"
    assert constraint["firstSeen"]["compaction"] == 1 and constraint["firstSeen"]["entryId"]
    assert constraint["firstSeen"]["line"] > 1 and constraint["firstSeen"]["time"]
    (error,) = [f for f in ledger["facts"] if f["kind"] == "error" and "ERR_ZETA_4711" in f["text"]]
    assert error["status"] == "open" and error["text"] == f"User reported: {ERROR}"
    stated = {f["text"] for f in ledger["facts"] if f["kind"] == "stated"}
    assert PATH in stated
    assert any("make verify-zeta" in s for s in stated)
    # Requests later ones replaced are superseded, not open.
    requests = [f for f in ledger["facts"] if f["kind"] == "request"]
    assert [f["status"] for f in requests].count("open") == 1
    assert all(f["why"].startswith("replaced by: ") for f in requests if f["status"] == "superseded")


def test_session_facts_reads_the_hooks_ledger_or_rebuilds_it_from_the_transcript(
    session: Session, tmp_path: Path
) -> None:
    from ctxd.service.facts import session_facts

    transcript = str(session.claude.transcript(session.session_id))
    ledger = session_facts(transcript, state_dir=str(session.claude.state / "ctxd"))
    assert ledger.compactions == 6 and ledger.goal is not None and ledger.goal.startswith(GOAL)
    assert any(f.text == PATH and f.is_open for f in ledger.facts)
    assert any(f.text == NEVER and f.status == "superseded" for f in ledger.facts)
    # Without ctxd's notes (another machine, a lost state dir): the transcript holds every compaction's range,
    # so the same ledger comes back, what was closed since closed.
    assert session_facts(transcript, state_dir=str(tmp_path)).to_json() == ledger.to_json()


def test_after_every_prompt_the_facts_are_the_same_with_the_state_present_empty_or_lost(
    session: Session, tmp_path: Path
) -> None:
    """The transcript and ctxd's state as they were after each prompt (none, one, ... six compactions): the
    ledger (``session/facts``) and the next compaction's instructions and re-injected facts do not depend on
    ctxd's notes. After the first compaction they hold the error the user reported before it."""
    from ctxd.service.claude_hooks import HookSettings, handle
    from ctxd.service.facts import session_facts

    def outcome(transcript: Path, state: Path) -> tuple[object, ...]:
        facts = session_facts(str(transcript), state_dir=str(state)).to_json()
        settings = HookSettings(str(state), str(tmp_path / "archive"), 5_000, archive=False)
        payload = {"session_id": session.session_id, "transcript_path": str(transcript), "trigger": "auto"}
        pre = handle("PreCompact", payload, settings).stdout
        start = handle("SessionStart", {**payload, "source": "compact"}, settings).stdout
        return facts, pre, start

    assert len(session.snapshots) == len(PROMPTS)
    for i, snapshot in enumerate(session.snapshots):
        present = tmp_path / f"present-{i}"
        shutil.copytree(snapshot / "state", present)
        empty = tmp_path / f"empty-{i}" / "claude"
        empty.mkdir(parents=True)
        (empty / f"{session.session_id}.json").write_text("{}")
        want = outcome(snapshot / "transcript.jsonl", present)
        for case, state in (("empty", empty.parent), ("lost", tmp_path / f"lost-{i}")):
            assert outcome(snapshot / "transcript.jsonl", state) == want, f"after prompt {i + 1}: state {case}"
        if i == PROMPTS.index("/compact"):  # one compaction
            facts, pre, _ = want
            assert isinstance(facts, dict) and isinstance(pre, str)
            (error,) = [f for f in facts["facts"] if f["kind"] == "error"]
            assert error["text"] == f"User reported: {ERROR}" and error["status"] == "open"
            assert error["firstSeen"]["compaction"] == 1 and f"- Error: User reported: {ERROR}" in pre


@pytest.fixture(scope="module")
def wiped(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Session]:
    """The same session with ctxd's state dir removed after the first compaction (as a wiped folder, or a plugin
    installed then) and the notes emptied after the third."""
    from .harness import PLUGIN

    with FakeAnthropicServer() as server:
        claude = ClaudeCode(tmp_path_factory.mktemp("wiped"), server, plugin_dir=PLUGIN)
        after_first = PROMPTS.index("/compact") + 1
        after_third = PROMPTS.index("/compact", PROMPTS.index("/compact", after_first) + 1) + 1
        yield _converse(claude, server, {after_first: "lost", after_third: "empty"})


def test_a_wiped_state_changes_nothing_the_model_gets_after_a_compaction(session: Session, wiped: Session) -> None:
    """Each first request after a compaction holds the same ctxd block as in the session whose state was kept."""
    assert [r.get("result") for r in wiped.results] == [r.get("result") for r in session.results]
    assert "error" not in wiped.claude.log_text().lower()
    kept, rebuilt = [b for _, b in session.handed_over()], [b for _, b in wiped.handed_over()]
    assert len(kept) == len(rebuilt) == 6
    for n, (one, other) in enumerate(zip(kept, rebuilt, strict=True), 1):
        assert other == one, f"compaction {n}"
    # The first summary kept the error; the second did not, and the state was lost between them.
    assert "ERR_ZETA_4711" not in rebuilt[0]
    assert f"- Error: User reported: {ERROR}" in rebuilt[1]


def test_after_the_user_says_the_error_is_fixed_and_takes_the_constraint_back_neither_comes_back(
    session: Session,
) -> None:
    """The sixth compaction follows the user's sentence: the error is resolved, the constraint superseded; the
    first request after it no longer carries them as facts (only as the user's latest request)."""
    ledger = session.ledgers[-1][1]
    assert ledger["compactions"] == 6
    (error,) = [f for f in ledger["facts"] if f["kind"] == "error" and "ERR_ZETA_4711" in f["text"]]
    assert error["status"] == "resolved" and "ERR_ZETA_4711" in error["why"]
    constraint = next(f for f in ledger["facts"] if f["kind"] == "constraint" and f["text"] == NEVER)
    assert constraint["status"] == "superseded" and constraint["why"].startswith("withdrawn: ")
    block = session.handed_over()[5][1]
    assert f"- Goal: {GOAL}" in block and f"- Latest request: {CLOSING}" in block
    assert "- Error:" not in block and f"- User constraint: {NEVER}" not in block
    assert "make verify-zeta" in block and "deploy/zeta/manifest.toml" in block  # still open


def _block(request: RecordedRequest, *, newest: bool = False) -> str:
    """ctxd's block in the request (``newest``: in its newest message only, where a hook's context goes)."""
    texts = _texts(request) if not newest else _texts(attrs.evolve(request, body={"messages": request.messages[-1:]}))
    for text in texts:
        if "## Must keep (ctxd)" in text:
            return text[text.index("## Must keep (ctxd)") :].split("\n\n")[0]
    return ""


def _transcript(made: Session) -> str:
    """The conversation as markdown: prompts, compactions, what ctxd re-injected, the ledger after each."""
    from ctxd.compaction.ledger import Ledger

    handed = made.handed_over()
    lines = [
        f"# One Claude Code {made.claude.binary.split('claude-code-')[-1].split('/')[0]} session, 6 compactions",
        "",
    ]
    lines += ["Fake summaries (the first keeps the path and the error, the others only the path):", "", "```"]
    lines += [FIRST_SUMMARY, SUMMARY, "```", ""]
    compaction = 0
    ledgers = dict(made.ledgers)
    for i, prompt in enumerate(made.prompts):
        lines += [f"## Prompt {i + 1}: `{prompt[:200]}`", ""]
        result = made.results[i].get("result") if i < len(made.results) else None
        if prompt == "/compact" or prompt in AUTO:
            compaction += 1
            kind = "manual /compact" if prompt == "/compact" else "automatic (a response near the window)"
            lines += [f"**Compaction {compaction}** ({kind}).", ""]
            ledger = Ledger.from_json(ledgers.get(i))
            if ledger is not None:
                counts = ledger.counts()
                lines += [
                    f"Ledger after it (ctxd's notes): {ledger.compactions} compactions, goal kept, "
                    f"{counts['open']} open / {counts['resolved']} resolved / {counts['superseded']} superseded:",
                    "",
                    "```",
                    ledger.render(2_500, heading="## Ledger (open facts)"),
                    *[f"- ({f.status}) {f.kind}: {f.text[:100]} -- {f.why}" for f in ledger.facts if not f.is_open],
                    "```",
                    "",
                ]
            if compaction <= len(handed):
                lines += ["ctxd's block after it, as the model got it:", "", "```"]
                lines += [handed[compaction - 1][1][:2_500], "```", ""]
        if result:
            lines += [f"Answer: {result}", ""]
    return "\n".join(lines)
