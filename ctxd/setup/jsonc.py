"""JSON with comments (VS Code's settings.json, opencode's config), read and changed in place.

:func:`loads` reads such a file as VS Code does: ``//`` and ``/* */`` comments and trailing commas allowed, and
nothing else beyond JSON (single quotes, unquoted keys, hex numbers or NaN, which JSON5 allows, are refused).
:func:`update` changes a file's text so that its value becomes the one asked for, touching only what differs:
a member is added after the object's last one (with its indentation, its comma style, a comment trailing the
line above kept on that line), a member or an item is removed with its own comma, a value is replaced where it
stands; every comment, blank line and trailing comma elsewhere stays. The result is read again and must hold
exactly the value asked for, or :class:`JsoncError` is raised and nothing should be written.

The text is parsed by json-five (``json5``, from PyPI), whose model keeps each value's surrounding whitespace
and comments so that it writes back the same bytes; the edits work on that model.
"""

from __future__ import annotations

import json
import re
from typing import Any

from json5.dumper import ModelDumper
from json5.dumper import dumps as _dump_model
from json5.loader import ModelLoader
from json5.loader import loads as _load_model
from json5.model import Comment, JSONArray, JSONObject, LineComment, walk
from json5.utils import JSON5DecodeError

__all__ = ["JsoncError", "loads", "update"]

Wsc = list[Any]  # whitespace strings and Comment nodes, as json-five keeps them around a value


class JsoncError(ValueError):
    """The text is not JSON with comments, or a change cannot be made so that it reads back as asked."""


def _model(text: str) -> Any:
    try:
        model = _load_model(text, loader=ModelLoader())
    except (JSON5DecodeError, RecursionError) as exc:
        first = str(exc).strip().splitlines()
        raise JsoncError(first[-1].strip() if len(first) == 1 else first[2].strip() if len(first) > 2 else "") from None
    return model


def _written(node: Any) -> str:
    """A model's (or one node's) text, its comments and whitespace as they are."""
    dumper: Any = ModelDumper()  # json-five's annotations name a base class its model dumper does not derive from
    return str(_dump_model(node, dumper=dumper))


def _plain(model: Any) -> str:
    """The model's text without its comments and trailing commas (it is changed in place)."""
    for node in walk(model):
        for name in ("wsc_before", "wsc_after", "leading_wsc"):
            wsc = getattr(node, name, None)
            if wsc:
                setattr(node, name, [" " if isinstance(w, Comment) else w for w in wsc])
        if isinstance(node, JSONObject | JSONArray):
            node.trailing_comma = None
    return _written(model)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def loads(text: str) -> Any:
    """The value of ``text``, JSON with comments and trailing commas; JsoncError if it is not that."""
    plain = _plain(_model(text))
    try:
        return json.loads(plain, parse_constant=_no_constant)
    except ValueError as exc:
        raise JsoncError(f"not JSON with comments: {exc} (JSON5's quotes, keys or numbers are not read here)") from None


def _same(a: Any, b: Any) -> bool:
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


class _Style:
    def __init__(self, text: str, indent: str) -> None:
        self.eol = "\r\n" if "\r\n" in text else "\n"
        found = re.search(r"\n([ \t]+)[^ \t\r\n]", text)
        self.unit = found.group(1) if found else indent

    def node(self, value: Any, depth: int, inline: bool) -> Any:
        """A new value node written at ``depth`` (its lines indented one unit per level)."""
        if inline:
            text = json.dumps(value, ensure_ascii=False, separators=(", ", ": "))
        else:
            text = json.dumps(value, ensure_ascii=False, indent=self.unit).replace("\n", self.eol + self.unit * depth)
        return _model(text).value


def _split(wsc: Wsc) -> tuple[Wsc, str]:
    """(the comments and whitespace before the last run of whitespace, that run)."""
    if wsc and isinstance(wsc[-1], str):
        return list(wsc[:-1]), wsc[-1]
    return list(wsc), ""


def _joined(body: Wsc, tail: str, eol: str) -> Wsc:
    """``body`` then ``tail``, a line comment at the end of body still ended by a newline."""
    if body and isinstance(body[-1], LineComment) and "\n" not in tail:
        tail = eol + tail
    return [*body, tail] if tail else body


def _indent_after(wsc: Wsc) -> str | None:
    """The indentation that whitespace ending ``wsc`` gives the next line, if it ends a line."""
    _, tail = _split(wsc)
    return tail.rsplit("\n", 1)[1] if "\n" in tail else None


class _Editor:
    def __init__(self, style: _Style) -> None:
        self.style = style

    def value(self, node: Any, current: Any, wanted: Any, depth: int) -> Any:
        if _same(current, wanted):
            return node
        if isinstance(node, JSONObject) and isinstance(current, dict) and isinstance(wanted, dict):
            self.object(node, current, wanted, depth)
            return node
        lists = isinstance(node, JSONArray) and isinstance(current, list) and isinstance(wanted, list)
        if lists and self.array(node, current, wanted, depth):
            return node
        new = self.style.node(wanted, depth, inline=not self._multiline(node))
        new.wsc_before, new.wsc_after = node.wsc_before, node.wsc_after
        return new

    def _multiline(self, node: Any) -> bool:
        return "\n" in _written(node).strip()

    # --- objects -------------------------------------------------------------------------------------------

    def object(self, node: Any, current: dict[str, Any], wanted: dict[str, Any], depth: int) -> None:
        names = [json.loads(k.raw_value) for k in node.keys]
        for name in current:
            if name not in wanted:
                self._check_once(names, name)
                index = names.index(name)
                self._remove(node, index, node.keys)
                del names[index]
        for name, value in current.items():
            if name in wanted and not _same(value, wanted[name]):
                self._check_once(names, name)
                index = names.index(name)
                node.values[index] = self.value(node.values[index], value, wanted[name], depth + 1)
        for name, value in wanted.items():
            if name not in current:
                self._append(node, depth, value, key=name)

    def _check_once(self, names: list[str], name: str) -> None:
        if names.count(name) != 1:
            raise JsoncError(f"key {name!r} appears {names.count(name)} times in one object: it cannot be changed")

    # --- arrays --------------------------------------------------------------------------------------------

    def array(self, node: Any, current: list[Any], wanted: list[Any], depth: int) -> bool:
        """Items removed, or items added at the end, in place; False for any other change."""
        if len(wanted) > len(current) and all(_same(a, b) for a, b in zip(current, wanted, strict=False)):
            for value in wanted[len(current) :]:
                self._append(node, depth, value)
            return True
        gone, k = [], 0
        for i, item in enumerate(current):
            if k < len(wanted) and _same(item, wanted[k]):
                k += 1
            else:
                gone.append(i)
        if k != len(wanted):
            return False
        for i in reversed(gone):
            self._remove(node, i, node.values)
        return True

    # --- members and items, for both ------------------------------------------------------------------------

    def _remove(self, node: Any, i: int, heads: list[Any]) -> None:
        """Take out member or item ``i`` (``heads``: the nodes that open each one, keys or values) and its
        comma, keeping the comments that trail the line before it."""
        values, eol = node.values, self.style.eol
        last = len(values) - 1
        closing = node.trailing_comma.wsc_after if node.trailing_comma else values[last].wsc_after
        if last == 0:
            body, _ = _split(node.leading_wsc)
            node.leading_wsc = _joined(body, _split(closing)[1], eol)
            node.trailing_comma = None
        elif i < last:
            heads[i + 1].wsc_before = heads[i].wsc_before
        else:
            body, _ = _split(heads[i].wsc_before)
            if node.trailing_comma:
                node.trailing_comma.wsc_after = _joined(body, _split(closing)[1], eol)
            else:
                values[i - 1].wsc_after = _joined([*values[i - 1].wsc_after, *body], _split(closing)[1], eol)
        del values[i]
        if isinstance(node, JSONObject):
            del node.keys[i]

    def _append(self, node: Any, depth: int, value: Any, key: str | None = None) -> None:
        eol = self.style.eol
        values = node.values
        inline = bool(values) and not self._multiline(node)
        new = self.style.node(value, depth + 1, inline)
        head = new
        if key is not None:
            head = _model(json.dumps(key, ensure_ascii=False)).value
            new.wsc_before = [" "]
            spacing = [*node.keys[-1].wsc_after, *values[-1].wsc_before] if node.keys else [Comment("")]
            if not any(isinstance(w, Comment) for w in spacing):  # around the colon, as the last member has it
                head.wsc_after, new.wsc_before = list(node.keys[-1].wsc_after), list(values[-1].wsc_before)
        if not values:
            body, tail = _split(node.leading_wsc)
            node.leading_wsc = _joined(body, eol + self.style.unit * (depth + 1), eol)
            new.wsc_after = [eol + (tail.rsplit("\n", 1)[1] if "\n" in tail else self.style.unit * depth)]
        else:
            heads = node.keys if isinstance(node, JSONObject) else values
            indent = _indent_after(heads[-1].wsc_before) if len(heads) > 1 else _indent_after(node.leading_wsc)
            sep = " " if inline else eol + (indent if indent is not None else self.style.unit * (depth + 1))
            if node.trailing_comma:
                body, tail = _split(node.trailing_comma.wsc_after)
                node.trailing_comma.wsc_after = [tail] if tail else []
                new.wsc_after = []
            else:
                body, tail = _split(values[-1].wsc_after)
                values[-1].wsc_after = []
                new.wsc_after = [tail] if tail else []
            head.wsc_before = _joined(body, sep, eol)
        values.append(new)
        if isinstance(node, JSONObject):
            node.keys.append(head)


def update(text: str, wanted: Any, indent: str = "    ") -> str:
    """``text`` changed in place so that its value is ``wanted`` (see the module's docstring); ``indent`` is
    one level's indentation where the text shows none. JsoncError if the text is not JSON with comments or the
    result would not read back as ``wanted``."""
    if not text.strip():
        return json.dumps(wanted, ensure_ascii=False, indent=indent) + "\n"
    current = loads(text)
    model = _model(text)
    model.value = _Editor(_Style(text, indent)).value(model.value, current, wanted, 0)
    result = _written(model)
    try:
        again = loads(result)
    except JsoncError as exc:
        raise JsoncError(f"the change would not read back ({exc})") from None
    if not _same(again, wanted):
        raise JsoncError("the change would not read back as the value asked for")
    return result
