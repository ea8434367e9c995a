"""``ctxd check``: an fsck for session files.

Reads every line and every body of a session and reports what is wrong, each finding with its
kind, severity, line and entry id:

- line damage, from the store: ``malformed`` lines, ``two-objects`` on one line, ``blank-line``,
  ``too-deep`` and ``bad-utf8`` bodies (served pruned or replaced), ``too-long`` lines, entries
  with ``no-id``, a ``second-header``, ``duplicate-id``; a ``partial-tail`` (a last line without
  its newline: still being written, or torn); lines set aside (``torn``, ``glued``);
- the tree: ``orphan`` (a missing parent), ``self-parent``, ``cycle``;
- the active path (what the next request is built from): ``orphan-tool-result`` (a result
  without its call before it), ``missing-tool-result`` (a call never answered before the
  conversation went on; ``interrupted-tool-call``, info, when its turn was aborted or failed: pi
  answers those itself; ``pending-tool-call``, info, when it is the last message: the agent may be
  running the tool);
- every entry: ``bad-field``, a known field whose value ctxd would refuse to append
  (``tokensBefore: "x"``, a message without a role, ...: see :mod:`ctxd.store.validate`);
- every compaction: ``first-kept-off-path`` (its ``firstKeptEntryId`` is missing or not on its
  path: nothing before the compaction is kept);
- ``two-writers``: signs that two agents appended at once. Besides blank lines and two objects on
  one line, ctxd looks in file order for *switches*: an entry continuing a branch tip other than
  the current leaf (the entry before it, or a leaf marker's target), within
  :data:`INTERLEAVE_SECONDS` of that tip's own timestamp.  One agent that goes back to another
  branch does so rarely and after a while; two agents appending to one file switch back and forth
  within seconds.  Two switches or more are reported (one finding, with the count and line range).

Severity: ``error`` (data lost or unusable as written), ``warning`` (served, but something is
wrong), ``info`` (nothing is wrong, but worth knowing).  A report is *clean* when it has no
warning and no error.  :mod:`ctxd.context.repair` repairs what can be repaired by appending, or
in a copy.
"""

from __future__ import annotations

import os
from typing import Any

import attrs

from ctxd.context.live import live_context
from ctxd.context.rows import materialize
from ctxd.context.rules import timestamp_ms
from ctxd.errors import InvalidEntryError
from ctxd.store.files import open_regular
from ctxd.store.validate import validate_entries
from ctxd.tree.index import NONE
from ctxd.tree.session import Session

INTERLEAVE_SECONDS = 10.0
"""A switch back to a branch tip this soon after the tip was written is a sign of two writers."""
MAX_LISTED = 50
"""Findings of one kind listed one by one; the rest are counted in one more finding."""
BATCH = 2000
"""Bodies read at a time (bounded memory)."""

SEVERITY = {
    "malformed": "error",
    "too-long": "error",
    "duplicate-id": "error",
    "self-parent": "error",
    "cycle": "error",
    "unreadable": "error",
    "two-objects": "warning",
    "completed": "info",
    "migrated": "info",
}
"""Severities that differ from the store's own."""


@attrs.frozen
class Finding:
    kind: str
    severity: str
    line: int | None
    entryId: str | None
    message: str

    def to_json(self) -> dict[str, Any]:
        return attrs.asdict(self)


@attrs.define
class CheckReport:
    path: str
    sessionId: str
    version: int
    entries: int
    lines: int
    leafId: str | None
    findings: list[Finding] = attrs.field(factory=list)
    repair: dict[str, Any] | None = None

    @property
    def clean(self) -> bool:
        return not any(f.severity in ("error", "warning") for f in self.findings)

    @property
    def exit_code(self) -> int:
        """0 clean, 1 findings (a file that cannot be used at all is an error: 2)."""
        return 0 if self.clean else 1

    def to_json(self) -> dict[str, Any]:
        counts: dict[str, int] = {}
        for f in self.findings:
            counts[f.kind] = counts.get(f.kind, 0) + 1
        return {
            "path": self.path,
            "sessionId": self.sessionId,
            "version": self.version,
            "entries": self.entries,
            "lines": self.lines,
            "leafId": self.leafId,
            "clean": self.clean,
            "counts": counts,
            "findings": [f.to_json() for f in self.findings],
            "repair": self.repair,
        }


def check_session(session: Session) -> CheckReport:
    """Every finding for ``session`` (read as it is now: call ``refresh`` first to see new lines)."""
    f = session.file
    found: list[Finding] = []
    for start in range(0, len(f), BATCH):  # every body once: the store reports what it finds
        indices = range(start, min(start + BATCH, len(f)))
        for i, body in zip(indices, f.entries(indices), strict=True):
            if not f.read_only:
                found.extend(_fields(body, f.lines[i], f.heads[i].id))
    lines, blanks, partial = _raw_lines(f.path)
    report = CheckReport(f.path, f.session_id, f.version, len(f), lines, session.leaf_id())
    for d in session.diagnostics():
        kind = d.kind or "line"
        found.append(Finding(kind, SEVERITY.get(kind, d.severity), d.line, d.entryId, d.message))
    for line in blanks:
        found.append(Finding("blank-line", "warning", line, None, "a blank line (a sign of two writers at once)"))
    if partial:
        found.append(
            Finding(
                "partial-tail",
                "warning",
                lines + 1,
                None,
                f"the last line has no newline ({partial} bytes): still being written, or torn by a writer that "
                "stopped (ctxd terminates it in place once it stays unchanged for the grace period)",
            )
        )
    found.extend(_compactions(session))
    found.extend(_tool_pairs(session))
    found.extend(_switches(session))
    report.findings = _capped(sorted(found, key=lambda x: (x.line or 0, x.kind)))
    return report


def _fields(body: dict[str, Any], line: int, entry_id: str | None) -> list[Finding]:
    """A field of a known entry type whose value ctxd would refuse to append (readers may choke)."""
    if body.get("parentId") is not None and body.get("parentId") == body.get("id"):
        body = {k: v for k, v in body.items() if k != "parentId"}  # a self-parent is the tree's finding
    try:
        validate_entries([body], [("entry", "entry.message")])
    except InvalidEntryError as exc:
        return [Finding("bad-field", "warning", line, entry_id, exc.message)]
    return []


def _raw_lines(path: str) -> tuple[int, list[int], int]:
    """(complete lines, blank line numbers, bytes after the last newline), read in bounded chunks."""
    fd = open_regular(path)
    try:
        size = os.fstat(fd).st_size
        number = 0
        blanks: list[int] = []
        blank = True  # the line being read is whitespace so far
        after_last = 0
        pos = 0
        while pos < size:
            chunk = os.pread(fd, min(1 << 23, size - pos), pos)
            if not chunk:
                break
            start = 0
            while True:
                nl = chunk.find(b"\n", start)
                stop = nl if nl >= 0 else len(chunk)
                if blank and stop > start:
                    # Most lines start with "{": only a line starting with whitespace is looked at whole.
                    blank = chunk[start : start + 1].isspace() and not chunk[start:stop].strip()
                if nl < 0:
                    break
                number += 1
                if blank:
                    blanks.append(number)
                blank = True
                start = nl + 1
                after_last = pos + start
            pos += len(chunk)
        return number, blanks, size - after_last
    finally:
        os.close(fd)


def _compactions(session: Session) -> list[Finding]:
    heads = session.file.heads
    out = []
    for i, head in enumerate(heads):
        if head.type != "compaction":
            continue
        fk = head.firstKeptEntryId
        target = session.file.index.get(fk) if fk else None
        if target is not None and session.tree.is_ancestor(target, i):
            continue
        why = "does not exist" if target is None else "is not on its path"
        out.append(
            Finding(
                "first-kept-off-path",
                "warning",
                session.file.lines[i],
                head.id,
                f"compaction's firstKeptEntryId {fk!r} {why}: its context keeps nothing from before it",
            )
        )
    return out


def _tool_pairs(session: Session) -> list[Finding]:
    """Tool calls and results on the active path, as the next request would send them."""
    if session.leaf() is None:
        return []
    ctx = live_context(session).context()
    materialize(ctx.messages)  # one batched read, not one per message
    out: list[Finding] = []
    open_calls: dict[str, tuple[int, str, bool]] = {}  # id -> line, entry, interrupted

    def unanswered(why: str) -> None:
        for call_id, (line, entry_id, interrupted) in open_calls.items():
            if interrupted:  # pi answers these itself (a synthetic result) when it sends them
                text = f"tool call {call_id!r} of an interrupted turn has no result {why}"
                out.append(Finding("interrupted-tool-call", "info", line, entry_id, text))
            else:
                text = f"tool call {call_id!r} has no result {why}"
                out.append(Finding("missing-tool-result", "warning", line, entry_id, text))
        open_calls.clear()

    for k, m in enumerate(ctx.messages):
        message = m.message
        role = message.get("role")
        if role == "toolResult":
            call_id = str(message.get("toolCallId", ""))
            if open_calls.pop(call_id, None) is None:
                out.append(
                    Finding(
                        "orphan-tool-result",
                        "warning",
                        m.line,
                        m.entryId,
                        f"tool result for {call_id!r} has no tool call before it on the active path",
                    )
                )
            continue
        if open_calls:
            unanswered(f"before line {m.line}")
        if role == "assistant" and isinstance(message.get("content"), list):
            interrupted = message.get("stopReason") in ("aborted", "error")
            for block in message["content"]:
                if isinstance(block, dict) and block.get("type") == "toolCall":
                    open_calls[str(block.get("id", ""))] = (m.line, m.entryId, interrupted)
        last = k == len(ctx.messages) - 1
        if last and open_calls:
            for call_id, (line, entry_id, _) in open_calls.items():
                message_text = f"tool call {call_id!r} awaits its result (the agent may be running it)"
                out.append(Finding("pending-tool-call", "info", line, entry_id, message_text))
            open_calls.clear()
    return out


def _switches(session: Session) -> list[Finding]:
    """Two writers at once: see the module's docstring."""
    f = session.file
    tree = session.tree
    heads = f.heads
    has_child = bytearray(len(heads))
    leaf = NONE
    switches: list[int] = []
    for i, head in enumerate(heads):
        p = tree.parent[i]
        if tree.is_leaf_marker(i):
            leaf = p if p != NONE else leaf
            continue
        if p != NONE and p < i and p != leaf and not has_child[p]:
            now, then = timestamp_ms(head.timestamp), timestamp_ms(heads[p].timestamp)
            if now is not None and then is not None and 0 <= now - then <= INTERLEAVE_SECONDS * 1000:
                switches.append(i)
        if p != NONE:
            has_child[p] = 1
        leaf = i
    if not switches:
        return []
    first, last = f.lines[switches[0]], f.lines[switches[-1]]
    message = (
        f"{len(switches)} time(s) between lines {first} and {last}, an entry continued a branch other than the "
        f"last entry's within {INTERLEAVE_SECONDS:g} s of that branch's previous entry"
    )
    if len(switches) < 2:
        return [Finding("branch-switch", "info", first, heads[switches[0]].id, message)]
    return [Finding("two-writers", "warning", first, heads[switches[0]].id, message + ": two writers at once")]


def _capped(findings: list[Finding]) -> list[Finding]:
    out: list[Finding] = []
    seen: dict[str, int] = {}
    for f in findings:
        seen[f.kind] = seen.get(f.kind, 0) + 1
        if seen[f.kind] <= MAX_LISTED:
            out.append(f)
    for kind, n in seen.items():
        if n > MAX_LISTED:
            first = next(f for f in findings if f.kind == kind)
            out.append(Finding(kind, first.severity, None, None, f"{n - MAX_LISTED} more {kind} findings not listed"))
    return out
