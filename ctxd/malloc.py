"""glibc's malloc in a process that runs for weeks (the daemon, ``ctxd mcp``).

glibc gives each thread that allocates an arena of its own (up to eight per core), and an arena keeps
the pages of what its thread once held: a daemon whose worker threads each once read a big session
held hundreds of MB freed long ago. Two arenas (as many long-running servers set with
``MALLOC_ARENA_MAX=2``) and giving freed pages back after sessions close keep the resident set near
what is in use (``make bench-soak``). Elsewhere (macOS, musl) both are no-ops.
"""

from __future__ import annotations

import ctypes
import functools
import os
from typing import Any

M_ARENA_MAX = -8
"""glibc's ``mallopt`` parameter: the most arenas."""
ARENAS = 2


@functools.cache
def _glibc() -> Any | None:
    """The C library when it is glibc (it has ``malloc_trim``), else None."""
    try:
        libc = ctypes.CDLL(None)
        libc.malloc_trim.argtypes = [ctypes.c_size_t]
        libc.mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    except (OSError, AttributeError):
        return None
    return libc


def limit_arenas() -> None:
    """At the start of a long-running process, before its threads: two arenas (unless the environment
    sets ``MALLOC_ARENA_MAX``, which glibc reads itself)."""
    libc = _glibc()
    if libc is not None and "MALLOC_ARENA_MAX" not in os.environ:
        libc.mallopt(M_ARENA_MAX, ARENAS)


def release_freed() -> None:
    """Give the pages malloc holds free back to the system (``malloc_trim``)."""
    libc = _glibc()
    if libc is not None:
        libc.malloc_trim(0)
