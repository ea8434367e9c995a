"""The TypeScript client's protocol (clients/typescript/src/protocol.ts) against the Python protocol, field by
field: every attrs class of ``ctxd.service.protocol`` (history/search's and history/expand's included) has a
TypeScript interface of the same name with the same wire fields, each of the same type, optional exactly where
the Python side lets it be. A field added on one side and not the other fails here.

Params are what a client sends: a field with a default may be left out (``?`` in TypeScript), a field without
one may not. Payloads are what the daemon sends: every field is written, so TypeScript may mark a field optional
(an older daemon may lack it) only where Python gives it a default.
"""

from __future__ import annotations

import re
import types
import typing
from pathlib import Path
from typing import Any

import attrs

from ctxd.service import history_types, protocol

PROTOCOL_TS = Path(__file__).resolve().parents[2] / "clients" / "typescript" / "src" / "protocol.ts"


def python_classes() -> dict[str, type]:
    found = {}
    for module in (protocol, history_types):
        for name, value in vars(module).items():
            if isinstance(value, type) and attrs.has(value) and value.__module__ == module.__name__:
                found[name] = value
    return found


# --- protocol.ts, read as far as its interfaces go ------------------------------------------------------------


def _without_comments(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return re.sub(r"(^|[;{,])\s*//[^\n]*", r"\1", text, flags=re.M)


def _split_top(text: str, sep: str) -> list[str]:
    """``text`` split at ``sep`` where no bracket is open."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "{([<":
            depth += 1
        elif ch in "})]>":
            depth -= 1
        elif ch == sep and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def _body(text: str, start: int) -> str:
    """The text between the brace at ``start`` and the one closing it."""
    depth = 0
    for i in range(start, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return text[start + 1 : i]
    raise AssertionError(f"protocol.ts: unclosed brace at {start}")


class Member(typing.NamedTuple):
    optional: bool
    type: str


def typescript_interfaces(path: Path) -> dict[str, dict[str, Member]]:
    text = _without_comments(path.read_text(encoding="utf-8"))
    found: dict[str, dict[str, Member]] = {}
    bases: dict[str, list[str]] = {}
    for match in re.finditer(r"export interface (\w+)(?:\s+extends\s+([\w\s,]+?))?\s*\{", text):
        members = {}
        for part in _split_top(_body(text, match.end() - 1), ";"):
            name, colon, kind = part.partition(":")
            assert colon, f"protocol.ts: {match.group(1)}: cannot read member {part!r}"
            members[name.strip().rstrip("?")] = Member(name.strip().endswith("?"), " ".join(kind.split()))
        found[match.group(1)] = members
        bases[match.group(1)] = [b.strip() for b in (match.group(2) or "").split(",") if b.strip()]
    for name in found:  # inherited members (a base's first, then its own)
        for base in bases[name]:
            found[name] = {**found[base], **found[name]}
    aliases = dict(re.findall(r"export type (\w+) = ([^;]+);", text))
    for members in found.values():  # a type alias of literals or interfaces stands for what it names
        for field, member in members.items():
            if member.type in aliases and "typeof" not in aliases[member.type]:
                members[field] = member._replace(type=" ".join(aliases[member.type].split()))
    return found


# --- types, written the TypeScript way ------------------------------------------------------------------------


def _ts_union(text: str) -> frozenset[str]:
    return frozenset(_normal(t) for t in _split_top(text, "|"))


def _normal(text: str) -> str:
    text = text.strip()
    if text.startswith("(") and text.endswith(")"):
        return "(" + "|".join(sorted(_ts_union(text[1:-1]))) + ")"
    if text.endswith("[]"):
        return _normal(text[:-2]) + "[]"
    if text.startswith("{"):
        fields = [f"{n.strip()}:{_normal(t)}" for n, _, t in (m.partition(":") for m in _split_top(text[1:-1], ";"))]
        return "{" + ";".join(fields) + "}"
    return text.replace("'", '"').replace(" ", "")


def ts_type(kind: Any) -> frozenset[str]:
    """A Python annotation as the set of TypeScript types its union allows."""
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin in (typing.Union, types.UnionType):
        return frozenset().union(*(ts_type(a) for a in args))
    if origin is typing.Literal:
        return frozenset(f'"{a}"' if isinstance(a, str) else str(a).lower() for a in args)
    if origin is list:
        (item,) = args
        inner = ts_type(item)
        return frozenset({(next(iter(inner)) if len(inner) == 1 else "(" + "|".join(sorted(inner)) + ")") + "[]"})
    if origin is dict:
        return frozenset({"Record<string,unknown>"})
    simple = {str: "string", int: "number", float: "number", bool: "boolean", type(None): "null", Any: "unknown"}
    if kind in simple:
        return frozenset({simple[kind]})
    if isinstance(kind, type) and attrs.has(kind):
        return frozenset({kind.__name__})
    raise AssertionError(f"no TypeScript for {kind!r}")


WIDER = {
    # A list of AgentMessages or entries: TypeScript's client holds them as plain objects of any shape.
    ("unknown[]", "Record<string,unknown>[]"),
}
NARROWER = {
    # Where protocol.ts says more than the Python annotation: the keys a free-form object holds, the strings a
    # str field takes. (class, field): why.
    ("BranchSummarizeParams", "settings"): "compaction settings over the daemon's, read by CompactionSettings",
    ("CompactSummarizeParams", "settings"): "compaction settings over the daemon's, read by CompactionSettings",
    ("HistoryExpandResult", "kind"): "the kinds ctxd.history.expand answers with",
}


def same_type(python: frozenset[str], typescript: frozenset[str]) -> bool:
    return python == typescript or (len(python) == len(typescript) == 1 and (*typescript, *python) in WIDER)


def differences(path: Path) -> list[str]:
    """What differs between the interfaces in ``path`` and the Python protocol, one line each."""
    interfaces = typescript_interfaces(path)
    problems = []
    for name, cls in sorted(python_classes().items()):
        if name not in interfaces:
            problems.append(f"{name}: no `export interface {name}` in protocol.ts")
            continue
        theirs = interfaces[name]
        hints = typing.get_type_hints(cls)
        fields = {f.name: f for f in attrs.fields(cls)}
        for field in [*fields, *(f for f in theirs if f not in fields)]:
            if field not in theirs:
                problems.append(f"{name}.{field}: in Python, not in protocol.ts")
                continue
            if field not in fields:
                problems.append(f"{name}.{field}: in protocol.ts, not in Python")
                continue
            defaulted = fields[field].default is not attrs.NOTHING
            member = theirs[field]
            if name.endswith("Params") and member.optional != defaulted:
                optional = "optional" if member.optional else "required"
                problems.append(
                    f"{name}.{field}: {optional} in protocol.ts, {'not ' * (not defaulted)}defaulted in Python"
                )
            elif member.optional and not defaulted:
                problems.append(f"{name}.{field}: optional in protocol.ts, always sent by the daemon")
            python, typescript = ts_type(hints[field]), _ts_union(member.type)
            if not same_type(python, typescript) and (name, field) not in NARROWER:
                problems.append(f"{name}.{field}: {member.type} in protocol.ts, {' | '.join(sorted(python))} in Python")
    return problems


def test_protocol_ts_mirrors_every_python_class_field_by_field() -> None:
    problems = differences(PROTOCOL_TS)
    assert not problems, "protocol.ts and ctxd.service.protocol differ:\n" + "\n".join(problems)


def test_a_field_on_one_side_only_is_found(tmp_path: Path) -> None:
    """The comparison itself: a field added to protocol.ts alone, or missing from it, is reported."""
    text = PROTOCOL_TS.read_text(encoding="utf-8")
    edited = text.replace("export interface DidDelete {", "export interface DidDelete {\n  extra?: string;", 1)
    edited = re.sub(r"\n  sinceRevision\?: [^;]*;", "", edited, count=1)
    (tmp_path / "protocol.ts").write_text(edited, encoding="utf-8")
    problems = differences(tmp_path / "protocol.ts")
    assert "DidDelete.extra: in protocol.ts, not in Python" in problems
    assert "ContextBuildParams.sinceRevision: in Python, not in protocol.ts" in problems
