"""The must-keep fact sheet: what a summary of a conversation has to keep, checked deterministically.

Owns the facts a compaction summary must not lose (the goal, the latest request, the user's constraints and
corrections, the agent's decisions, files modified and read, commands with their outcome, errors, the next
step: the agent's stated one and the first open item of the plan document it follows), extracted from pi
AgentMessages without a model; the check of a summary against them (:meth:`FactSheet.
missing`); and the patch that appends what a summary lacks as a compact ``## Must keep`` section
(:func:`patch_summary`). Every summary ctxd writes (model, offline, or supplied by a client) goes through the
check; the Claude Code hooks and the pi extension call it directly.

A fact is present when any of its probes occurs in the summary after :func:`normalize` (lower case, markup
and quotes dropped, whitespace collapsed) of both. Probes are short, verbatim pieces of the source (a path, a
command's head, an error line, the head of a request), so a summary that quotes them passes and one that
paraphrases them gets them appended.

Importing this module is cheap (no model client, no server): hooks run it on every compaction.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

from ctxd.compaction.reading.agent_plans import Plan, latest_plan, next_fact
from ctxd.compaction.reading.facts import Facts, scan
from ctxd.compaction.reading.fileops import project_root, strip_file_blocks
from ctxd.compaction.reading.mining import CORRECTION_RE, head, short
from ctxd.compaction.reading.shell import command_matters
from ctxd.compaction.summary.commands import mattering
from ctxd.formats.injected import strip_ansi
from ctxd.formats.lazy_re import lazy_compile

KINDS = (
    "goal",
    "request",
    "correction",
    "constraint",
    "stated",
    "error",
    "file-modified",
    "next",
    "decision",
    "command",
    "file-read",
)
"""Fact kinds, most important first (the order :meth:`FactSheet.render` keeps)."""
LABELS = {
    "goal": "Goal",
    "request": "Latest request",
    "correction": "User correction",
    "constraint": "User constraint",
    "stated": "User stated",
    "error": "Error",
    "file-modified": "Files modified",
    "next": "Next",
    "decision": "Decision",
    "command": "Commands",
    "file-read": "Files read",
}
LISTED = frozenset({"file-modified", "file-read", "command"})
"""Kinds rendered as one bullet listing all their facts (the others get a bullet per fact)."""
FILE_KINDS = frozenset({"file-modified", "file-read"})
HEADING = "## Must keep"
MAX_STATED = 20
"""User-stated facts (paths, commands) per sheet: the newest."""
MAX_ERRORS = 40
"""Error facts per sheet: unresolved ones first, then the newest."""
PROBE_CHARS = 60
"""Text probes are the first this-many characters of a fact (after normalisation)."""

_MARKUP_RE = lazy_compile(r"[`*_\"'\u2018\u2019\u201c\u201d]|\[\.\.\.\d+ chars omitted\.\.\.\]")
_SPACE_RE = lazy_compile(r"\s+")


def normalize(text: str) -> str:
    """``text`` as probes are compared: ANSI, markdown emphasis, backticks and quotes removed, lower case,
    whitespace collapsed to single spaces."""
    text = _MARKUP_RE.sub("", strip_ansi(text).lower())
    return _SPACE_RE.sub(" ", text).strip()


def text_probes(text: str) -> tuple[str, ...]:
    """Probes for a sentence or request: its normalised head (the whole when short)."""
    norm = normalize(text)
    if not norm:
        return ()
    return (norm[:PROBE_CHARS].rstrip(),)


def path_probes(path: str, root: str | None = None) -> tuple[str, ...]:
    """Probes for a file path: the path itself, the path relative to the project's ``root`` (``mix.exs``,
    ``config/dev.exs``: a summary names files as the project does), and its last three components when it is
    longer."""
    norm = normalize(path)
    parts = [p for p in path.replace("\\", "/").split("/") if p]
    probes = [norm]
    if root and path.startswith(root.rstrip("/") + "/"):
        probes.append(normalize(path[len(root.rstrip("/")) + 1 :]))
    if len(parts) > 3:
        probes.append(normalize("/".join(parts[-3:])))
    return tuple(dict.fromkeys(p for p in probes if p))


@attrs.frozen
class Fact:
    kind: str
    """One of :data:`KINDS` (more may be added)."""
    text: str
    """The line to show or append if missing (compact, one line, without the kind's label)."""
    probes: tuple[str, ...]
    """The fact is present in a summary if any probe occurs in it (both normalised by :func:`normalize`)."""
    index: int | None = attrs.field(default=None, eq=False)
    """Where the fact was last seen: the index of its message in the scanned messages, when known."""
    key: str | None = attrs.field(default=None, eq=False)
    """For an error: what a later success must match to resolve it (a command's, a file's key)."""
    resolved: bool = attrs.field(default=False, eq=False)
    """For an error: resolved within the scanned messages."""
    carried: bool = attrs.field(default=False, eq=False)
    """Carried by the ledger from an earlier range (not seen in this one): a file of an earlier range is kept by
    the ``<read-files>``/``<modified-files>`` blocks every summary ends with (see :meth:`FactSheet.missing`)."""

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "text": self.text, "probes": list(self.probes)}

    def present(self, normalized_summary: str) -> bool:
        """Whether the fact is in a summary already passed through :func:`normalize`."""
        return any(probe and normalize(probe) in normalized_summary for probe in self.probes)


def _rank(kind: str) -> int:
    return KINDS.index(kind) if kind in KINDS else len(KINDS)


@attrs.frozen
class FactSheet:
    facts: tuple[Fact, ...] = ()

    def __len__(self) -> int:
        return len(self.facts)

    def __bool__(self) -> bool:
        return bool(self.facts)

    def missing(self, summary: str) -> FactSheet:
        """The facts ``summary`` (as it will be written, its file-list blocks included) lacks. A file of the
        summarised range must be named in the body: the ``<read-files>``/``<modified-files>`` blocks do not
        count for it. A file the ledger carried from an earlier range is kept by those blocks: they list every
        earlier range's files, and the body names only its own range's."""
        body = normalize(strip_file_blocks(summary))
        whole = normalize(summary) if any(f.carried and f.kind in FILE_KINDS for f in self.facts) else body
        return FactSheet(
            tuple(f for f in self.facts if not f.present(whole if f.carried and f.kind in FILE_KINDS else body))
        )

    def by_kind(self, kind: str) -> tuple[Fact, ...]:
        return tuple(f for f in self.facts if f.kind == kind)

    def render(self, max_chars: int, *, heading: str = HEADING) -> str:
        """Compact markdown of the facts, most important kinds first, within ``max_chars`` (what does not fit
        is counted, not shown); "" when there are no facts or no room."""
        if not self.facts or max_chars <= len(heading) + 8:
            return ""
        lines = [heading]
        used = len(heading)
        left_out = 0
        kinds = sorted({f.kind for f in self.facts}, key=_rank)
        for kind in kinds:
            facts = self.by_kind(kind)
            label = LABELS.get(kind, kind.capitalize())
            if kind in LISTED:
                line = f"- {label}: "
                shown = 0
                for fact in facts:
                    piece = ("; " if shown else "") + fact.text
                    if used + 1 + len(line) + len(piece) + 14 > max_chars:
                        break
                    line += piece
                    shown += 1
                if shown < len(facts):
                    left_out += len(facts) - shown
                    if shown:
                        line += f" (+{len(facts) - shown} more)"
                if shown:
                    lines.append(line)
                    used += 1 + len(line)
                continue
            for fact in facts:
                line = f"- {label}: {fact.text}"
                if used + 1 + len(line) > max_chars:
                    left_out += 1
                    continue
                lines.append(line)
                used += 1 + len(line)
        if len(lines) == 1:
            return ""
        note = f"- (+{left_out} more facts not shown)"
        if left_out and used + 1 + len(note) <= max_chars:
            lines.append(note)
        return "\n".join(lines)

    def to_json(self) -> list[dict[str, Any]]:
        return [f.to_json() for f in self.facts]

    @staticmethod
    def from_json(items: Iterable[Mapping[str, Any]]) -> FactSheet:
        facts = []
        for item in items:
            kind, text, probes = item.get("kind"), item.get("text"), item.get("probes")
            if isinstance(kind, str) and isinstance(text, str) and isinstance(probes, list):
                facts.append(Fact(kind, text, tuple(p for p in probes if isinstance(p, str))))
        return FactSheet(tuple(facts))


# --- extraction -----------------------------------------------------------------------------------------------


class _Sheet:
    """Facts collected in order, deduplicated by (kind, first probe)."""

    def __init__(self) -> None:
        self.facts: list[Fact] = []
        self.seen: set[tuple[str, str]] = set()

    def add(
        self,
        kind: str,
        text: str,
        probes: tuple[str, ...],
        index: int | None = None,
        *,
        key: str | None = None,
        resolved: bool = False,
    ) -> None:
        text = " ".join(text.split())
        if not text or not probes:
            return
        seen = (kind if kind not in ("goal", "request") else "request", probes[0])
        if seen in self.seen:
            return
        self.seen.add(seen)
        self.facts.append(Fact(kind, text, probes, index, key, resolved))

    def sheet(self) -> FactSheet:
        ordered = sorted(enumerate(self.facts), key=lambda pair: (_rank(pair[1].kind), pair[0]))
        return FactSheet(tuple(f for _, f in ordered))


def _previous_facts(sheet: _Sheet, previous_summary: str, *, keep_goal: bool = True) -> None:
    """The lasting facts of an earlier summary: its goal and its own must-keep section."""
    text = strip_file_blocks(previous_summary)
    section: str | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("## "):
            title = line[3:].strip().lower()
            section = "goal" if title.startswith("goal") else "keep" if title.startswith("must keep") else None
            continue
        if section is None or not line.startswith(("- ", "* ")):
            continue
        item = line[2:].strip()
        if section == "goal":
            item = item.removeprefix("(earlier) ").removeprefix("Later request: ")
            if item.lower().startswith("latest request:") or not keep_goal:
                continue
            keep_goal = False  # the first goal line is the goal; later ones were requests
            sheet.add("goal", short(item, 400), text_probes(item))
            continue
        label, _, rest = item.partition(": ")
        kind = next((k for k, v in LABELS.items() if v == label), None)
        if kind is None or not rest or rest.startswith("(+"):
            continue
        if kind in LISTED:
            for piece in rest.split("; "):
                piece = re.sub(r" \(\+\d+ more\)$", "", piece).strip()
                if kind == "command":
                    command = piece.split("` ", 1)[0].strip("`")
                    if command_matters(command, False if "failed" in piece else None):
                        sheet.add(kind, piece, text_probes(command))
                else:
                    sheet.add(kind, piece, path_probes(piece))
        else:
            sheet.add(kind, rest, text_probes(rest))


def _from_facts(
    sheet: _Sheet,
    facts: Facts,
    read_files: Sequence[str],
    modified_files: Sequence[str],
    goal: str | None,
    plan: tuple[str, str] | None = None,
) -> None:
    first = facts.first_request or facts.first_user
    if first and not goal:
        sheet.add("goal", short(first, 400), text_probes(first), facts.requests[0][0] if facts.requests else None)
    latest = facts.latest_request or facts.latest_user
    if latest and (goal or latest.strip() != (first or "").strip()):
        sheet.add("request", short(latest, 400), text_probes(latest), facts.requests[-1][0] if facts.requests else None)
    for index, sentence in facts.constraints:
        kind = "correction" if CORRECTION_RE.match(sentence) else "constraint"
        sheet.add(kind, sentence, text_probes(sentence), index)
    requests = {index: normalize(text) for index, text in facts.requests}
    for index, sentence in facts.stated[-MAX_STATED:]:
        # The sentence a request opens with is the request (kept, and superseded, as one), not a statement.
        if not requests.get(index, "").startswith(normalize(sentence)):
            sheet.add("stated", sentence, text_probes(sentence), index)
    errors = sorted(reversed(facts.errors), key=lambda e: (e.resolved, e.reported))
    for error in errors[:MAX_ERRORS]:
        note = " (resolved)" if error.resolved and not error.reported else ""
        sheet.add(
            "error",
            head(error.text, 300) + note,
            text_probes(error.line),
            error.index,
            key=error.key,
            resolved=error.resolved,
        )
    modified = list(dict.fromkeys([*reversed(facts.done_files), *modified_files]))
    root = project_root([*modified, *facts.reads, *read_files])
    for path in modified:
        sheet.add("file-modified", path, path_probes(path, root))
    if plan is not None:  # the first open item of the plan document the session follows
        sheet.add("next", plan[0], text_probes(plan[1]))
    for sentence in facts.plan:
        sheet.add("next", sentence, text_probes(sentence))
    for call in facts.open_calls[-3:]:
        sheet.add("next", f"check the outcome of {call.label} (no result was recorded)", text_probes(call.label))
    for sentence in facts.decisions[-8:]:
        sheet.add("decision", sentence, text_probes(sentence))
    for stat in mattering(facts.commands):  # not read-only exploration: search and expand recover that
        sheet.add("command", stat.text, text_probes(stat.command), stat.last_index)
    done = set(modified)
    for path in dict.fromkeys([*reversed(facts.reads), *read_files]):
        if path not in done:
            sheet.add("file-read", path, path_probes(path, root))


def must_keep_facts(
    messages: Sequence[Mapping[str, Any]],
    *,
    previous_summary: str | None = None,
    read_files: Sequence[str] = (),
    modified_files: Sequence[str] = (),
    goal: str | None = None,
) -> FactSheet:
    """The must-keep facts of ``messages`` (pi AgentMessages, oldest first), deterministic.

    ``previous_summary`` contributes its goal and its ``## Must keep`` items (they were must-keep before);
    ``read_files``/``modified_files`` (a compaction plan's lists, which fold in earlier compactions') add file
    facts for paths the messages do not show; ``goal`` is the session's first request when it comes before
    ``messages`` (see :mod:`ctxd.compaction.ledger.goal`): then it is the goal, whatever the previous summary says.
    """
    return sheet_of(scan(messages), previous_summary, read_files, modified_files, goal, latest_plan(messages))


def sheet_of(
    facts: Facts,
    previous_summary: str | None = None,
    read_files: Sequence[str] = (),
    modified_files: Sequence[str] = (),
    goal: str | None = None,
    plan: Plan | None = None,
) -> FactSheet:
    """:func:`must_keep_facts` of messages already scanned (:func:`ctxd.compaction.reading.facts.scan`);
    ``plan`` is the plan those messages left (:func:`ctxd.compaction.reading.agent_plans.latest_plan`)."""
    sheet = _Sheet()
    if goal:
        sheet.add("goal", short(goal, 400), text_probes(goal))
    if previous_summary:
        _previous_facts(sheet, previous_summary, keep_goal=not goal)
    _from_facts(sheet, facts, read_files, modified_files, goal, next_fact(plan))
    return sheet.sheet()


_PATCH_RE = lazy_compile(r"(?ms)^## Must keep\b[^\n]*\n(.*?)(?=^## |^<(?:read|modified)-files>|\Z)")
_USERS_WORDS = (f"- {LABELS['stated']}: ",)


def strip_patch(summary: str | None) -> str | None:
    """``summary`` (an earlier one, to merge) with only the stated facts left in the ``## Must keep`` sections
    ctxd patched into it: a summary has no section of its own for those, so they stay verbatim and are never
    patched twice (constraints, corrections and requests are in its body). The session's fact ledger holds the
    other facts: the next check patches the ones still open again within its budget, and closed ones (an error
    fixed) and files the file blocks list stay out."""
    if summary is None or HEADING not in summary:
        return summary

    def users(match: re.Match[str]) -> str:
        lines = [line for line in match.group(1).splitlines() if line.startswith(_USERS_WORDS)]
        return HEADING + "\n" + "\n".join(lines) + "\n\n" if lines else ""

    return _PATCH_RE.sub(users, summary).rstrip() + "\n"


def patch_summary(
    summary: str, sheet: FactSheet, *, max_chars: int, carried_chars: int | None = None
) -> tuple[str, FactSheet]:
    """``summary`` with a ``## Must keep`` section for the facts it lacks, and the facts that were missing.

    The section is at most ``max_chars`` characters (most important facts first; the rest are counted); it goes
    before trailing ``<read-files>``/``<modified-files>`` blocks so those stay last. With ``carried_chars``, the
    facts the ledger carried from earlier ranges come after the range's own, within that many characters of
    their own. A summary that lacks nothing is returned unchanged.
    """
    missing = sheet.missing(summary)
    if not missing:
        return summary, missing
    if carried_chars is None:
        section = missing.render(max_chars)
    else:
        own = FactSheet(tuple(f for f in missing.facts if not f.carried))
        carried = FactSheet(tuple(f for f in missing.facts if f.carried))
        section = own.render(max_chars)
        if section:
            section += carried.render(carried_chars, heading="")
        else:
            section = carried.render(carried_chars + len(HEADING) + 1)
    if not section:
        return summary, missing
    body = strip_file_blocks(summary)
    blocks = summary[len(body) :] if summary.startswith(body) else ""
    if not blocks:
        body = summary.rstrip()
    return f"{body.rstrip()}\n\n{section}{blocks}" if body.strip() else f"{section}{blocks}", missing
