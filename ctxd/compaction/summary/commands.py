"""Which commands a summary names, and how: the commands that matter with their runs and last outcome, and a
count of the read-only exploration it leaves out (see :func:`ctxd.compaction.reading.shell.command_matters`).

Used by the offline summary's sections and by the must-keep sheet, so that both mean the same commands.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

import attrs

from ctxd.compaction.reading.facts import CommandStat
from ctxd.compaction.reading.mining import short
from ctxd.compaction.reading.shell import command_matters
from ctxd.compaction.summary.document import EXPLORED_LABEL


def command_text(stat: CommandStat) -> str:
    """A command with where it ran, how often, and its last outcome: "`make` x3 (1 failed, last ok)",
    "`make` (ok)"."""
    return stat.text + (" (ok)" if stat.last_ok and not stat.failed else "")


def mattering(stats: Mapping[str, CommandStat]) -> list[CommandStat]:
    """The commands that matter (see :func:`ctxd.compaction.reading.shell.command_matters`), the most often run first,
    then the most recent."""
    ordered = sorted(stats.values(), key=lambda c: (-c.runs, -c.last_index))
    return [c for c in ordered if command_matters(c.command, c.last_ok)]


def commands_that_matter(stats: Mapping[str, CommandStat]) -> list[str]:
    """The commands that matter as text, grouped by the directory they ran in (named once, before the first
    of its group)."""
    groups: dict[str | None, list[str]] = {}
    for stat in mattering(stats):
        groups.setdefault(stat.cwd, []).append(command_text(attrs.evolve(stat, cwd=None)))
    out: list[str] = []
    for cwd, texts in groups.items():
        out.extend([f"in {short(cwd, 80)}: {texts[0]}", *texts[1:]] if cwd else texts)
    return out


def explored(stats: Mapping[str, CommandStat]) -> str | None:
    """A count of the read-only exploration left out of the commands, by program ("grep x4, ls x2")."""
    programs: Counter[str] = Counter()
    for stat in stats.values():
        if not command_matters(stat.command, stat.last_ok):
            words = stat.command.split()
            program = " ".join(words[:2]) if words[:1] == ["git"] else words[0] if words else "?"
            programs[program] += max(1, stat.runs)
    if not programs:
        return None
    shown = ", ".join(p for p, _ in programs.most_common(6))
    more = " ..." if len(programs) > 6 else ""
    return f"{EXPLORED_LABEL} {sum(programs.values())} read-only runs ({shown}{more})"
