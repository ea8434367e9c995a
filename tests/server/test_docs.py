"""docs/protocol.md covers the whole protocol, and its recorded examples are well-formed JSON-RPC."""

from __future__ import annotations

import json
import re
import typing

import attrs

from ctxd import errors
from ctxd.compaction.settings import CompactionSettings
from ctxd.options import wire_name
from ctxd.service import protocol as p
from ctxd.service.config import Config, OpenSessions
from ctxd.service.methods import BY_NAME
from ctxd.team.settings import TeamSettings

from .harness import REPO

DOC = (REPO / "docs" / "protocol.md").read_text(encoding="utf-8")
BLOCK = re.compile(r"<!-- example: (.+?) -->\n```jsonc\n((?:(?!```)[^\n]*\n)*)```")


def examples() -> dict[str, list[tuple[str, dict]]]:  # type: ignore[type-arg]
    out = {}
    for name, body in BLOCK.findall(DOC):
        messages = []
        for chunk in re.split(r"^(?=--> |<-- )", body, flags=re.M):
            if chunk.strip():
                arrow, text = chunk[:3], chunk[4:]
                messages.append((arrow, json.loads(text)))
        out[name] = messages
    return out


def test_every_example_is_recorded_and_well_formed() -> None:
    found = examples()
    assert len(found) == DOC.count("<!-- example:")
    for name, messages in found.items():
        assert messages, f"example {name!r} is empty: run tests/server/protocol_examples.py --update"
        for arrow, message in messages:
            assert arrow in ("-->", "<--") and message["jsonrpc"] == "2.0", (name, message)


def test_every_method_and_notification_is_documented_with_an_example() -> None:
    sent = {m["method"] for ms in examples().values() for a, m in ms if a == "-->" and "method" in m}
    received = {m["method"] for ms in examples().values() for a, m in ms if a == "<--" and "method" in m}
    for method in p.METHODS:
        assert f"### {method}\n" in DOC, method
        assert method in sent, f"no recorded request for {method}"
    for note in p.NOTIFICATIONS:
        assert note in received, f"no recorded {note}"
        assert f"`{note}`" in DOC or f"### {note}" in DOC
    assert p.COMPACT_WILL_RUN in received and "$/progress" in received
    assert {"initialize", "initialized", "shutdown", "exit", "$/cancelRequest"} <= sent


def test_every_error_code_is_documented() -> None:
    codes = {cls.code for cls in vars(errors).values() if isinstance(cls, type) and issubclass(cls, errors.CtxdError)}
    codes |= {-32600, -32601, -32602, -32603}
    for code in codes:
        assert f"| {code} |" in DOC, code
    shown = {m["error"]["code"] for ms in examples().values() for _, m in ms if "error" in m}
    assert {-32600, -32601, -32602, -31001, -31002, -31003, -31011, -31020, -32800} <= shown


def test_every_configuration_key_is_documented() -> None:
    for cls in (Config, CompactionSettings, OpenSessions, TeamSettings):
        for field in attrs.fields(cls):
            assert f"`{wire_name(field.name)}`" in DOC, (cls.__name__, field.name)
    assert "`hooks.compactWillRun`" in DOC


def _row(method: str, field: str) -> str:
    """The row of ``field`` in the params table of ``method``'s section."""
    section = DOC.split(f"\n### {method}\n", 1)[1]
    section = re.split(r"\n##+ ", section, maxsplit=1)[0]
    [row] = [line for line in section.splitlines() if line.startswith(f"| `{field}` |")]
    return row


def test_the_values_a_param_takes_are_the_documented_ones() -> None:
    """Every param with a fixed set of values (a Literal) lists each of them, and says ``null`` exactly
    when null is accepted (``session/append``'s ``durability``: null, as absent, is the configured mode)."""
    # The methods whose params are documented in a table (the others in prose); their classes from the method table.
    params = {name: BY_NAME[name].params for name in (p.SESSION_APPEND, p.CONTEXT_BUILD, p.COMPACT_SUMMARIZE)}
    checked = 0
    for method, cls in params.items():
        hints = typing.get_type_hints(cls)
        for field in attrs.fields(cls):
            hint = hints[field.name]
            literal = [a for a in typing.get_args(hint) if typing.get_origin(a) is typing.Literal]
            if typing.get_origin(hint) is typing.Literal:
                literal = [hint]
            if not literal:
                continue
            row = _row(method, field.name)
            for value in typing.get_args(literal[0]):
                assert f'"{value}"' in row or f"`{value}`" in row, (method, field.name, value, row)
            nullable = type(None) in typing.get_args(hint)
            assert ("null" in row) == nullable, (method, field.name, row)
            assert structure_params_accepts_null(cls, field.name) == nullable
            checked += 1
    assert checked == 3


def structure_params_accepts_null(cls: type, field: str) -> bool:
    hints = typing.get_type_hints(cls)
    required: dict[str, object] = {
        f.name: [] if typing.get_origin(hints[f.name]) is list else "x"
        for f in attrs.fields(cls)
        if f.default is attrs.NOTHING
    }
    p.structure_params(required, cls)  # valid without the field
    try:
        p.structure_params({**required, field: None}, cls)
    except p.InvalidParams:
        return False
    return True
