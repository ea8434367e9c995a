"""The registry and helpers of the conformance scenarios (see pi_scenarios.py)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
from helpers.factories import assistant, user, write

Entries = list[dict[str, Any]]


@attrs.define
class Scenario:
    name: str
    rule: str
    keep: int
    make: Callable[[Path], str]


SCENARIOS: dict[str, Scenario] = {}


def scenario(rule: str, keep: int = 20_000) -> Callable[[Callable[[], Entries]], Callable[[], Entries]]:
    """Register a factory-built scenario: the function returns its entries."""

    def register(fn: Callable[[], Entries]) -> Callable[[], Entries]:
        name = fn.__name__
        SCENARIOS[name] = Scenario(name, rule, keep, lambda d: write(d / f"{name}.jsonl", fn()))
        return fn

    return register


def raw(rule: str, keep: int = 20_000) -> Callable[[Callable[[], str]], Callable[[], str]]:
    """Register a hand-written scenario: the function returns the file's text."""

    def register(fn: Callable[[], str]) -> Callable[[], str]:
        name = fn.__name__

        def make(d: Path) -> str:
            path = d / f"{name}.jsonl"
            path.write_text(fn(), encoding="utf-8")
            return str(path)

        SCENARIOS[name] = Scenario(name, rule, keep, make)
        return fn

    return register


def mixed(rule: str, keep: int = 20_000) -> Callable[[Callable[[Path], str]], Callable[[Path], str]]:
    """Register a scenario that writes its file itself (pi-style lines, then ctxd's appends)."""

    def register(fn: Callable[[Path], str]) -> Callable[[Path], str]:
        SCENARIOS[fn.__name__] = Scenario(fn.__name__, rule, keep, fn)
        return fn

    return register


def x(n: int, ch: str = "x") -> str:
    """``n`` characters: ``n / 4`` tokens."""
    return ch * n


def big_user(chars: int) -> Callable[[str | None], dict[str, Any]]:
    return lambda p: user(p, x(chars))


def big_assistant(chars: int, **kw: Any) -> Callable[[str | None], dict[str, Any]]:
    return lambda p: assistant(p, x(chars, "y"), **kw)


TOOL = {"name": "grep", "description": "search files", "parameters": {"type": "object", "properties": {}}}

SYSTEM_AT_COMPACTION = {
    "role": "system",
    "content": "You are terse.\n\nAlso polite.",
    "sections": {"tone": "polite"},
    "toolsAdded": [TOOL],
    "timestamp": 1772355600000,
}
