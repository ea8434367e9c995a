"""How a summary is scored against the facts of the range it summarised (``bench/fidelity_truth.py``), and why
a fact was missed. Nothing here imports ctxd.

A fact is kept when its probe occurs in the summary, both normalised (``fidelity_text.norm``: lower case, the
project's folder dropped from paths, markup and quotes removed, an omission marker a gap no probe spans). The
summary is scored as ctxd writes it, must-keep patch included; files must be named in its body, not only in
the ``<read-files>``/``<modified-files>`` lists appended to it.

A missed fact of a target category gets a reason (:func:`reason`):

- ``cut by the budget``: the same summariser, run on the same range with no size limit, keeps it;
- ``shown in another form``: its probe's first half is in the summary (a shortened command, a cut line);
- ``the failure told with another line`` (errors): what the failed call ran or touched is named in the summary,
  next to another line of its output;
- ``not in the summary``: none of these.

For ``(all so far)`` (facts of earlier ranges, :func:`carried`), the run without a size limit starts from the
earlier summary as it was written: a fact an earlier compaction cut is ``not in the summary`` there too.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

import fidelity_text as tx
from fidelity_truth import Truth

TARGET_KINDS = ("key commands", "constraints", "errors")
"""The categories the issue sets a target for (>= 95% on real sessions)."""
_FILE_BLOCKS = re.compile(r"<(read-files|modified-files)>.*?</\1>", re.S)
_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+(?:\[[ xX]\]\s+)?(.*)$")
NONE_ITEMS = {"none", "(none)", "(none recorded)", "(nothing recorded)", "n/a", "-", "nothing yet"}
SO_FAR = "(all so far)"
BUDGET = "cut by the budget"
FORM = "shown in another form"
OTHER_LINE = "the failure told with another line"
ABSENT = "not in the summary"


def body(summary: str) -> str:
    """The summary without the file lists appended to it."""
    return _FILE_BLOCKS.sub("", summary)


def sections(summary: str) -> dict[str, list[str]]:
    """Bullets of each ``## `` section (``### `` subsections folded in), by lower-case title."""
    out: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in summary.splitlines():
        if line.startswith("## "):
            current = out.setdefault(line[3:].strip().lower(), [])
            continue
        if current is None or line.startswith("### "):
            continue
        match = _ITEM.match(line)
        if match and match.group(1).strip().lower() not in NONE_ITEMS:
            current.append(match.group(1).strip())
    return out


def section(summary: str, prefix: str) -> list[str]:
    return next((items for title, items in sections(summary).items() if title.startswith(prefix)), [])


def traced(item: str, sources: str, root: str | None = None) -> bool:
    """Whether every piece of ``item`` (split at omission markers) occurs in ``sources`` (normalised)."""
    pieces = [p.strip() for p in tx.norm(item, root).split(tx.GAP.strip())]
    pieces = [p for p in pieces if len(p) >= 8]
    return bool(pieces) and all(p in sources for p in pieces)


@dataclass
class Score:
    found: dict[str, int] = field(default_factory=dict)
    total: dict[str, int] = field(default_factory=dict)
    missed: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    """kind -> (probe, text) of each fact the summary lacks"""

    def add(self, kind: str, hit: bool, probe: str, text: str = "") -> None:
        self.total[kind] = self.total.get(kind, 0) + 1
        self.found[kind] = self.found.get(kind, 0) + hit
        if not hit:
            self.missed.setdefault(kind, []).append((probe, text or probe))


def score(
    summary: str,
    truth: Truth,
    *,
    root: str | None = None,
    first_request: str | None = None,
    user_prose: str = "",
    tokens_in: int = 0,
) -> Score:
    """``summary`` (as ctxd writes it) scored against ``truth`` (see the module docstring)."""
    whole = tx.norm(summary, root)
    text = tx.norm(body(summary), root)
    s = Score()
    for probe, command in truth.commands.items():
        s.add("key commands", probe in whole, probe, command)
    for probe, sentence in truth.constraints.items():
        s.add("constraints", probe in whole, probe, sentence)
    for probe, line in truth.errors.items():
        s.add("errors", probe in whole, probe, line)
    for probe, request in truth.requests.items():
        s.add("requests", probe in whole, probe, request)
    for path, keys in truth.modified.items():
        s.add("files modified", any(k in text for k in keys), keys[0], path)
    for path, keys in truth.read.items():
        s.add("files read", any(k in text for k in keys), keys[0], path)
    for kind, planted in truth.planted.items():
        for probe, what in planted.items():
            if kind == "injected":
                shown = section(summary, "goal") + section(summary, "constraints")
                s.add("injected kept out", not any(probe in tx.norm(i) for i in shown), probe, what)
            else:
                s.add(kind, probe in whole, probe, what)
    if first_request:
        goal = tx.norm("\n".join(section(summary, "goal")), root)
        probe = tx.head(first_request, 40, root)
        s.add("goal = first request", bool(goal) and probe in goal, probe, first_request)
    for item in section(summary, "constraints"):
        s.add("precision constraints", traced(item, user_prose, root), item[:80])
    tokens_out = math.ceil(len(summary) / 4)
    s.add("not larger than input", tokens_out <= tokens_in, f"{tokens_out} > {tokens_in}")
    return s


def carried(summary: str, truth: Truth, into: Score, root: str | None = None) -> None:
    """Score ``summary`` against the key commands, constraints and errors of every range the chain of
    compactions summarised so far (``truth``), as ``<kind> (all so far)``: what survives compactions."""
    whole = tx.norm(summary, root)
    for kind, facts in (("key commands", truth.commands), ("constraints", truth.constraints), ("errors", truth.errors)):
        for probe, text in facts.items():
            into.add(f"{kind} {SO_FAR}", probe in whole, probe, text)


def reason(probe: str, summary: str, unbounded: str | None, root: str | None = None, call: str = "") -> str:
    """Why ``probe`` is not in ``summary`` (see the module docstring); ``unbounded``: the summary the same
    summariser writes for the same range without a size limit; ``call``: what the failed call of an error ran."""
    text = tx.norm(summary, root)
    if unbounded is not None and probe in tx.norm(unbounded, root):
        return BUDGET
    if probe[: max(12, len(probe) // 2)].rstrip() in text:
        return FORM
    named = tx.norm(call, root)[:30].rstrip()
    return OTHER_LINE if len(named) >= 8 and named in text else ABSENT
