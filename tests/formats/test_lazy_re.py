"""Patterns compiled on first use answer as compiled patterns do, and are compiled only when used."""

from __future__ import annotations

import re

from ctxd.formats.lazy_re import lazy_compile


def test_a_lazy_pattern_is_compiled_at_its_first_use_and_answers_as_re_compile() -> None:
    lazy = lazy_compile(r"(?P<word>err\w*)|fail", re.IGNORECASE)
    assert "search" not in vars(lazy)  # nothing compiled at import
    real = re.compile(r"(?P<word>err\w*)|fail", re.IGNORECASE)
    text = "ok\nERROR: x\nfailed\n"
    assert lazy.search(text).span() == real.search(text).span()  # type: ignore[union-attr]
    assert "search" in vars(lazy)  # bound once: later calls cost what a compiled pattern's do
    assert lazy.findall(text) == real.findall(text)
    assert [m.span() for m in lazy.finditer(text)] == [m.span() for m in real.finditer(text)]
    assert lazy.sub("-", text) == real.sub("-", text)
    assert lazy.split(text) == real.split(text)
    lines = text.split("\n")
    assert [bool(m) for m in map(lazy.match, lines)] == [bool(m) for m in map(real.match, lines)]
    assert (lazy.pattern, lazy.flags, lazy.groups) == (real.pattern, real.flags, real.groups)
    assert lazy.groupindex == real.groupindex


def test_every_module_level_lazy_pattern_compiles() -> None:
    """A typo in a lazy pattern would only show when its path runs: compile them all here."""
    import ctxd.compaction.ledger.mustkeep
    import ctxd.compaction.reading.mining
    import ctxd.compaction.reading.shell
    import ctxd.context.cut_rules
    import ctxd.context.tokens
    import ctxd.context.truncate
    import ctxd.formats.injected
    import ctxd.formats.transcripts.codex
    import ctxd.service.facts

    modules = [
        ctxd.compaction.ledger.mustkeep,
        ctxd.compaction.reading.shell,
        ctxd.compaction.reading.mining,
        ctxd.context.cut_rules,
        ctxd.context.tokens,
        ctxd.context.truncate,
        ctxd.formats.injected,
        ctxd.formats.transcripts.codex,
        ctxd.service.facts,
    ]
    found = 0
    for module in modules:
        for name, value in vars(module).items():
            if type(value).__name__ == "_LazyPattern":
                assert isinstance(value.pattern, str), name
                value.search("")  # compiles it (re.error on a bad pattern)
                found += 1
    assert found >= 40
