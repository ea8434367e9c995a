"""The switch between the native scanner and the Python path, for the differential tests
(tests/test_native_*.py), and what a session answers on each path.

The native scanner is required: without ``ctxd._native`` built these tests FAIL, unless the
environment says ``CTXD_NATIVE=0`` (then they skip, saying so). A test that silently skipped when
the extension was not built would prove nothing.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import pytest

from ctxd.compaction.cut.plan import NothingToCompact, plan_compaction
from ctxd.context.live import live_context
from ctxd.context.rules import entry_message
from ctxd.context.tokens import estimate_tokens
from ctxd.store import native
from ctxd.tree.session import Session

T = TypeVar("T")

NOT_BUILT = (
    "ctxd._native is not built: build it (setup.py build_ext --inplace, or gcc as in issue 23) or set "
    "CTXD_NATIVE=0 to skip the native scanner's differential tests"
)


def native_scan() -> Callable[..., Any]:
    """The extension's scan_chunk: fail when it is not built, skip under CTXD_NATIVE=0."""
    if os.environ.get("CTXD_NATIVE", "1").strip() == "0":
        pytest.skip("CTXD_NATIVE=0: the native scanner is turned off, its differential tests skip")
    try:
        from ctxd import _native  # type: ignore[attr-defined]
    except ImportError as exc:
        pytest.fail(f"{NOT_BUILT} ({exc})")
    scan: Callable[..., Any] = _native.scan_chunk
    return scan


class Paths:
    """Runs code on the native path or on the Python path (``ctxd.store.native._scan``)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, scan: Callable[..., Any]) -> None:
        self.monkeypatch = monkeypatch
        self.scan = scan

    @contextmanager
    def on(self, use_native: bool) -> Iterator[None]:
        self.monkeypatch.setattr(native, "_scan", self.scan if use_native else None)
        try:
            yield
        finally:
            self.monkeypatch.setattr(native, "_scan", self.scan)

    def run(self, use_native: bool, fn: Callable[[], T]) -> T:
        with self.on(use_native):
            return fn()

    def both(self, fn: Callable[[], T]) -> tuple[T, T]:
        """``fn`` on the native path, then on the Python path."""
        return self.run(True, fn), self.run(False, fn)


def entry_estimate(s: Session, i: int) -> int | None:
    """The dict path's estimate of entry ``i`` (what every other estimate must equal)."""
    message = entry_message(s.file.entry(i))
    return None if message is None else estimate_tokens(message)


def outcome(fn: Callable[[], T]) -> T | str:
    """``fn()``, or its exception as text (both paths must fail alike)."""
    try:
        return fn()
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"


def observe(s: Session, keep_recent: tuple[int, ...] = (2000, 20000), bodies: bool = True) -> dict[str, Any]:
    """Everything a session answers from its index, its context and its plans (heads read back
    through the reader when a big file let them go), then every entry's body."""
    f = s.file
    n = len(f)
    out: dict[str, Any] = {
        "heads": outcome(lambda: [f.heads[i] for i in range(n)]),
        "offsets": list(f.offsets),
        "lengths": list(f.lengths),
        "lines": list(f.lines),
        "index": dict(f.index),
        "header": f.header,
        "version": f.version,
        "leaf": outcome(s.leaf_id),
        "diagnostics": outcome(lambda: [d.to_json() for d in s.diagnostics()]),
    }

    def context() -> dict[str, Any]:
        ctx = live_context(s).context()
        rows = [(m.role, m.entryId, m.line, m.tokens, m.message) for m in ctx.messages]
        return {"rows": rows, "contextTokens": ctx.contextTokens, "json": ctx.to_json()}

    # The plans first: a plan of messages not read yet takes their file operations from what the
    # native scanner noted of their tool calls (ctxd.store.calls), not from the messages.
    for keep in keep_recent:

        def plan(keep: int = keep) -> dict[str, Any] | str:
            try:
                return plan_compaction(s, keep_recent_tokens=keep).to_json(with_messages=True)
            except NothingToCompact as exc:
                return f"nothing to compact: {exc}"

        out[f"plan{keep}"] = outcome(plan)
    out["context"] = outcome(context)
    out["diagnostics after"] = outcome(lambda: [d.to_json() for d in s.diagnostics()])
    if bodies:  # last: reading a body first would note its line read
        out["bodies"] = outcome(lambda: f.entries(range(n)))
        out["diagnostics after bodies"] = outcome(lambda: [d.to_json() for d in s.diagnostics()])
    return out


def check_estimates(s: Session) -> dict[int, int]:
    """The session's estimates after a build, each checked against the dict path; returns them."""
    estimates = dict(s.estimates)
    for i, value in estimates.items():
        assert value == entry_estimate(s, i), (i, value, s.file.lines[i])
    return estimates


def first_difference(a: Any, b: Any, where: str = "") -> tuple[str, Any, Any]:
    """Where two answers first differ, and the two parts there."""
    if isinstance(a, dict) and isinstance(b, dict) and a.keys() == b.keys():
        k = next(k for k in a if a[k] != b[k])
        return first_difference(a[k], b[k], f"{where}[{k!r}]")
    if isinstance(a, list | tuple) and isinstance(b, list | tuple) and len(a) == len(b):
        k = next(k for k, (x, y) in enumerate(zip(a, b, strict=True)) if x != y)
        return first_difference(a[k], b[k], f"{where}[{k}]")
    return where, a, b


def same(native_answer: dict[str, Any], python_answer: dict[str, Any], what: str = "the Python path") -> None:
    """Equal answers, key by key: a failure shows where they first differ."""
    assert native_answer.keys() == python_answer.keys()
    for key in native_answer:
        if native_answer[key] != python_answer[key]:
            where, a, b = first_difference(native_answer[key], python_answer[key], key)
            raise AssertionError(f"the native path and {what} differ at {where}:\n{a!r:.1500}\n{b!r:.1500}")
