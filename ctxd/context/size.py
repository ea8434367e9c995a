"""The context's size without building it: what a status bar, auto-compaction and a watcher need.

:func:`size_without_edits` equals ``Context.contextTokens`` (pi's projected estimate) at a leaf whose
path holds no context edit, reading only bodies whose estimate is not cached: appending one message
costs one body decode, not a build of the whole context. With an edit on the path it answers None and
the caller builds the context (``ctxd.context.live``).
"""

from __future__ import annotations

from typing import Any

from ctxd.context.answers import Size, last_of_head, trusted_usage
from ctxd.context.line_estimate import fill_estimates
from ctxd.context.pins import carried
from ctxd.context.pins import version as pins_version
from ctxd.context.project import context_path
from ctxd.context.rules import USAGE_INVALIDATORS, current_system_message, entry_message, is_system, may_yield
from ctxd.context.tokens import estimate_tokens
from ctxd.formats.codec import CURRENT_VERSION, LineHead
from ctxd.store.session_file import SessionFile
from ctxd.tree.index import NONE, TreeIndex

__all__ = ["estimate_entries", "pinned_tokens", "size_without_edits"]


def size_without_edits(session: SessionFile, tree: TreeIndex, leaf: int, estimates: dict[int, int]) -> Size | None:
    """pi's projected size at entry ``leaf`` from the index and cached estimates; None when a context
    edit is on the path (build the context then)."""
    tree.update()
    heads = session.heads
    pins = pins_version(session)
    if tree.size_memo_key != pins:
        tree.size_memo = None  # a pin or unpin changes what a compaction carries
        tree.size_memo_key = pins
    if not tree.has_context_edits:
        quick = _size_from_last_usage(session, tree, leaf, estimates)
        if quick is not None:
            return quick
    path = context_path(tree, leaf)
    if any(heads[i].type == "context_edit" for i in path.indices):
        return None
    # No edits: usage is trusted only after the compaction (the kept part before it measured the old context).
    comp = path.compaction
    yielding = [i for i in path.indices if i != comp and heads[i].type != "compaction" and _yields(session, i)]
    after = set(path.indices[path.after :])
    trailing: list[int] = []
    tokens: int | None = None
    for i in reversed(yielding):
        if i not in after:
            break
        used = trusted_usage(heads[i])
        if used is not None:
            estimate_entries(session, trailing, estimates)
            tokens = used + sum(estimates[j] for j in trailing)
            break
        trailing.append(i)
    usage_based = tokens is not None
    if tokens is None:
        tokens = _estimated_size(session, comp, yielding, estimates)
        if comp != NONE:
            tokens += pinned_tokens(session, tree, comp, path.indices)
    last_index = yielding[-1] if yielding else comp
    last = last_of_head(heads[last_index]) if last_index != NONE else None
    if not tree.has_context_edits:
        tree.size_memo = (leaf, tokens, last, usage_based)
    return Size(heads[leaf].id, tokens, last)


def pinned_tokens(session: SessionFile, tree: TreeIndex, comp: int, shown: list[int]) -> int:
    """Tokens of the pinned messages a compaction carries (0 without pins)."""
    return sum(estimate_tokens(m) for _, m in carried(session, tree, comp, shown))


def _estimated_size(session: SessionFile, comp: int, yielding: list[int], estimates: dict[int, int]) -> int:
    """The size without trusted usage: the current system message once, plus every other message
    (pi's fallback in ``estimateProjectedContextTokens``), from cached estimates."""
    heads = session.heads
    systems = [i for i in yielding if is_system(heads[i])]
    others = [i for i in yielding if not is_system(heads[i])] + ([comp] if comp != NONE else [])
    estimate_entries(session, others, estimates)
    prompt: list[dict[str, Any]] = []
    if comp != NONE:
        carried_prompt = session.entry(comp).get("systemMessage")
        if isinstance(carried_prompt, dict):
            prompt.append(carried_prompt)
    for body in session.entries(systems):
        found = entry_message(body)
        if found is not None:
            prompt.append(found)
    system = current_system_message(prompt)
    return sum(estimates[i] for i in others) + (estimate_tokens(system) if system is not None else 0)


def _size_from_last_usage(session: SessionFile, tree: TreeIndex, leaf: int, estimates: dict[int, int]) -> Size | None:
    """The size from the newest trusted usage, walking back from the leaf only as far as it (or as
    the previous size's leaf); None when a compaction comes first (then usage before it is stale)."""
    heads = session.heads
    trailing: list[int] = []
    last: dict[str, Any] | None = None
    memo = tree.size_memo
    i = leaf
    while i != NONE:
        if memo is not None and i == memo[0]:
            # The previous size was for an ancestor with nothing trusted since: add what came after,
            # unless that size was estimated and a system message arrived (it merges, it does not add).
            if not memo[3] and any(is_system(heads[j]) for j in trailing):
                return None
            estimate_entries(session, trailing, estimates)
            tokens = memo[1] + sum(estimates[j] for j in trailing)
            tree.size_memo = (leaf, tokens, last or memo[2], memo[3])
            return Size(heads[leaf].id, tokens, last or memo[2])
        head = heads[i]
        if head.type in USAGE_INVALIDATORS:
            return None
        if may_yield(head) and _yields(session, i):
            if last is None:
                last = last_of_head(head)
            used = trusted_usage(head)
            if used is not None:
                estimate_entries(session, trailing, estimates)
                tokens = used + sum(estimates[j] for j in trailing)
                tree.size_memo = (leaf, tokens, last, True)
                return Size(heads[leaf].id, tokens, last)
            trailing.append(i)
        i = tree.parent[i]
    return None


def _yields(session: SessionFile, i: int) -> bool:
    """Whether entry ``i`` yields messages; only a branch summary needs its body (an empty one yields none)."""
    head = session.heads[i]
    if head.type == "branch_summary":
        return bool(session.entry(i).get("summary"))
    return may_yield(head)


def estimate_entries(session: SessionFile, indices: list[int], estimates: dict[int, int]) -> None:
    """Fill ``estimates`` for ``indices`` not in it yet: message entries from their lines where they
    can be (``ctxd.context.line_estimate``), the rest from their bodies (one batched read)."""
    missing = [j for j in indices if j not in estimates]
    if missing and session.version == CURRENT_VERSION:
        heads = session.heads
        quick = [j for j in missing if _plain_message(heads[j]) and not session.recovered(j)]
        if quick:
            fill_estimates(session, quick, estimates)
            missing = [j for j in missing if j not in estimates]
    for j, body in zip(missing, session.entries(missing), strict=True):
        found = entry_message(body)
        estimates[j] = estimate_tokens(found) if found is not None else 0


def _plain_message(head: LineHead) -> bool:
    """A ``message`` entry whose role the index knows (what a line estimate can read)."""
    return head.type == "message" and head.message is not None and bool(head.message.role)
