"""The configuration's wire: attrs settings classes read from camelCase JSON and written back, through one cattrs
converter.

A settings class (:class:`ctxd.service.config.Config` and the classes it holds) is a plain attrs class with
snake_case fields; on the wire each field is named in camelCase (``reserve_tokens``: ``reserveTokens``). Its
validators are :class:`Check` objects, which say in words what a field takes; a field may also have a converter
that tidies a value (a path made absolute, a name stripped). :func:`read` structures JSON from one source (a
config file, ``initializationOptions``, an environment variable) over a base: cattrs' ``ClassValidationError``
gives the key path of every value it refused and of every unknown key, each is reported as a :class:`Problem`
naming the source and the path, and the base's value stays. An invalid option never stops the daemon.

cattrs is imported on first use: the cold paths that make settings in Python (``ctxd hook``, ``ctxd context``)
never load it.
"""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

import attrs

if TYPE_CHECKING:
    import cattrs

T = TypeVar("T")
SECRET = "secret"
"""A field's metadata key: its value is never shown in a problem (an API key, a DSN that may hold a password)."""


def wire_name(name: str) -> str:
    """A field's key on the wire: ``reserve_tokens`` -> ``reserveTokens``."""
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def show(value: Any, limit: int = 80) -> str:
    """``value`` as JSON (as the user wrote it), cut to ``limit`` characters: a problem never echoes megabytes."""
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


class InvalidOption(ValueError):
    """A value a field's :class:`Check` refused."""


@attrs.frozen
class Check:
    """An attrs validator that says what it takes: ``expected`` ("a positive integer") is the problem's words."""

    expected: str
    test: Callable[[Any], bool]

    def __call__(self, instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
        try:
            ok = self.test(value)
        except TypeError:  # a value of another type, given in Python
            ok = False
        if not ok:
            raise InvalidOption(f"{attribute.name}: expected {self.expected}, got {show(value)}")

    def or_null(self) -> Check:
        return Check(f"{self.expected} or null", lambda value: value is None or self.test(value))


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


POSITIVE_INT = Check("a positive integer", lambda v: _number(v) and v > 0)
POSITIVE = Check("a positive number", lambda v: _number(v) and v > 0)
COUNT = Check("an integer, 0 or more", lambda v: _number(v) and v >= 0)
NON_NEGATIVE = Check("a number, 0 or more", lambda v: _number(v) and v >= 0)
SHARE = Check("a number above 0, at most 1", lambda v: _number(v) and 0 < v <= 1)
NON_EMPTY = Check("a non-empty string", lambda v: isinstance(v, str) and v != "")
PATHS = Check("a list of paths", lambda v: isinstance(v, list) and all(isinstance(p, str) and p for p in v))


def one_of(*values: str) -> Check:
    return Check(f"{', '.join(values[:-1])} or {values[-1]}", lambda v: v in values)


_TYPE_WORDS: dict[Any, str] = {
    bool: "true or false",
    int: "an integer",
    float: "a number",
    str: "a string",
    str | None: "a string or null",
    list[str]: "a list of strings",
}


def expected(field: attrs.Attribute[Any]) -> str:
    """What ``field`` takes, in words: its check's, else its type's."""
    if isinstance(field.validator, Check):
        return field.validator.expected
    if isinstance(field.type, type) and attrs.has(field.type):
        return "an object"
    return _TYPE_WORDS.get(field.type, "a value of another type")


@attrs.frozen
class Problem:
    """An option not taken: where it came from, its key path, and why."""

    source: str
    """The file's path, ``initializationOptions``, or the environment variable."""
    path: str
    """The key path on the wire (``compaction.reserveTokens``); "" for the whole object."""
    text: str

    def __str__(self) -> str:
        return ": ".join(part for part in (self.source, self.path, self.text) if part)


def prepare(cls: type[Any]) -> None:
    """Make the converter's functions for ``cls`` and its fields' types now (some 20 ms: a daemon does it before
    ``initialize`` comes)."""
    converter = _converter()
    converter.get_structure_hook(cls)
    converter.get_unstructure_hook(cls)
    for field in attrs.fields(attrs.resolve_types(cls)):
        converter.get_structure_hook(field.type)
        converter.get_unstructure_hook(field.type)
        if isinstance(field.type, type) and attrs.has(field.type):
            prepare(field.type)


def unstructure(value: Any) -> Any:
    """A settings object as its wire JSON (camelCase keys, every field)."""
    return _converter().unstructure(value)


def read(cls: type[T], data: Any, *, source: str, base: T | None = None) -> tuple[T, list[Problem]]:
    """``data`` (the wire's JSON) over ``base`` (default: ``cls()``): a new object, and what was not taken.

    Objects merge key by key into the base's; any other value replaces the base's. A refused value or an unknown
    key is reported and dropped, so the base's value stays."""
    import cattrs

    fallback = unstructure(base if base is not None else cls())
    if not isinstance(data, dict):
        problem = Problem(source, "", f"expected an object, got {show(data)}; ignored")
        return _converter().structure(fallback, cls), [problem]
    given = copy.deepcopy(data)
    problems: list[Problem] = []
    while True:
        try:
            return _converter().structure(_merged(fallback, given), cls), problems
        except cattrs.ClassValidationError as exc:
            refused = list(_refused(exc, ()))
        progress = False
        for path, unknown in refused:
            where = ".".join(path)
            if unknown:
                problems.append(Problem(source, where, "unknown option, ignored"))
            else:
                problems.append(Problem(source, where, _refusal(cls, path, _at(given, path), _at(fallback, path))))
            progress = _drop(given, path) or progress
        if not progress:  # nothing of ``data`` to blame: keep the base as it was
            return (copy.deepcopy(base) if base is not None else cls()), problems


def _refusal(cls: type[Any], path: tuple[str, ...], value: Any, kept: Any) -> str:
    field = _field_at(cls, path)
    if field is None:
        return f"invalid value {show(value)}; ignored"
    hidden = field.metadata.get(SECRET) or (isinstance(field.type, type) and attrs.has(field.type))
    return f"expected {expected(field)}, got {show(value)}; " + ("ignored" if hidden else f"using {show(kept)}")


def _field_at(cls: type[Any], path: tuple[str, ...]) -> attrs.Attribute[Any] | None:
    field = None
    for key in path:
        if not (isinstance(cls, type) and attrs.has(cls)):
            return None
        field = next((f for f in attrs.fields(cls) if wire_name(f.name) == key), None)
        if field is None:
            return None
        cls = field.type
    return field


def _refused(exc: cattrs.ClassValidationError, path: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], bool]]:
    """(key path, unknown) for each value cattrs refused and each unknown key, in the fields' order."""
    from cattrs.errors import AttributeValidationNote, ClassValidationError, ForbiddenExtraKeysError

    for sub in exc.exceptions:
        if isinstance(sub, ForbiddenExtraKeysError):
            yield from (((*path, key), True) for key in sorted(sub.extra_fields))
            continue
        notes = [n for n in getattr(sub, "__notes__", []) if isinstance(n, AttributeValidationNote)]
        if not notes:  # the class refused the whole object
            yield path, False
        elif isinstance(sub, ClassValidationError):
            yield from _refused(sub, (*path, wire_name(notes[-1].name)))
        else:
            yield (*path, wire_name(notes[-1].name)), False


def _merged(base: Any, over: Any) -> Any:
    if isinstance(base, dict) and isinstance(over, dict):
        return {**base, **{key: _merged(base.get(key), value) for key, value in over.items()}}
    return over


def _at(data: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        data = data.get(key) if isinstance(data, dict) else None
    return data


def _drop(data: Any, path: tuple[str, ...]) -> bool:
    """Remove ``path`` from ``data`` (or the whole object, for the empty path); whether anything was removed."""
    if not path:
        had = bool(data)
        data.clear()
        return had
    *parents, last = path
    for key in parents:
        data = data.get(key) if isinstance(data, dict) else None
    if isinstance(data, dict) and last in data:
        del data[last]
        return True
    return False


# --- the converter -------------------------------------------------------------------------------------------


def _strict(kind: type[Any], take: Callable[[Any], bool], make: Callable[[Any], Any]) -> Callable[[Any, Any], Any]:
    """A hook that refuses what is not already ``kind`` (cattrs would turn "5" into 5 and "abc" into a list)."""

    def hook(value: Any, _: Any) -> Any:
        if not take(value):
            raise TypeError(f"expected {_TYPE_WORDS[kind]}, got {show(value)}")
        return make(value)

    return hook


def _field_hook(converter: cattrs.Converter, field: attrs.Attribute[Any]) -> Callable[[Any, Any], Any]:
    """One field's value: tidied by its converter, structured by its type, checked by its validator, so that every
    refused field is named by cattrs in one pass (attrs would stop at a class's first failing validator)."""

    def hook(value: Any, kind: Any) -> Any:
        if callable(field.converter):
            value = field.converter(value)
        out = converter.structure(value, kind)
        if field.validator is not None:
            field.validator(None, field, out)
        return out

    return hook


@functools.cache
def _converter() -> cattrs.Converter:
    import cattrs
    from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override

    converter = cattrs.Converter(forbid_extra_keys=True, detailed_validation=True)
    converter.register_structure_hook(bool, _strict(bool, lambda v: isinstance(v, bool), bool))
    converter.register_structure_hook(str, _strict(str, lambda v: isinstance(v, str), str))
    converter.register_structure_hook(float, _strict(float, _number, float))
    integral = _strict(int, lambda v: _number(v) and float(v).is_integer(), int)
    converter.register_structure_hook(int, integral)
    strings = _strict(list[str], lambda v: isinstance(v, list) and all(isinstance(s, str) for s in v), list)
    converter.register_structure_hook_func(lambda t: t == list[str], strings)

    def structure_fn(cls: type[Any]) -> Any:
        fields = attrs.fields(attrs.resolve_types(cls))
        renamed: dict[str, Any] = {
            f.name: override(rename=wire_name(f.name), struct_hook=_field_hook(converter, f)) for f in fields
        }
        return make_dict_structure_fn(cls, converter, **renamed)

    def unstructure_fn(cls: type[Any]) -> Any:
        fields = attrs.fields(attrs.resolve_types(cls))
        renamed: dict[str, Any] = {f.name: override(rename=wire_name(f.name)) for f in fields}
        return make_dict_unstructure_fn(cls, converter, **renamed)

    converter.register_structure_hook_factory(attrs.has, structure_fn)
    converter.register_unstructure_hook_factory(attrs.has, unstructure_fn)
    return converter
