"""Settings files edited as their owners edit them (issue 30, item 3): Codex's config.toml in every shape TOML
allows (inline tables, dotted keys, super tables, comments, CRLF), JSON with comments (VS Code's settings.json,
opencode's config) changed in place keeping comments and trailing commas; each result read again, a file that
cannot be changed safely refused with nothing written, and ``--uninstall`` giving the bytes back."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from test_setup_codex_opencode import CTXD, context

from ctxd.setup import SetupError, setup
from ctxd.setup.base import Context
from ctxd.setup.jsonc import JsoncError, loads, update

SETTINGS = settings(
    max_examples=60, deadline=None, derandomize=True, database=None, suppress_health_check=[HealthCheck.too_slow]
)

# --- config.toml ----------------------------------------------------------------------------------------------

MCP_FORMS = [
    "",
    'mcp_servers = { other = { command = "x", args = ["a"] } }\n',
    'mcp_servers.other.command = "x"\nmcp_servers.other.args = ["a"] # dotted\n',
]
MCP_TABLES = [
    "",
    '[mcp_servers.other]\ncommand = "x" # theirs\nargs = ["a"]\n',
    '[mcp_servers]\nother = { command = "x" }\n',
    '[mcp_servers]\nother.command = "x"\n',
]
HOOK_FORMS = ["", 'hooks = { state = { "/x/hooks.json:stop:0:0" = { trusted_hash = "sha256:0" } } }\n']
HOOK_TABLES = ["", '[hooks.state."/x/hooks.json:stop:0:0"]\ntrusted_hash = "sha256:0"\n']
OTHER_KEYS = ['model = "o3"\n', "# a comment of theirs\n", "\n", 'approval_policy = "never" # why\n']
OTHER_TABLES = ['[profiles.fast]\nmodel = "small"\n\n', "# tables follow\n[tui]\nnotifications = true\n"]


@st.composite
def configs(draw: st.DrawFn) -> str:
    head = [draw(st.sampled_from(MCP_FORMS)), draw(st.sampled_from(HOOK_FORMS))]
    head += draw(st.lists(st.sampled_from(OTHER_KEYS), max_size=4))
    tables = [draw(st.sampled_from(MCP_TABLES)), draw(st.sampled_from(HOOK_TABLES))]
    tables += draw(st.lists(st.sampled_from(OTHER_TABLES), max_size=2, unique=True))
    text = "".join(draw(st.permutations(head))) + "".join(draw(st.permutations(tables)))
    if draw(st.booleans()):
        text = text.replace("\n", "\r\n")
    try:
        tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        assume(False)  # two forms of one table that TOML itself refuses
    return text


def comments(text: str) -> list[str]:
    return re.findall(r"#[^\r\n]*", text)


@SETTINGS
@given(configs(), st.booleans())
def test_codex_config_of_any_shape_is_changed_in_place_and_given_back(
    tmp_path_factory: pytest.TempPathFactory, text: str, prompt: bool
) -> None:
    tmp_path = tmp_path_factory.mktemp("codex")
    home = tmp_path / "codex"
    home.mkdir()
    (home / "config.toml").write_bytes(text.encode())
    setup("codex", context(tmp_path, compact_prompt=prompt))
    after = (home / "config.toml").read_bytes().decode()
    value, before = tomllib.loads(after), tomllib.loads(text)
    assert value["mcp_servers"]["ctxd"] == {"command": CTXD, "args": ["mcp"]}
    if "other" in before.get("mcp_servers", {}):
        assert value["mcp_servers"]["other"] == before["mcp_servers"]["other"]
    assert len(value["hooks"]["state"]) == 5 + len(before.get("hooks", {}).get("state", {}))
    assert all(v == before[k] for k, v in value.items() if k not in ("mcp_servers", "hooks") and k in before)
    assert ("experimental_compact_prompt_file" in value) == prompt
    assert comments(after) == comments(text)  # every comment kept, in its order
    assert setup("codex", context(tmp_path))[0].startswith("Codex: nothing to change")
    setup("codex", context(tmp_path), uninstall=True)
    assert (home / "config.toml").read_bytes() == text.encode()


def test_codex_adds_its_server_into_an_inline_table(tmp_path: Path) -> None:
    """The file of the issue: `[mcp_servers.ctxd]` after `mcp_servers = {...}` is a second declaration."""
    text = 'model = "o3"\nmcp_servers = { other = { command = "x", args = ["a"] } }\n'
    home = tmp_path / "codex"
    home.mkdir()
    (home / "config.toml").write_text(text)
    setup("codex", context(tmp_path))
    after = (home / "config.toml").read_text()
    assert "[mcp_servers.ctxd]" not in after
    assert tomllib.loads(after)["mcp_servers"]["ctxd"]["args"] == ["mcp"]


def test_codex_refuses_a_config_where_its_keys_cannot_go(tmp_path: Path) -> None:
    home = tmp_path / "codex"
    home.mkdir()
    (home / "config.toml").write_text('mcp_servers = "none"\n')
    with pytest.raises(SetupError, match="`mcp_servers` is not a table"):
        setup("codex", context(tmp_path))
    assert sorted(p.name for p in home.iterdir()) == ["config.toml"]
    assert (home / "config.toml").read_text() == 'mcp_servers = "none"\n'


# --- JSON with comments ---------------------------------------------------------------------------------------

KEYS = ["editor.fontSize", "files.exclude", "plugin", "theme", "a", "é"]
VALUES = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.text('ab /*"\\', max_size=4)),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(KEYS), inner, max_size=3),
    max_leaves=6,
)


class Writer:
    """Writes a value as a person might: indentation, comments around members, trailing commas."""

    def __init__(self, draw: st.DrawFn) -> None:
        self.draw = draw
        self.unit = draw(st.sampled_from(["  ", "    ", "\t"]))
        self.eol = draw(st.sampled_from(["\n", "\n", "\r\n"]))
        self.n = 0

    def comment(self) -> str:
        self.n += 1
        kind = self.draw(st.sampled_from(["", "", "line", "block"]))
        if kind == "line":
            return f" // note {self.n}{self.eol}"
        return f" /* note {self.n} */" if kind == "block" else ""

    def value(self, value: object, depth: int) -> str:
        if isinstance(value, dict | list) and value and self.draw(st.booleans()):
            pad = self.eol + self.unit * (depth + 1)
            items = list(value.items()) if isinstance(value, dict) else list(enumerate(value))
            parts = []
            for k, v in items:
                key = f"{json.dumps(k)}: " if isinstance(value, dict) else ""
                parts.append(pad + key + self.value(v, depth + 1))
            body = ""
            for i, part in enumerate(parts):
                comma = "," if i < len(parts) - 1 or self.draw(st.booleans()) else ""
                note = self.comment()
                body += part + comma + (note.rstrip("\r\n") if not note.endswith(self.eol) else note.rstrip())
            opening, closing = ("{", "}") if isinstance(value, dict) else ("[", "]")
            return opening + body + self.eol + self.unit * depth + closing
        return json.dumps(value)


@st.composite
def commented(draw: st.DrawFn) -> tuple[str, dict[str, object]]:
    value = draw(st.dictionaries(st.sampled_from(KEYS), VALUES, min_size=1, max_size=4))
    writer = Writer(draw)
    head = draw(st.sampled_from(["", "// settings" + writer.eol, "/* mine */ "]))
    return head + writer.value(value, 0) + writer.eol, value


@SETTINGS
@given(commented(), st.sampled_from([*KEYS, "ctxd.server.command"]), VALUES)
def test_jsonc_set_and_take_back_keeps_every_comment(
    case: tuple[str, dict[str, object]], key: str, new: object
) -> None:
    text, value = case
    assert loads(text) == value
    wanted = {**value, key: new}
    changed = update(text, wanted)
    assert loads(changed) == wanted
    if key not in value:  # an added member: nothing else changes, every comment stays
        assert re.findall(r"note \d+", changed) == re.findall(r"note \d+", text)
        back = update(changed, value)
        assert loads(back) == value and re.findall(r"note \d+", back) == re.findall(r"note \d+", text)
    without = {k: v for k, v in value.items() if k != next(iter(value))}
    assert loads(update(text, without)) == without


@pytest.mark.parametrize(
    "text",
    ["{'a': 1}", "{a: 1}", '{"a": 0x10}', '{"a": NaN}', '{"a": 1,,}', '{"a": 1} {"b": 2}', "// only a comment\n"],
)
def test_jsonc_refuses_what_is_not_json_with_comments(text: str) -> None:
    with pytest.raises(JsoncError):
        update(text, {"a": 2})


def test_jsonc_refuses_to_change_a_key_written_twice() -> None:
    with pytest.raises(JsoncError, match="appears 2 times"):
        update('{"a": 1, "a": 2}', {"a": 3})


def test_opencode_jsonc_is_changed_in_place_and_given_back(tmp_path: Path) -> None:
    folder = tmp_path / "config" / "opencode"
    folder.mkdir(parents=True)
    text = b'{\n  // mine\n  "plugin": ["opencode-wakatime"], // timing\n  "theme": "dark",\n}\n'
    (folder / "opencode.jsonc").write_bytes(text)
    setup("opencode", context(tmp_path))
    assert not (folder / "opencode.json").exists()
    after = (folder / "opencode.jsonc").read_text()
    assert "// mine" in after and "// timing" in after
    value = loads(after)
    assert value["plugin"][0] == "opencode-wakatime" and value["mcp"]["ctxd"]["command"] == [CTXD, "mcp"]
    setup("opencode", context(tmp_path), uninstall=True)
    assert (folder / "opencode.jsonc").read_bytes() == text


def test_opencode_json_with_comments_keeps_a_later_change_and_its_comments(tmp_path: Path) -> None:
    folder = tmp_path / "config" / "opencode"
    folder.mkdir(parents=True)
    (folder / "opencode.json").write_text('{\n  "theme": "dark", // dark\n}\n')
    setup("opencode", context(tmp_path))
    text = (folder / "opencode.json").read_text().replace('"dark", // dark', '"light", // light now')
    (folder / "opencode.json").write_text(text)
    lines = setup("opencode", context(tmp_path), uninstall=True)
    assert any("the rest changed since setup and stays" in line for line in lines), lines
    assert (folder / "opencode.json").read_text() == '{\n  "theme": "light", // light now\n}\n'


def test_codex_setup_again_with_another_ctxd_changes_its_own_keys_only(tmp_path: Path) -> None:
    home = tmp_path / "codex"
    home.mkdir()
    text = '# mine\nmcp_servers = { other = { command = "x" } }\n\n[tui]\nnotifications = true\n'
    (home / "config.toml").write_text(text)
    setup("codex", context(tmp_path))
    moved = Context({**context(tmp_path).environ}, "/elsewhere/ctxd")
    lines = setup("codex", moved)
    assert any("set [mcp_servers.ctxd]" in line for line in lines), lines
    value = tomllib.loads((home / "config.toml").read_text())
    assert value["mcp_servers"] == {"other": {"command": "x"}, "ctxd": {"command": "/elsewhere/ctxd", "args": ["mcp"]}}
    setup("codex", moved, uninstall=True)
    assert (home / "config.toml").read_text() == text
