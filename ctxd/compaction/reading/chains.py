"""Failure chains: what failed, what the agent said about it while it was open, what it changed, what then passed.

A resuming agent asks of a failure "why did it fail, what was tried and dropped, what is the final form, and
which check passed after it?". The episodes (:mod:`.episodes`) follow each failure until a success fixes it;
this module reads the pieces of that chain from the messages and tells them in one line:

- the failure's other findings (a linter's second finding, a compiler's second error), besides its first line;
- what the agent said while it was open: for each of its texts, the sentence that names the cause and the one
  that states its choice (:func:`said_about`); the last is the approach taken, the earlier ones were tried;
- the gist of each edit made since (:func:`edit_gist`: the first line the edit adds), the final form;
- the check that then passed.

Pure and bounded: each function reads at most a few thousand characters.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from ctxd.compaction.reading.mining import (
    CHOICE_RE,
    DIAGNOSIS_RE,
    ERROR_LINE_RE,
    FINDING_RE,
    MINE_CHARS,
    head,
    plain_sentences,
    short,
)
from ctxd.formats.lazy_re import lazy_compile

MAX_ALSO = 2
"""At most this many further findings of one failure are told."""
GIST_CHARS = 110
"""An edit's gist is cut to this many characters."""
_LINT_FINDING_RE = lazy_compile(r"^\s*[┃│|]?\s*\[[A-Z]\]\s+\S|^\S+\.\w{1,6}:\d+(?::\d+)?:?\s+\S|^\s*[×✗✘✖]\s*\S")
"""A line a linter or compiler reports one finding on (``[R] Prefer ...``, ``a.py:3:1: E501 ...``)."""
_ANNOTATION_RE = lazy_compile(r"^\s*[┃│|]?\s*\S+\.\w{1,6}:\d+(?::\d+)?\s+#\(")
"""The line under a finding that only says where it is (``lib/a.ex:135:5 #(A.f)``)."""


def finding_lines(output: str, first: str, limit: int = MAX_ALSO) -> list[str]:
    """The findings of a failed run's ``output`` besides its ``first`` line (the one the failure is told by):
    other lines a linter or compiler marks as a finding, or that name an error, each once, at most ``limit``."""
    out: list[str] = []
    if "\n" not in output.strip():
        return out  # one line: the first is all there is
    seen = {_norm(first)}
    for raw in output[:20_000].splitlines():
        if len(raw) > 300 or _ANNOTATION_RE.match(raw):
            continue
        line = " ".join(raw.split()).strip(" ┃│|")
        if len(line) < 12:
            continue
        if _LINT_FINDING_RE.match(raw) is None and ERROR_LINE_RE.search(line.lower()) is None:
            continue
        key = _norm(line)
        if key in seen or any(key in s or s in key for s in seen):
            continue
        seen.add(key)
        out.append(head(line, 160))
        if len(out) >= limit:
            break
    return out


def _norm(line: str) -> str:
    return " ".join(re.sub(r"[^\w ]+", " ", line.lower()).split())


def said_about(text: str) -> list[str]:
    """What the agent's ``text`` says about a failure it is working on: the first sentence that names a cause or
    a finding, and the first that states a choice (the approach it takes), each once; narration alone ("Let me
    check.") says nothing."""
    if len(text) < 12:
        return []
    out: list[str] = []
    cause = choice = ""
    for sentence in plain_sentences(text[:MINE_CHARS]):
        if len(sentence) < 20:
            continue
        if not cause and (DIAGNOSIS_RE.search(sentence) or FINDING_RE.match(sentence)):
            cause = sentence
        if not choice and CHOICE_RE.search(sentence):
            choice = sentence
        if cause and choice:
            break
    for found in (cause, choice):
        if found and found not in out:
            out.append(short(found, 240))
    return out


def edit_gist(arguments: Any) -> str:
    """The first line an edit or write adds that its old text did not have (the change's final form, in
    brief), or ""."""
    if not isinstance(arguments, Mapping):
        return ""
    new = arguments.get("new_string") or arguments.get("newText") or arguments.get("content") or ""
    old = arguments.get("old_string") or arguments.get("oldText") or ""
    edits = arguments.get("edits")
    if isinstance(edits, list) and edits:
        last = edits[-1] if isinstance(edits[-1], Mapping) else {}
        new = last.get("new_string") or last.get("newText") or ""
        old = last.get("old_string") or last.get("oldText") or ""
    if not isinstance(new, str) or not isinstance(old, str):
        return ""
    before = {" ".join(line.split()) for line in old[:MINE_CHARS].splitlines()}
    added: list[str] = []
    for raw in new[:MINE_CHARS].splitlines():
        line = " ".join(raw.split())
        if len(line) < 4 or line in before or line in ("end", "}", ")", "]", "do", "else"):
            continue
        added.append(line)
        if len(added) >= 2 or sum(len(a) for a in added) >= GIST_CHARS:
            break
    return head("; ".join(added), GIST_CHARS) if added else ""


def changed_step(name: str, gist: str) -> str:
    """One step of a fix: the file changed, with its edit's gist."""
    if not gist:
        return f"changed {name}"
    quoted = gist.replace("`", "'")
    return f"changed {name} (`{quoted}`)"


def merge_step(steps: list[str], step: str) -> None:
    """Add ``step`` to a failure's steps: a file changed again replaces its earlier step (its last form is the
    one that stands)."""
    if step.startswith("changed "):
        name = step.split(" ", 2)[1]
        for n, known in enumerate(steps):
            if known.split(" ", 2)[1:2] == [name] and known.startswith("changed "):
                del steps[n]
                break
    steps.append(step)


def fix_text(tried: Sequence[str], steps: Sequence[str], how: str | None) -> str | None:
    """How a failure was fixed: the agent's diagnosis and the approaches it took in order (the last is the one
    that stands, the earlier ones were tried and dropped), what it changed, and what then passed."""
    parts: list[str] = []
    said = [short(sentence, 200) for sentence in dict.fromkeys(tried)]
    choices = [n for n, sentence in enumerate(said) if CHOICE_RE.search(sentence)]
    if len(choices) >= 2:  # more than one approach: the last stands, the earlier ones were dropped
        chosen = said.pop(choices[-1])
        parts.append("tried: " + " / ".join(said) + "; chose: " + chosen)
    elif said:
        parts.append(" / ".join(said))
    shown = list(dict.fromkeys(steps))
    passed = shown.pop() if shown and shown[-1].startswith("ran ") else how
    changed = [step for step in shown if step.startswith("changed ")][-4:]
    ran = [step for step in shown if not step.startswith("changed ")][-2:]
    if changed or ran:
        parts.append("then " + ", ".join(changed + ran))  # what it changed first: the final form
    if passed:
        parts.append(f"passed: {passed}")
    return "; ".join(parts) if parts else None


def brief_fix(how: str, limit: int) -> str:
    """A fix told by :func:`fix_text` in at most about ``limit`` characters: the approach that stands (not the
    ones dropped), what it changed, and what passed, each cut from its end."""
    passed = then = ""
    if how.startswith("passed: "):
        how, passed = "", how.removeprefix("passed: ")
    elif "; passed: " in how:
        how, passed = how.rsplit("; passed: ", 1)
    if how.startswith("then "):
        how, then = "", how.removeprefix("then ")
    elif "; then " in how:
        how, then = how.rsplit("; then ", 1)
    said = how.rsplit("; chose: ", 1)[-1] if "; chose: " in how else how
    parts = [head(said, limit * 2 // 5)] if said else []
    if then:
        parts.append("then " + head(then, limit * 2 // 5))
    if passed:
        parts.append("passed: " + head(passed, limit // 4))
    return "; ".join(parts)
