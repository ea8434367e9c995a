"""Tiny factories of broken session lines and files (each returns raw bytes or a written path)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from helpers.factories import header


def line(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj).encode() + b"\n"


def nested(obj: dict[str, Any], levels: int, where: str = "details") -> bytes:
    """``obj``'s line with ``obj[where]`` (or ``obj["message"][where]``) set to arrays nested
    ``levels`` deep: json.dumps itself cannot write that."""
    deep = b"[" * levels + b"]" * levels
    inner = dict(obj)
    if "message" in obj:
        message = json.dumps({**obj["message"], where: "@@"}).encode().replace(b'"@@"', deep)
        inner["message"] = "@@M"
        return json.dumps(inner).encode().replace(b'"@@M"', message) + b"\n"
    inner[where] = "@@"
    return json.dumps(inner).encode().replace(b'"@@"', deep) + b"\n"


def non_utf8(obj: dict[str, Any], text: str = "caf") -> bytes:
    """``obj``'s line with a byte that is not UTF-8 inside a string of its message."""
    raw = line(obj)
    marker = json.dumps(text).encode()
    assert marker in raw, (marker, raw)
    return raw.replace(marker, marker[:-1] + b"\xff\xfe" + b'"', 1)


def write_raw(path: Path, *lines: bytes, hdr: dict[str, Any] | None = None) -> str:
    path.write_bytes(line(hdr or header()) + b"".join(lines))
    return str(path)
