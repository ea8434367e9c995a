"""A session file's first line: its header, read and checked before anything else."""

from __future__ import annotations

import os
from typing import Any

import attrs

from ctxd.errors import BadHeaderError
from ctxd.formats.codec import CURRENT_VERSION, decode_any
from ctxd.store.scan import Diagnostic

MAX_HEADER = 1 << 20
"""The longest header line read (1 MB; pi's are a few hundred bytes)."""


@attrs.frozen
class Header:
    fields: dict[str, Any]
    version: int
    end: int
    """Where the second line starts."""
    diagnostics: list[Diagnostic]
    """What a reader reports about it (a version newer than ctxd knows: the file is read-only)."""


def read_header(fd: int, path: str) -> Header:
    """Line 1 of ``fd``: a session header (type ``session``, an id, a positive version), or BadHeaderError."""
    first = b""
    pos = 0
    while b"\n" not in first and len(first) <= MAX_HEADER:
        chunk = os.pread(fd, 65536, pos)
        if not chunk:
            break
        first += chunk
        pos += len(chunk)
    nl = first.find(b"\n")
    if not first.strip():
        raise BadHeaderError("the file is empty: no session header", path=path, line=1)
    if nl < 0 and len(first) > MAX_HEADER:
        message = f"line 1 is longer than {MAX_HEADER >> 10} KB: not a session header; refusing the file"
        raise BadHeaderError(message, path=path, line=1)
    if nl < 0:
        raise BadHeaderError("the header line is incomplete (no newline yet)", path=path, line=1)
    try:
        header = decode_any(first[:nl])
    except Exception as exc:
        raise BadHeaderError(f"line 1 is not JSON ({exc}); refusing the file", path=path, line=1) from exc
    if not isinstance(header, dict) or header.get("type") != "session":
        raise BadHeaderError("line 1 is not a session header (type 'session'); refusing the file", path=path, line=1)
    if not isinstance(header.get("id"), str) or not header["id"]:
        raise BadHeaderError("the session header has no id; refusing the file", path=path, line=1)
    version = header.get("version", 1)
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise BadHeaderError(f"the header's version {version!r} is not a positive integer", path=path, line=1)
    diagnostics = []
    if version > CURRENT_VERSION:
        message = f"version {version} is newer than ctxd knows ({CURRENT_VERSION}); read-only"
        diagnostics.append(Diagnostic(path, 1, message, kind="version"))
    return Header(header, version, nl + 1, diagnostics)
