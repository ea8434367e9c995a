"""The agents' and editors' JSON settings files: keys ctxd sets, what changed, and putting a file back as it was.

A file is changed in place (:func:`ctxd.setup.jsonc.update`): only the members ctxd adds or removes change, the
rest keeps its bytes, its layout and, in a file its program reads as JSON with comments (``comments=True``: VS
Code's settings, opencode's config), its comments and trailing commas. The new text is read again before it is
written; a file that cannot be changed so is refused with a SetupError, and nothing is written.

Before setup first changes a settings file (itself or through the agent's own command), its bytes are kept in
the installation's record. ``--uninstall`` puts those bytes back when the file holds nothing else new: the
file as it is, less the keys setup added and the empty objects and lists the agent left behind, equals the
file from before. Otherwise (the user changed it since) only ctxd's keys are removed, and setup says so.
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Callable, Sequence
from typing import Any

from ctxd.setup import jsonc
from ctxd.setup.base import Record, SetupError
from ctxd.store.files import atomic_write

Path = Sequence[str]


def read_bytes(path: str) -> bytes | None:
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        return None


def _text(path: str, data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SetupError(f"{path} is not UTF-8 ({exc}); ctxd setup leaves it alone: edit it by hand") from None


def load(path: str, data: bytes | None = None, comments: bool = False) -> dict[str, Any]:
    """The JSON object in ``path`` ({} when it does not exist); a file that is not one raises SetupError.
    ``comments``: the file may hold comments and trailing commas (JSON with comments)."""
    data = read_bytes(path) if data is None else data
    if data is None or not data.strip():
        return {}
    try:
        value = jsonc.loads(_text(path, data)) if comments else json.loads(data)
    except ValueError as exc:
        kind = "JSON with comments" if comments else "plain JSON"
        raise SetupError(f"{path} is not {kind} ({exc}); ctxd setup leaves it alone: edit it by hand") from None
    if not isinstance(value, dict):
        raise SetupError(f"{path} does not hold a JSON object; ctxd setup leaves it alone")
    return value


def changed_text(path: str, value: dict[str, Any], indent: int = 2, comments: bool = False) -> bytes:
    """``path``'s bytes changed in place to hold ``value`` (see the module's docstring), read again; SetupError
    when that cannot be done safely."""
    data = read_bytes(path) or b""
    try:
        text = jsonc.update(_text(path, data), value, " " * indent)
        if not comments and json.loads(text) != value:
            raise jsonc.JsoncError("the change would not read back as plain JSON")
    except ValueError as exc:
        raise SetupError(f"{path}: ctxd setup cannot change it safely ({exc}); it is left as it was") from None
    return text.encode("utf-8")


def save(path: str, value: dict[str, Any], indent: int = 2, comments: bool = False) -> None:
    """Write ``value`` into ``path`` in place (:func:`changed_text`), keeping its mode."""
    data = changed_text(path, value, indent, comments)
    try:
        mode = os.stat(path).st_mode & 0o777
    except FileNotFoundError:
        mode = 0o600
    os.makedirs(os.path.dirname(path), exist_ok=True)
    atomic_write(path, data, mode=mode)


def remember(record: Record, path: str) -> None:
    """Keep ``path``'s bytes from before ctxd first changed it (once: a second setup keeps the first)."""
    if path not in record.settings_before:
        data = read_bytes(path)
        record.settings_before[path] = None if data is None else base64.b64encode(data).decode()


def get(value: Any, path: Path) -> Any:
    for key in path:
        if not isinstance(value, dict) or key not in value:
            return None
        value = value[key]
    return value


def put(value: dict[str, Any], path: Path, item: Any) -> None:
    for key in path[:-1]:
        child = value.get(key)
        if not isinstance(child, dict):
            child = value[key] = {}
        value = child
    value[path[-1]] = item


def delete(value: dict[str, Any], path: Path) -> bool:
    parent = get(value, path[:-1]) if len(path) > 1 else value
    if isinstance(parent, dict) and path[-1] in parent:
        del parent[path[-1]]
        return True
    return False


def changes(before: Any, after: Any, prefix: str = "", depth: int = 2) -> list[str]:
    """The keys that differ, dotted down to ``depth`` levels (``enabledPlugins."ctxd@ctxd-setup" added``)."""
    if before == after:
        return []
    if depth > 0 and before is None and isinstance(after, dict):
        before = {}  # a new object: say which keys it brought
    elif depth > 0 and after is None and isinstance(before, dict):
        after = {}
    if not (isinstance(before, dict) and isinstance(after, dict)) or depth == 0:
        return [
            f"{prefix or '(whole file)'} {'added' if before is None else 'removed' if after is None else 'changed'}"
        ]
    out = []
    for key in [*before, *(k for k in after if k not in before)]:
        name = key if all(c.isalnum() or c in "_-" for c in key) else json.dumps(key)
        out += changes(before.get(key), after.get(key), f"{prefix}.{name}" if prefix else name, depth - 1)
    return out


def _prune(value: Any, like: Any) -> Any:
    """``value`` without the empty objects and lists that ``like`` does not have."""
    if not isinstance(value, dict):
        return value
    out = {}
    for key, item in value.items():
        other = like.get(key) if isinstance(like, dict) else None
        item = _prune(item, other)
        if item in ({}, []) and not (isinstance(like, dict) and key in like):
            continue
        out[key] = item
    return out


def bytes_before(record: Record, path: str) -> bytes | None:
    """``path``'s bytes from before setup first changed it (None: it did not exist, or setup never changed it)."""
    encoded = record.settings_before.get(path)
    return None if encoded is None else base64.b64decode(encoded)


def restore(
    record: Record,
    path: str,
    ours: Sequence[Path] = (),
    dry_run: bool = False,
    strip: Callable[[dict[str, Any]], None] | None = None,
    comments: bool = False,
    indent: int = 2,
) -> str | None:
    """Put ``path`` back as it was before setup (see the module's docstring); a line saying what was done, or
    None when the file is already as it was. ``strip`` takes out what ctxd added that is not a key of its own
    (items in the agent's lists)."""
    if path not in record.settings_before:
        return None
    before = bytes_before(record, path)
    now = read_bytes(path)
    if now == before:
        return None
    verb = "would " if dry_run else ""
    try:
        current = load(path, now, comments)
    except SetupError:
        kind = "JSON with comments" if comments else "plain JSON"
        return f"{verb}leave {path} alone: it is no longer {kind} (ctxd's keys: {_names(ours)})"
    previous = load(path, before, comments) if before is not None else {}
    if strip is not None:
        strip(current)
    for key in ours:  # ctxd's keys go back to what they were (or away)
        if get(previous, key) is None:
            delete(current, key)
        else:
            put(current, key, get(previous, key))
    if _prune(current, previous) == previous:
        if not dry_run:
            if before is None:
                os.unlink(path)
            else:
                atomic_write(path, before, mode=os.stat(path).st_mode & 0o777)
        if before is None:
            return f"{verb}remove {path} (it did not exist before setup)"
        return f"{verb}restore {path} byte for byte as it was before setup"
    if dry_run:
        changed_text(path, _prune(current, previous), indent, comments)  # refuses now what it would refuse then
    else:
        save(path, _prune(current, previous), indent, comments)
    return (
        f"{verb}remove ctxd's keys from {path} ({_names(ours) or 'none left'}); the rest changed since setup and stays"
    )


def _names(paths: Sequence[Path]) -> str:
    return ", ".join(".".join(p) for p in paths)
