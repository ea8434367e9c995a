"""TOML settings files (Codex's config.toml), changed in place with tomlkit.

tomlkit keeps what it does not change as it was: comments, blank lines, the order of tables, quoting, inline
tables (``mcp_servers = { other = {...} }``) and dotted keys (``mcp_servers.other.command = ...``). A key ctxd
adds goes where TOML allows it: into an inline table as an inline table, else as a table of its own
(``[mcp_servers.ctxd]``), never beside a table that already defines it. Every result is read again with the
standard library's TOML reader (what ``tomllib`` reads, Codex's reader reads alike) and must hold exactly the
value intended, else SetupError and nothing is written.
"""

from __future__ import annotations

import copy
import tomllib
from collections.abc import Sequence
from typing import Any

import tomlkit
from tomlkit.container import OutOfOrderTableProxy
from tomlkit.items import InlineTable, Table
from tomlkit.toml_document import TOMLDocument

from ctxd.setup.base import SetupError

Path = Sequence[str]


def parse(path: str, text: str) -> tuple[TOMLDocument, dict[str, Any]]:
    """(the document, to change; its value); SetupError if ``text`` is not valid TOML."""
    try:
        value = tomllib.loads(text)
        doc = tomlkit.parse(text)
    except (tomllib.TOMLDecodeError, tomlkit.exceptions.TOMLKitError) as exc:
        raise SetupError(f"{path} is not valid TOML ({exc}); ctxd setup leaves it alone") from None
    return doc, value


def get(value: Any, path: Path) -> Any:
    for key in path:
        if not isinstance(value, dict) or key not in value:
            return None
        value = value[key]
    return value


def _tables(file: str, doc: Any, path: Path, create: bool) -> Any:
    """The table holding ``path``'s last key (made, as tables of their own or inline as their parent is, when
    ``create``), or None."""
    container = doc
    for depth, key in enumerate(path[:-1]):
        child = container.get(key)
        if child is None:
            if not create:
                return None
            container[key] = tomlkit.inline_table() if isinstance(container, InlineTable) else tomlkit.table(True)
            child = container[key]
        if not isinstance(child, Table | InlineTable | OutOfOrderTableProxy):  # the proxy: a table written in parts
            where = ".".join(path[: depth + 1])
            raise SetupError(f"{file}: `{where}` is not a table; ctxd setup leaves the file alone: edit it by hand")
        container = child
    return container


def put(file: str, doc: TOMLDocument, path: Path, value: Any) -> None:
    """Set ``path`` (absent) to ``value``; a table value is written as a table, inline inside an inline one."""
    container = _tables(file, doc, path, create=True)
    if isinstance(value, dict):
        # Inline inside an inline table, and beside dotted keys written at the top (tomlkit would put a table of
        # its own between two of those lines).
        inline = isinstance(container, InlineTable | OutOfOrderTableProxy)
        item: Any = tomlkit.inline_table() if inline else tomlkit.table()
        item.update(value)
        value = item
    container[path[-1]] = value


def delete(file: str, doc: TOMLDocument, path: Path, keep: Any) -> bool:
    """Take ``path`` out, and the tables it leaves empty that ``keep`` (the value from before) lacks."""
    container = _tables(file, doc, path, create=False)
    if container is None or path[-1] not in container:
        return False
    del container[path[-1]]
    for depth in range(len(path) - 1, 0, -1):
        parent = _tables(file, doc, path[:depth], create=False)
        table = parent.get(path[depth - 1]) if parent is not None else None
        if table is None or len(table) or get(keep, path[:depth]) is not None:
            break
        del parent[path[depth - 1]]
    return True


def apply(value: dict[str, Any], changes: Sequence[tuple[Path, Any]]) -> dict[str, Any]:
    """A copy of ``value`` with each ``(path, new value)`` set: what the document must read as afterwards."""
    out = copy.deepcopy(value)
    for path, item in changes:
        target = out
        for key in path[:-1]:
            target = target.setdefault(key, {})
        target[path[-1]] = copy.deepcopy(item)
    return out


def dumps(file: str, doc: TOMLDocument, expected: dict[str, Any]) -> str:
    """The document's text, read again: SetupError unless it is valid TOML holding ``expected``."""
    text = tomlkit.dumps(doc)
    try:
        again = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SetupError(f"{file}: ctxd setup cannot change it safely (the result would not be TOML: {exc})") from None
    if again != expected:
        raise SetupError(f"{file}: ctxd setup cannot change it safely (the result would not read as intended)")
    return text
