"""What ctxd does in Claude Code's hooks (``ctxd hook EVENT``, installed by ``integrations/claude-code``).

==================  ===========================================================================================
event               what ctxd does
==================  ===========================================================================================
PreCompact          archives the transcript, moves the session's fact ledger on by the conversation since the
                    last compaction (every open fact of earlier ranges stays must-keep), saves it and this
                    compaction's facts in the session's notes and prints them, after the summary's shape (the
                    offline summary's: state first, then task by task): Claude Code adds a PreCompact hook's
                    output to the summarisation request as "Additional Instructions"
SessionStart        ``compact``: re-injects (``additionalContext``) the facts the new summary lacks, when the
                    summary can be read; Claude Code 2.1.330 runs this hook before it writes the summary or
                    runs PostCompact (and adds nothing PostCompact prints), so the check waits for PostCompact
                    and the facts go with the next tool result or prompt: after a manual ``/compact`` the next
                    prompt, after an automatic one (whose next request follows at once) the request after it.
                    Other sources: hands over facts still waiting (a resumed session)
PostCompact         saves the summary (``compact_summary``); if facts wait for it, keeps those it lacks
UserPromptSubmit    hands over the facts waiting since the last compaction (``additionalContext``), once, reading
                    the summary from the transcript if PostCompact did not bring it; notes whether the prompt
                    asks to see tool output whole (then nothing is cut until the next one)
PostToolUse         replaces an oversized tool output (``updatedToolOutput``, same shape, strings cut by
                    :mod:`ctxd.context.cut_rules`) before the model sees it; hands over facts waiting, as
                    UserPromptSubmit does

Every block of facts ends with one sentence on how to read what a summary left out
(:data:`ctxd.compaction.recall.RECALL_HINT`).
SessionEnd          archives the transcript
==================  ===========================================================================================

Per-session notes live in ``<state>/claude/<session id>.json`` (0600): ``ledger`` (the fact ledger, see
:mod:`ctxd.compaction.ledger`), ``plans`` and ``plansThrough`` (the plan documents the session follows, as
``details.ctxd.plans`` holds them, and the entry id of the last message applied to them), ``precompact`` (this
compaction's facts), ``postcompact``, ``awaiting`` and ``pending`` (the facts waiting for the next prompt;
changed only through :func:`facts_waiting`), with the markers the shell wrapper reads beside them
(:mod:`ctxd.service.claude_state`). Every function here may raise: the CLI (:mod:`ctxd.cli.hook`) turns any
error into a silent exit 0 and a line in ctxd's log.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import time
from collections.abc import Iterator, Mapping
from typing import Any, NamedTuple

from ctxd.store.dirs import makedirs_private

FACTS_HEADING = "## Must keep (ctxd): facts from before the compaction that its summary left out"
ALL_FACTS_HEADING = "## Must keep (ctxd): facts from before the compaction"
INSTRUCTIONS = (
    "ctxd (context keeper): the summary must keep every fact below, quoting paths, commands, numbers and the "
    "user's own words exactly; they are checked after the compaction."
)
MAX_AWAITING_CHECKS = 5
"""Hooks (tool results, prompts) that look for a summary PostCompact did not bring before the facts stop waiting."""
_SESSION_ID = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")


class HookSettings(NamedTuple):
    state_dir: str
    archive_root: str
    tool_output_limit: int
    facts_chars: int = 9_000
    """Cap of re-injected facts (Claude Code cuts a hook's ``additionalContext`` near 10,000 characters)."""
    instructions_chars: int = 6_000
    """Cap of PreCompact's instructions (Claude Code cuts them at 10,000 characters)."""
    archive: bool = True
    all_when_unread: bool = False
    """When SessionStart(compact) cannot read the new summary, re-inject every fact at once instead of waiting
    for it (Codex: its summary is in the rollout by then unless the compaction ran remotely, encrypted)."""


class HookResult(NamedTuple):
    stdout: str = ""
    """What the hook prints: plain text (PreCompact) or one JSON object."""
    note: str = ""
    """One line for ctxd's log."""


def handle(event: str, payload: Mapping[str, Any], settings: HookSettings) -> HookResult:
    """Run ctxd's part of one Claude Code hook event."""
    handler = _HANDLERS.get(event)
    if handler is None:
        return HookResult(note=f"{event}: not handled")
    return handler(payload, settings)


# --- events -------------------------------------------------------------------------------------------------


def pre_compact(payload: Mapping[str, Any], settings: HookSettings) -> HookResult:
    transcript = _str(payload, "transcript_path")
    archived = _archive(transcript, settings)
    with _notes(settings, payload) as notes:
        facts = _take_in(notes, transcript, _str(payload, "trigger") or "manual")
        notes.pop("awaiting", None)
        notes.pop("awaitingChecks", None)
        facts_waiting(notes, None)
    from ctxd.compaction.summary.prompts import SHAPE_INSTRUCTIONS

    head = f"{INSTRUCTIONS} {SHAPE_INSTRUCTIONS}"
    text = facts.sheet.render(settings.instructions_chars - len(head) - 2)
    out = f"{head}\n\n{text}" if text else ""
    return HookResult(out, f"PreCompact: {archived}; {len(facts.sheet)} facts, {len(out)} characters of instructions")


def session_start(payload: Mapping[str, Any], settings: HookSettings) -> HookResult:
    source = _str(payload, "source")
    if source != "compact":
        return _hand_over("SessionStart", payload, settings)
    from ctxd.compaction.ledger.mustkeep import FactSheet

    transcript = _str(payload, "transcript_path")
    with _notes(settings, payload) as notes:
        before = notes.get("precompact")
        if not isinstance(before, dict) or _stale(before, transcript):
            # PreCompact did not run (or failed): the transcript still holds it all.
            _take_in(notes, transcript, "auto", at=0.0)
            before = notes["precompact"]
        sheet = FactSheet.from_json(before.get("facts") or [])
        summary = _summary_of_this_compaction(transcript, notes, before)
        if summary is not None:
            missing = sheet.missing(summary)
            notes.pop("awaiting", None)
            return _context("SessionStart", missing, FACTS_HEADING, settings, f"{len(sheet)} facts checked")
        if settings.all_when_unread:
            return _context("SessionStart", sheet, ALL_FACTS_HEADING, settings, "the summary cannot be read")
        # Claude Code writes the summary after this hook: the facts wait for PostCompact, which has it, and go
        # with the next tool result or prompt (after an automatic compaction too: only what the summary lacks).
        notes["awaiting"] = True
    return HookResult(note="SessionStart(compact): summary not written yet; the facts wait for PostCompact")


def post_compact(payload: Mapping[str, Any], settings: HookSettings) -> HookResult:
    from ctxd.compaction.ledger.mustkeep import FactSheet

    summary = _str(payload, "compact_summary")
    with _notes(settings, payload) as notes:
        notes["postcompact"] = {"at": time.time(), "summary": summary}
        before = notes.get("precompact")
        notes.pop("awaitingChecks", None)
        if not notes.pop("awaiting", False) or not isinstance(before, dict):
            return HookResult(note="PostCompact: summary saved")
        sheet = FactSheet.from_json(before.get("facts") or [])
        missing = sheet.missing(summary)
        facts_waiting(notes, missing)
    return HookResult(note=f"PostCompact: the summary lacks {len(missing)} of {len(sheet)} facts")


def user_prompt_submit(payload: Mapping[str, Any], settings: HookSettings) -> HookResult:
    from ctxd.service.claude_cuts import note_prompt

    note_prompt(_notes_path(settings, payload), _str(payload, "prompt"))
    return _hand_over("UserPromptSubmit", payload, settings)


def post_tool_use(payload: Mapping[str, Any], settings: HookSettings) -> HookResult:
    from ctxd.service.claude_cuts import cut_tool_output

    out, note = cut_tool_output(payload, settings.tool_output_limit, _notes_path(settings, payload))
    handed = _hand_over("PostToolUse", payload, settings)
    if not handed.stdout:
        return HookResult(out, note)
    # The facts a summary lacks go with the first tool result after an automatic compaction (no prompt comes).
    merged = json.loads(out) if out else {"hookSpecificOutput": {"hookEventName": "PostToolUse"}}
    merged["hookSpecificOutput"]["additionalContext"] = json.loads(handed.stdout)["hookSpecificOutput"][
        "additionalContext"
    ]
    return HookResult(json.dumps(merged, ensure_ascii=False), "; ".join(n for n in (note, handed.note) if n))


def session_end(payload: Mapping[str, Any], settings: HookSettings) -> HookResult:
    return HookResult(note=f"SessionEnd: {_archive(_str(payload, 'transcript_path'), settings)}")


_HANDLERS = {
    "PreCompact": pre_compact,
    "SessionStart": session_start,
    "PostCompact": post_compact,
    "UserPromptSubmit": user_prompt_submit,
    "PostToolUse": post_tool_use,
    "SessionEnd": session_end,
}


# --- helpers ------------------------------------------------------------------------------------------------


def _str(payload: Mapping[str, Any], key: str) -> str:
    value = payload.get(key)
    return value if isinstance(value, str) else ""


def _archive(transcript: str, settings: HookSettings) -> str:
    if not settings.archive:
        return "archive off"
    if not transcript:
        return "no transcript_path"
    from ctxd.store.archive import archive_transcript

    results = archive_transcript(transcript, settings.archive_root)
    if not results:
        return "nothing to archive"
    copied = sum(r.copied for r in results)
    rotated = [r.rotated for r in results if r.rotated]
    return f"archived {copied:,} new bytes to {results[0].path}" + (
        f" (earlier copy kept: {rotated[0]})" if rotated else ""
    )


def _summary_of_this_compaction(transcript: str, notes: dict[str, Any], before: Mapping[str, Any]) -> str | None:
    """The new compaction's summary, if Claude has written it or passed it to PostCompact; else None."""
    after = notes.get("postcompact")
    if isinstance(after, dict) and isinstance(after.get("summary"), str) and after.get("at", 0) >= before.get("at", 0):
        return str(after["summary"])
    from ctxd.service.claude_facts import compaction_summaries
    from ctxd.tree.session import Session

    count, newest = compaction_summaries(Session.open(transcript))
    if newest is not None and count > int(before.get("compactions") or 0):
        return newest
    return None


def _context(event: str, sheet: Any, heading: str, settings: HookSettings, why: str) -> HookResult:
    from ctxd.compaction.recall import RECALL_HINT

    text = sheet.render(settings.facts_chars - len(RECALL_HINT) - 2, heading=heading) if sheet else ""
    if text:
        text += f"\n\n{RECALL_HINT}"
    if not text:
        return HookResult(note=f"{event}: nothing to re-inject ({why})")
    out = {"hookSpecificOutput": {"hookEventName": event, "additionalContext": text}}
    return HookResult(json.dumps(out, ensure_ascii=False), f"{event}: re-injected {len(sheet)} facts ({why})")


def _hand_over(event: str, payload: Mapping[str, Any], settings: HookSettings) -> HookResult:
    """The facts waiting since the last compaction, as ``additionalContext`` (once). When they wait for a summary
    PostCompact never brought, the summary is read from the transcript now; after :data:`MAX_AWAITING_CHECKS`
    hooks without it (the compaction never finished), nothing waits for it any longer."""
    path = _notes_path(settings, payload)
    if path is None:
        return HookResult()
    try:  # the common case, nothing waits: one small read, no lock, no further imports
        with open(path, encoding="utf-8") as f:
            text = f.read()
        if '"pending"' not in text and '"awaiting"' not in text:
            return HookResult()
    except FileNotFoundError:
        return HookResult()
    from ctxd.compaction.ledger.mustkeep import FactSheet

    with _notes(settings, payload) as notes:
        pending = notes.get("pending")
        before = notes.get("precompact")
        if notes.get("awaiting") and not isinstance(pending, dict) and isinstance(before, dict):
            transcript = _str(payload, "transcript_path")
            summary = _summary_of_this_compaction(transcript, notes, before) if transcript else None
            if summary is None:
                checks = int(notes.get("awaitingChecks") or 0) + 1
                if checks < MAX_AWAITING_CHECKS:
                    notes["awaitingChecks"] = checks
                    return HookResult()
                notes.pop("awaiting", None)
                notes.pop("awaitingChecks", None)
                return HookResult(note=f"{event}: no summary after {checks} checks; no facts wait for it any longer")
            notes.pop("awaiting", None)
            notes.pop("awaitingChecks", None)
            sheet = FactSheet.from_json(before.get("facts") or [])
            return _context(event, sheet.missing(summary), FACTS_HEADING, settings, f"{len(sheet)} facts checked")
        facts_waiting(notes, None)
    if not isinstance(pending, dict):
        return HookResult()
    sheet = FactSheet.from_json(pending.get("facts") or [])
    return _context(event, sheet, FACTS_HEADING, settings, "held since the compaction")


def _take_in(notes: dict[str, Any], transcript: str, trigger: str, *, at: float | None = None) -> Any:
    """The facts of the compaction about to run: the session's ledger (``notes["ledger"]``) and plan documents
    (``notes["plans"]``, as the messages up to the entry ``notes["plansThrough"]`` left them) moved on by the
    context at the transcript's leaf and saved, and the sheet the summary is checked against
    (``notes["precompact"]``). Running it twice for one compaction changes nothing but where facts were last
    seen."""
    from ctxd.compaction.ledger import Ledger
    from ctxd.service.claude_facts import notes_plans, transcript_facts

    facts = transcript_facts(transcript, Ledger.from_json(notes.get("ledger")), *notes_plans(notes))
    notes["ledger"] = facts.ledger.to_json()
    notes["plans"], notes["plansThrough"] = facts.plans, facts.through
    notes["precompact"] = {
        "at": time.time() if at is None else at,
        "trigger": trigger,
        "compactions": facts.compactions,
        "facts": facts.sheet.to_json(),
    }
    return facts


def _stale(before: Mapping[str, Any], transcript: str) -> bool:
    """Whether the saved PreCompact facts are of an earlier compaction (this one's PreCompact did not run)."""
    from ctxd.service.claude_facts import compaction_summaries
    from ctxd.tree.session import Session

    count, _ = compaction_summaries(Session.open(transcript))
    return count > int(before.get("compactions") or 0) + 1


def facts_waiting(notes: dict[str, Any], sheet: Any) -> None:
    """Set (``sheet``: the facts a new summary lacks) or clear (None, or an empty sheet) the facts waiting to be
    handed over with the next prompt (``notes["pending"]``). Every change of that state goes through here."""
    if sheet:
        notes["pending"] = {"facts": sheet.to_json()}
    else:
        notes.pop("pending", None)


def _notes_path(settings: HookSettings, payload: Mapping[str, Any]) -> str | None:
    session = _str(payload, "session_id")
    if not _SESSION_ID.match(session) or session in (".", ".."):
        return None
    return os.path.join(settings.state_dir, "claude", f"{session}.json")


@contextlib.contextmanager
def _notes(settings: HookSettings, payload: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    """The session's notes, locked; written back (0600) when the block ends without an error."""
    from ctxd.service.claude_state import sync_pending
    from ctxd.store.files import PRIVATE_MODE, atomic_write, locked

    path = _notes_path(settings, payload)
    if path is None:
        raise ValueError(f"unusable session_id {payload.get('session_id')!r}")
    folder = os.path.dirname(path)
    makedirs_private(folder)
    lock = os.open(os.path.join(folder, ".lock"), os.O_RDWR | os.O_CREAT, PRIVATE_MODE)
    try:
        with locked(lock):
            try:
                with open(path, encoding="utf-8") as f:
                    loaded = json.load(f)
            except FileNotFoundError:
                loaded = {}
            except ValueError:
                loaded = {}  # a damaged note is replaced
            notes: dict[str, Any] = loaded if isinstance(loaded, dict) else {}
            before = json.dumps(notes, sort_keys=True)
            yield notes
            if json.dumps(notes, sort_keys=True) != before:
                atomic_write(path, json.dumps(notes, ensure_ascii=False).encode("utf-8"))
            sync_pending(path, notes)  # the wrapper's "facts waiting" marker, derived here only
    finally:
        os.close(lock)
