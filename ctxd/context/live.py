"""The context an open session keeps between requests, changed only where the session changed.

:class:`LiveContext` holds pi 1.5.2's projection at one leaf (as ``project`` makes it) with every
message decoded and estimated, the running sums pi's projected size needs, and what the compaction
plan reads. Asked about another leaf it moves there in O(change):

- an append (the new leaf descends from the old one) adds the new entries;
- a leaf move (a branch) drops the entries after the common ancestor and adds the new ones;
- a new compaction, a context edit entering or leaving the path, a duplicate id, a re-linked tree
  or a reload of the file rebuilds it, reusing every entry already decoded (not after a reload).

It is ctxd's one context builder: the daemon keeps one per session (:func:`live_context`), and a
one-shot answer (``ctxd.context.build.build_context``: the command line, facts, checks) is a new
one asked once. A state moved to a leaf equals one rebuilt there (tests/context/test_live_context.py checks
it over random histories). Message dicts are shared between answers: callers must not change them
(``truncate_tool_result`` copies, as every consumer must).
"""

from __future__ import annotations

import gc
import itertools
import os
from bisect import bisect_left
from typing import Any

from ctxd.context.answers import Context, Size, last_of_head, last_of_message, model_at, thinking_at
from ctxd.context.live_rows import add_rows, defer, heads_of
from ctxd.context.live_state import LazyRow, Source, State
from ctxd.context.pins import carried
from ctxd.context.pins import version as pins_version
from ctxd.context.project import ContextPath, ProjectedEntry, context_path, entry_tokens
from ctxd.context.rows import ContextMessage
from ctxd.context.rules import (
    USAGE_INVALIDATORS,
    apply_edit,
    entry_messages,
    may_yield,
)
from ctxd.context.size import size_without_edits
from ctxd.context.tokens import estimate_tokens, valid_usage
from ctxd.formats.codec import CURRENT_VERSION
from ctxd.store.reader import DECODED
from ctxd.tree.index import NONE
from ctxd.tree.session import Session

__all__ = ["LiveContext", "live_context", "size_at", "size_of"]

_PROCESS = os.urandom(3).hex()
_SERIAL = itertools.count(1)
PER_ROW = 400
"""Bytes a message of the kept context holds beside its decoded message (its row, estimates, ids)."""
_BODY_TYPES = frozenset({"compaction", "context_edit"})
"""Entry types whose whole body the state keeps (the plan reads them; they are few)."""


class LiveContext:
    """One session's context, kept and moved to whichever leaf is asked for (see the module)."""

    def __init__(self, session: Source) -> None:
        self.session = session
        self.state: State | None = None
        self.rebuilds = 0
        """How many times the state was rebuilt rather than moved (tests read it)."""
        self._serial = f"{_PROCESS}{next(_SERIAL)}"

    def weight(self) -> int:
        """About how many bytes the kept context holds: its rows, and the messages decoded so far
        (about twice their lines' bytes)."""
        st = self.state
        if st is None:
            return 0
        file = self.session.file
        lengths, index, n = file.lengths, file.index, len(file.lengths)
        decoded = 0
        for row in st.messages:
            if row.loaded:  # a lazy row read since, or a row made decoded (its line found by its id)
                i = row.index if row.index >= 0 else index.get(row.entryId, -1)
                decoded += lengths[i] if 0 <= i < n else 0
        return PER_ROW * len(st.messages) + DECODED * decoded

    def revision(self) -> str:
        """Names what the contexts of this session's entries are now: it changes when a context
        already given out may have changed (a reload, a late parent, a duplicate id), and with every
        new LiveContext (a daemon restart). Within one revision the file only grew."""
        file, tree = self.session.file, self.session.tree
        tree.update()
        return f"{self._serial}.{file.generation}.{tree.relinks}.{len(file.heads) - len(file.index)}"

    # --- answers --------------------------------------------------------------------------------

    def at(self, leaf_id: str | None = None) -> State | None:
        """The state at ``leaf_id`` (default: the session's leaf); None for an empty session."""
        file, tree = self.session.file, self.session.tree
        tree.update()
        leaf = file.require(leaf_id) if leaf_id is not None else file.leaf_index()
        if leaf is None:
            return None
        return self._move(leaf)

    def at_index(self, leaf: int) -> State:
        """The state at the entry with index ``leaf``."""
        self.session.tree.update()
        return self._move(leaf)

    def context(self, leaf_id: str | None = None) -> Context:
        """The context at ``leaf_id`` (default: the session's leaf)."""
        file, tree = self.session.file, self.session.tree
        st = self.at(leaf_id)
        # After moving: what reading the new bodies found is among the file's diagnostics.
        diagnostics = [d.to_json() for d in [*file.diagnostics, *tree.problems()]]
        if st is None:
            return Context(None, None, None, "off", [], 0, 0, diagnostics)
        heads = file.heads
        leaf = st.leaf
        comp = st.path.compaction
        if comp != NONE and not st.path.first_kept_found:
            diagnostics.append(
                {
                    "line": file.lines[comp],
                    "message": f"compaction's firstKeptEntryId {heads[comp].firstKeptEntryId!r} "
                    "is not on its path; nothing before it is kept",
                }
            )
        provider, model_id = model_at(file, tree, leaf)
        return Context(
            leafId=heads[leaf].id,
            provider=provider,
            modelId=model_id,
            thinkingLevel=thinking_at(file, tree, leaf),
            messages=list(st.messages),
            estimatedTokens=st.cum[-1],
            contextTokens=st.tokens(),
            diagnostics=diagnostics,
            compactionId=heads[comp].id if comp != NONE else None,
        )

    def size(self, leaf_id: str | None = None) -> Size:
        """The context's size at ``leaf_id`` (``context(leaf_id).contextTokens`` and its last message)."""
        st = self.at(leaf_id)
        if st is None:
            return Size(None, 0, None)
        heads = self.session.file.heads
        last: dict[str, Any] | None = None
        if st.edit_pos and st.messages:  # with edits: the context's last message, as shown
            last = last_of_message(st.agent[-1])
        elif st.messages:  # without: the last entry that shows messages, from the index
            last = last_of_head(heads[st.entries[st.owners[-1]].index])
        return Size(heads[st.leaf].id, st.tokens(), last)

    def unchanged_prefix(self, since_id: str, leaf_id: str | None = None) -> int:
        """How many leading messages the context at ``leaf_id`` shares with the context at ``since_id``
        (all of the latter's), or 0 when that context is not a prefix of this one."""
        file, tree = self.session.file, self.session.tree
        since = file.index.get(since_id)
        st = self.at(leaf_id)
        if st is None or since is None:
            return 0
        if since == st.path.compaction:
            ks = st.path.after - 1
        else:
            found = st.position(since, tree.depth)
            if found is None or found < st.path.after:
                return 0  # the context at an entry before the compaction is another projection
            ks = found
        if st.edit_pos and st.edit_pos[-1] > ks:
            return 0  # an edit after it may change earlier messages
        return st.entry_end(ks)

    # --- moving ---------------------------------------------------------------------------------

    def _move(self, leaf: int) -> State:
        file, tree = self.session.file, self.session.tree
        st = self.state
        duplicates = len(file.heads) - len(file.index)
        if st is None or st.generation != file.generation:
            return self._rebuild(leaf, None)
        if st.relinks != tree.relinks or st.duplicates != duplicates or st.pins != pins_version(file):
            return self._rebuild(leaf, st)  # a pin or unpin changes what a compaction carries
        if leaf == st.leaf:
            return st
        comp = tree.last_compaction[leaf]
        if comp != st.path.compaction:
            return self._rebuild(leaf, st)
        common = tree.common_ancestor(st.leaf, leaf)
        if common == NONE:
            return self._rebuild(leaf, st)
        if common == comp:
            keep = st.path.after
        else:
            k = st.position(common, tree.depth)
            if k is None or k < st.path.after:
                return self._rebuild(leaf, st)
            keep = k + 1
        if st.edit_pos and st.edit_pos[-1] >= keep:
            return self._rebuild(leaf, st)  # an edit leaves the path
        new: list[int] = []
        i = leaf
        parent = tree.parent
        while i != common:
            new.append(i)
            i = parent[i]
        new.reverse()
        heads = file.heads
        if any(heads[j].type in _BODY_TYPES for j in new):
            return self._rebuild(leaf, st)  # a compaction or an edit enters the path
        self._truncate(st, keep)
        st.path.leaf = leaf
        wanted = [j for j in new if may_yield(heads[j])]
        bodies = dict(zip(wanted, file.entries(wanted), strict=True))
        for j in new:
            body = bodies.get(j)
            self._push(st, j, entry_messages(body) if body is not None else [], None)
        return st

    def _truncate(self, st: State, keep: int) -> None:
        """Drop the entries from position ``keep`` on (none of them a compaction or an edit)."""
        if keep >= len(st.entries):
            return
        m = st.start[keep]
        if m < len(st.messages):
            st.plan_cache = None  # it may cover messages that leave
        del st.entries[keep:], st.raw[keep:], st.start[keep:], st.path.indices[keep:]
        del st.messages[m:], st.ids[m:], st.owners[m:]
        del st.cum[m + 1 :], st.cum_other[m + 1 :]
        cut = bisect_left(st.usage, m)
        del st.usage[cut:], st.used[cut:]
        cut = bisect_left(st.systems, m)
        if cut < len(st.systems):
            del st.systems[cut:]
            st.system_version += 1
        del st.invalidators[bisect_left(st.invalidators, keep) :]

    def _rebuild(self, leaf: int, old: State | None) -> State:
        """The state at ``leaf`` from the path, reusing ``old``'s decoded entries (same generation)."""
        enabled = gc.isenabled()
        gc.disable()  # tens of thousands of new dicts at once: the collector would only slow this down
        try:
            return self._rebuild_now(leaf, old)
        finally:
            if enabled:
                gc.enable()

    def _rebuild_now(self, leaf: int, old: State | None) -> State:
        file, tree = self.session.file, self.session.tree
        self.rebuilds += 1
        heads = file.heads
        path = context_path(tree, leaf)
        comp = path.compaction
        indices = path.indices
        base = path.after - tree.depth[comp] - 1 if comp != NONE else 0
        st = State(
            generation=file.generation,
            relinks=tree.relinks,
            duplicates=len(file.heads) - len(file.index),
            path=ContextPath(leaf, comp, [], path.after, path.first_kept_found),
            base=base,
            kept_pos={indices[k]: k for k in range(1, path.after)},
        )
        reuse = old if old is not None and old.generation == file.generation else None
        hs = heads_of(file, indices)
        raws: dict[int, list[dict[str, Any]] | LazyRow] = {}
        bodies: dict[int, dict[str, Any]] = {}
        missing: list[int] = []
        lazy: list[int] = []
        lazy_heads: list[Any] = []
        may_defer = file.version == CURRENT_VERSION
        for k, (i, head) in enumerate(zip(indices, hs, strict=True)):
            kind = head.type
            if kind == "message" and reuse is None:  # the common case, first: may_yield inlined
                msg = head.message
                if msg is None:
                    continue
                if may_defer and msg.role:
                    lazy.append(i)
                    lazy_heads.append(head)
                else:
                    missing.append(i)
                continue
            if kind == "compaction" and k > 0:
                continue  # an older compaction inside the kept range shows nothing
            if kind != "context_edit" and not may_yield(head):
                continue
            if reuse is not None:
                ko = reuse.position(i, tree.depth)
                if ko is not None and reuse.entries[ko].index == i and (kind not in _BODY_TYPES or i in reuse.bodies):
                    raws[i] = reuse.raw[ko]
                    if kind in _BODY_TYPES:
                        bodies[i] = reuse.bodies[i]
                    continue
            if may_defer and kind == "message" and head.message.role:  # may_yield: it has a message
                lazy.append(i)
                lazy_heads.append(head)
            else:
                missing.append(i)
        if lazy:
            missing.extend(defer(self.session, lazy, lazy_heads, raws))
        for i, body in zip(missing, file.entries(missing), strict=True):
            raws[i] = entry_messages(body)
            if heads[i].type in _BODY_TYPES:
                bodies[i] = body
        for i in [i for i, head in zip(indices, hs, strict=True) if head.type == "context_edit"]:
            body = bodies[i]
            st.edits[str(body.get("targetId", ""))] = body.get("replacement")
        st.pins = pins_version(file)
        edits = st.edits
        if edits:
            self._add_edited(st, indices, hs, raws, bodies)
        else:
            # Runs of lazy rows go in one add_rows each; only the entries between them one by one.
            found = list(map(raws.get, indices))
            others = [k for k, t in enumerate(map(type, found)) if t is not LazyRow]
            if comp != NONE and (not others or others[0] != 0):
                others.insert(0, 0)
            done = 0
            for k in others:
                if k > done:
                    add_rows(st, found[done:k])  # type: ignore[arg-type]
                self._add_entry(st, k, indices, hs[k], found[k], bodies, comp)
                done = k + 1
            if done < len(indices):
                add_rows(st, found[done:])  # type: ignore[arg-type]
        self.state = st
        return st

    def _add_edited(
        self,
        st: State,
        indices: list[int],
        hs: list[Any],
        raws: dict[int, list[dict[str, Any]] | LazyRow],
        bodies: dict[int, dict[str, Any]],
    ) -> None:
        """Add the path's entries when context edits apply: an edited message's entry one by one."""
        edits = st.edits
        run: list[LazyRow] = []
        get = raws.get
        for k, (i, head) in enumerate(zip(indices, hs, strict=True)):
            raw = get(i)
            if type(raw) is LazyRow and head.id not in edits:
                run.append(raw)
                continue
            if run:
                add_rows(st, run)
                run = []
            self._add_entry(st, k, indices, head, raw, bodies, st.path.compaction)
        if run:
            add_rows(st, run)

    def _add_entry(
        self,
        st: State,
        k: int,
        indices: list[int],
        head: Any,
        raw: list[dict[str, Any]] | LazyRow | None,
        bodies: dict[int, dict[str, Any]],
        comp: int,
    ) -> None:
        """Add the path's entry ``k`` on its own (then, after the compaction, what it carries)."""
        i = indices[k]
        if head.type == "compaction" and k > 0:
            self._push(st, i, [], None, hidden_compaction=True)
        else:
            self._push(st, i, raw if raw is not None else [], bodies.get(i))
        if k == 0 and comp != NONE:
            self._carry(st, carried(self.session.file, self.session.tree, comp, indices))

    def _carry(self, st: State, pinned: list[tuple[int, dict[str, Any]]]) -> None:
        """The pinned messages the compaction carries, right after its own."""
        file = self.session.file
        for i, message in pinned:
            tokens = estimate_tokens(message)
            self._add_message(st, 0, message, file.heads[i].id or "", file.lines[i], tokens)
            st.carried += 1
            st.carried_tokens += tokens

    def _push(
        self,
        st: State,
        i: int,
        raw: list[dict[str, Any]] | LazyRow,
        body: dict[str, Any] | None,
        *,
        hidden_compaction: bool = False,
    ) -> None:
        """Add entry ``i`` at the end of the projection (``raw``: its messages before edits, or the
        lazy row of its one message)."""
        file = self.session.file
        head = file.heads[i]
        k = len(st.entries)
        kind = head.type
        edited = not hidden_compaction and head.id is not None and head.id in st.edits
        if isinstance(raw, LazyRow):
            raw = [raw.message]  # an edit replaces its content (unedited lazy rows go in bulk)
        if hidden_compaction:
            entry = ProjectedEntry(i, [], True, False)
        else:
            shown = apply_edit(raw, st.edits[head.id or ""]) if edited else raw
            entry = ProjectedEntry(i, shown, bool(raw), edited)
        st.entries.append(entry)
        st.raw.append(raw)
        st.path.indices.append(i)
        st.start.append(len(st.messages))
        if kind in USAGE_INVALIDATORS:
            st.invalidators.append(k)
            if kind == "context_edit":
                st.edit_pos.append(k)
            if body is not None:
                st.bodies[i] = body
        if not entry.messages:
            return
        entry_id = head.id or ""
        line = file.lines[i]
        for message, tokens in zip(entry.messages, entry_tokens(entry, self.session.estimates), strict=True):
            self._add_message(st, k, message, entry_id, line, tokens)

    @classmethod
    def _add_message(cls, st: State, k: int, message: dict[str, Any], entry_id: str, line: int, tokens: int) -> None:
        role = str(message.get("role", ""))
        usage = valid_usage(message) if role == "assistant" else None
        cls._add_row(st, k, ContextMessage(role, entry_id, line, tokens, message), usage)

    @staticmethod
    def _add_row(st: State, k: int, row: ContextMessage, usage: int | None) -> None:
        p = len(st.messages)
        tokens = row.tokens
        st.messages.append(row)
        st.ids.append(row.entryId)
        st.owners.append(k)
        cum, cum_other = st.cum, st.cum_other
        cum.append(cum[-1] + tokens)
        if row.role == "system":
            cum_other.append(cum_other[-1])
            st.systems.append(p)
            st.system_version += 1
        else:
            cum_other.append(cum_other[-1] + tokens)
        if usage is not None:
            st.usage.append(p)
            st.used.append(usage)


def live_context(session: Session) -> LiveContext:
    """The session's :class:`LiveContext`, made on first use and kept with the session."""
    live = session.derived.get("context")
    if not isinstance(live, LiveContext):
        live = session.derived["context"] = LiveContext(session)
    return live


def size_of(session: Session, leaf_id: str | None = None) -> Size:
    """The context's size at ``leaf_id`` (default: the leaf): from the kept context when there is
    one (both ways are O(change)), else without building it (:func:`size_at`), so that sessions
    nobody asks the context of stay cheap to watch."""
    live = session.derived.get("context")
    if isinstance(live, LiveContext) and live.state is not None:
        return live.size(leaf_id)
    return size_at(session, leaf_id)


def size_at(session: Source, leaf_id: str | None = None) -> Size:
    """The context's size at ``leaf_id`` without keeping a context: from the index and the cached
    estimates (``ctxd.context.size``), or, with a context edit on the path, from a context built once."""
    file = session.file
    leaf = file.require(leaf_id) if leaf_id is not None else file.leaf_index()
    if leaf is None:
        return Size(None, 0, None)
    found = size_without_edits(file, session.tree, leaf, session.estimates)
    return found if found is not None else LiveContext(session).size(leaf_id)
