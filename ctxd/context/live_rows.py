"""The rows of a cold build: message entries made lazy rows in bulk (``ctxd.context.live``).

A rebuild of the kept context turns each message entry whose estimate is known and whose line was
read clean into a :class:`ctxd.context.live_state.LazyRow` (its message decoded only when read),
estimating the others from their lines first (``ctxd.context.line_estimate``), and adds runs of such
rows to the state in bulk: what ``LiveContext._push`` does for one entry, for thousands at once.
"""

from __future__ import annotations

from itertools import accumulate, compress, repeat
from operator import attrgetter, is_not
from typing import Any

from ctxd.context.answers import trusted_usage
from ctxd.context.line_estimate import Call, fill_estimates
from ctxd.context.live_state import LazyRow, Source, State
from ctxd.store.session_file import SessionFile

__all__ = ["add_rows", "defer", "heads_of"]


def defer(
    session: Source, indices: list[int], heads: list[Any], raws: dict[int, list[dict[str, Any]] | LazyRow]
) -> list[int]:
    """Lazy rows for the message entries ``indices`` (with their ``heads``) whose estimate is known
    (or read from their lines: ``ctxd.context.line_estimate``) and whose line was read clean; returns
    the rest, to decode."""
    file = session.file
    estimates = session.estimates
    view = file.body_view()
    lines = file.lines
    clean = file.clean_flags()
    n_clean = len(clean)
    served = file.keep_heads()
    est = estimates.get
    # One loop, not maps: a map over nine columns into ``LazyRow`` builds an argument array per row, which
    # measured slower (ctx3k: 5.7-9.9 ms against 9.5-13.0 ms for the first build; 7% fewer instructions).
    left: list[int] = []
    later: list[tuple[int, Any]] = []
    for i, head in zip(indices, heads, strict=True):
        tokens = est(i)
        if tokens is None or i >= n_clean or not clean[i] or i in served:
            if i in served:
                left.append(i)  # recovered when read: decoded from memory
            else:
                later.append((i, head))
            continue
        role = head.message.role
        used = trusted_usage(head) if role == "assistant" else None
        raws[i] = LazyRow(role, head.id or "", lines[i], tokens, None, view, i, used, None)
    if later:
        later.sort()
        calls: dict[int, list[Call]] = {}
        unknown = [i for i, _ in later]
        rest = set(fill_estimates(file, unknown, estimates, calls))
        get = calls.get
        for i, head in later:
            if i in rest:
                left.append(i)
                continue
            msg = head.message
            role = msg.role
            used = trusted_usage(head) if role == "assistant" else None
            raws[i] = LazyRow(role, head.id or "", lines[i], estimates[i], None, view, i, used, get(i))
    return left


_INDEX = attrgetter("index")
_ENTRY_ID = attrgetter("entryId")
_TOKENS = attrgetter("tokens")
_ROLE = attrgetter("role")
_USED = attrgetter("used")


def add_rows(st: State, rows: list[LazyRow]) -> None:
    """Add lazy rows at the end, each its own entry (what ``_push`` does for each, in bulk; every
    per-row step a map over the rows, so that none runs a line of Python per row)."""
    k0 = len(st.entries)
    p0 = len(st.messages)
    n = len(rows)
    st.entries.extend(rows)
    st.raw.extend(rows)
    st.path.indices.extend(map(_INDEX, rows))
    st.start.extend(range(p0, p0 + n))
    st.messages.extend(rows)
    st.ids.extend(map(_ENTRY_ID, rows))
    st.owners.extend(range(k0, k0 + n))
    tokens = list(map(_TOKENS, rows))
    st.cum.extend(accumulate(tokens, initial=st.cum[-1]))
    del st.cum[p0 + 1]  # accumulate repeats its initial value
    roles = list(map(_ROLE, rows))
    if "system" in roles:
        systems = [j for j, role in enumerate(roles) if role == "system"]
        for j in systems:
            tokens[j] = 0
        st.systems.extend(p0 + j for j in systems)
        st.system_version += len(systems)
    st.cum_other.extend(accumulate(tokens, initial=st.cum_other[-1]))
    del st.cum_other[p0 + 1]
    useds = list(map(_USED, rows))
    if useds.count(None) != n:
        flags = list(map(is_not, useds, repeat(None)))
        st.usage.extend(compress(range(p0, p0 + n), flags))
        st.used.extend(compress(useds, flags))  # type: ignore[arg-type]


def heads_of(file: SessionFile, indices: list[int]) -> list[Any]:
    """``[file.heads[i] for i in indices]``: read from the list where held, and the heads let go
    (a big file's, or an index read back from the cache) decoded in one pass over their lines."""
    heads = file.heads
    get = list.__getitem__
    out = [get(heads, i) for i in indices]
    if None in out:
        missing = sorted({i for h, i in zip(out, indices, strict=True) if h is None})
        file.read_heads(missing, lambda i, head: list.__setitem__(heads, i, head))
        out = [get(heads, i) for i in indices]
    return out
