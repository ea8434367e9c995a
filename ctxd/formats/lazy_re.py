"""Regular expressions compiled when first used, not when their module is imported.

``ctxd hook`` is a new process per event and pays for every ``re.compile`` of every module it imports, while most
patterns (a summariser's, a shell parser's) serve paths a given event never takes. :func:`lazy_compile` returns an
object with the pattern's methods: the first attribute looked up compiles it once and binds the methods on the
object, so every later call costs what a compiled pattern's does. Use it for module-level patterns only; pass a
real pattern (``re.compile``) wherever a ``re.Pattern`` instance is checked or passed to ``re`` functions.
"""

from __future__ import annotations

import re
from typing import Any, cast

_BOUND = ("search", "match", "fullmatch", "finditer", "findall", "sub", "subn", "split", "pattern", "flags", "groups")


class _LazyPattern:
    def __init__(self, pattern: str, flags: int) -> None:
        self._args = (pattern, flags)

    def __getattr__(self, name: str) -> Any:  # only for names not bound yet: the first use
        compiled = re.compile(*self._args)
        for bound in _BOUND:
            setattr(self, bound, getattr(compiled, bound))
        return getattr(compiled, name)

    def __repr__(self) -> str:
        return f"lazy_compile({self._args[0]!r}, {self._args[1]!r})"


def lazy_compile(pattern: str, flags: int | re.RegexFlag = 0) -> re.Pattern[str]:
    """``re.compile(pattern, flags)``, done at the first use."""
    return cast("re.Pattern[str]", _LazyPattern(pattern, int(flags)))


__all__ = ["lazy_compile"]
