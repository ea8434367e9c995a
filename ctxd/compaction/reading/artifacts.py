"""What a change writes into a file, as a resuming agent needs it named: the definitions it adds (functions,
modules, classes, constants with their value, a DSL's named blocks) and the values other programs and people
depend on (dependencies with their versions, the event names, routes, headers, topics and environment variables
the code exchanges, the settings a configuration file gains).

Owns reading a write's or an edit's text for those names; only what the new text has and the old text did not
is told (an edit that moves code adds nothing). Pure and bounded: at most :data:`DEF_CHARS` of a text are read.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import attrs

from ctxd.formats.lazy_re import lazy_compile

_DEF_RE = lazy_compile(
    r"^\s*(?:export\s+)?(?:default\s+)?(?:pub(?:\([\w:]+\))?\s+)?(?:async\s+)?(?:static\s+)?"
    r"(defmodule|defprotocol|defimpl|defmacrop?|defp?|defstruct|class|interface|trait|struct|enum|fn|func|"
    r"function\*?|module|type|impl|object|record|protocol)\s+([A-Za-z_][\w.?!]*)",
    re.M,
)
_CONST_RE = lazy_compile(
    r"^\s*(?:@([a-z][a-z0-9_]{2,40})\s+([0-9][\d_.]*|:[a-z_]+|\"[^\"\n]{1,40}\")\s*$|"
    r"(?:export\s+)?(?:(?:pub\s+)?const|static|final|let|var)?\s*([A-Z][A-Z0-9_]{2,40})\s*(?::\s*[\w\[\]<>, ]+)?\s*"
    r"[:=]\s*([0-9][\d_.]*|\"[^\"\n]{1,40}\"|'[^'\n]{1,40}')\s*[;,]?\s*$)",
    re.M,
)
_DSL_RE = lazy_compile(r"^\s*([a-z_]+) :([a-z_][\w?!]*)(?:,[^\n]*)? do\s*$", re.M)
"""A named block of a DSL (``computer :transcript_view do``, ``resource :user do``)."""
_MAY_DEFINE_RE = lazy_compile(
    r"\b(?:def|defp|defmodule|class|interface|trait|struct|enum|fn|func|function|module|type|impl|object|record|"
    r"protocol|const|static|final|let|var)\b|@[a-z]|^\s*[A-Z][A-Z0-9_]{2,}\s*[:=]|^\s*[a-z_]+ :[a-z_]\w* do\s*$",
    re.M,
)
"""A text that may define something (a cheap test before :func:`definitions`)."""
_SKIP_ATTRS = frozenset({"moduledoc", "doc", "spec", "impl", "type", "typep", "callback", "behaviour", "derive"})
DEF_CHARS = 60_000
"""Only this many characters of a written file are read for its definitions."""
MAX_DEFS = 10
MAX_CONSTS = 4
MAX_NAMES = 24
"""At most this many names are kept per file and task (definitions, dependencies, settings, literals)."""


def definitions(text: str) -> list[str]:
    """The definitions in a file's text: functions, modules, classes (by name) and constants with a literal
    value (``@ttl 90``, ``MAX_SIZE = 10``), at most :data:`MAX_DEFS` + :data:`MAX_CONSTS`."""
    body = text[:DEF_CHARS]
    names: list[str] = []
    seen: set[str] = set()
    for match in _DEF_RE.finditer(body):
        name = match.group(2)
        if name not in seen:
            seen.add(name)
            names.append(name)
        if len(names) >= MAX_DEFS:
            break
    for match in _DSL_RE.finditer(body):
        label = f"{match.group(1)} :{match.group(2)}"
        if match.group(1) not in ("describe", "test", "it", "context", "setup") and label not in seen:
            seen.add(label)
            names.append(label)
        if len(names) >= MAX_DEFS + 2:
            break
    consts: list[str] = []
    for match in _CONST_RE.finditer(body):
        name = match.group(1) or match.group(3)
        value = match.group(2) or match.group(4)
        if not name or name in _SKIP_ATTRS or name in seen:
            continue
        seen.add(name)
        consts.append(f"{'@' if match.group(1) else ''}{name} {value}")
        if len(consts) >= MAX_CONSTS:
            break
    return names + consts


_DEP_RE = lazy_compile(
    r"\{:([a-z_]\w*),\s*\"([^\"\n]{1,30})\"|"  # mix: {:dep, "~> 1.5"}
    r"^\s*\"(@?[\w.-]+(?:/[\w.-]+)?)\"\s*:\s*\"([\^~>=<]*\s*\d[\w.+-]*)\"|"  # package.json: "dep": "^1.2.3"
    r"^\s*\"?([A-Za-z][\w.-]*)(?:\[[\w,]+\])?\s*(==|>=|~=|<=|~>)\s*([\d][\w.*]*)|"  # requirements, pyproject
    r"^\s*([a-z][\w-]*)\s*=\s*(?:\{\s*version\s*=\s*)?\"([\^~>=<]*\d[\w.+-]*)\"|"  # Cargo.toml
    r"^\s*(?:require\s+)?([a-z][\w.-]*\.[a-z]{2,}/[\w./-]+)\s+(v\d[\w.+-]*)|"  # go.mod: host/path v1.2.3
    r"^\s*gem\s+[\"']([\w-]+)[\"']\s*,\s*[\"']([~>=<]*\s*\d[\w.]*)[\"']",  # Gemfile: gem "name", "~> 7.1"
    re.M,
)
_LITERAL_RE = lazy_compile(r"(?<![\w\\])([\"'`])([A-Za-z/][\w.:/-]{2,60})\1")
_NAMING_RE = lazy_compile(r"[_:/.-]|^[A-Z][A-Z0-9_]+$")
"""A literal that names something (``terminal_scrolled``, ``/api/hooks``, ``x-trace-id``, ``API_TOKEN``);
a plain word (``ok``, ``error``) is not told."""
_NOT_NAMING_RE = lazy_compile(
    r"^(?:https?:|\./|\.\./)|\.(?:ex|exs|py|ts|js|tsx|jsx|rs|go|rb|md|json|css|html?|svg|png)$|^\w+\.\w+\(|//"
)
_CLASS_ATTR_RE = lazy_compile(r"(?:class|className|style|id)=\s*$")
_CONFIG_PATH_RE = lazy_compile(r"(?:^|/)(?:config|conf|settings)/|\.(?:env|ya?ml|toml|ini|conf|cfg)$|(?:^|/)\.env")
MAX_NAMED = 8
MAX_SETTINGS = 4


def _dependencies(text: str) -> list[str]:
    out: list[str] = []
    if '"' not in text and "=" not in text and " v" not in text:
        return out
    for match in _DEP_RE.finditer(text):
        groups = [g for g in match.groups() if g is not None]
        if len(groups) == 3:  # name, operator, version
            out.append(f"{groups[0]} {groups[1]}{groups[2]}")
        elif len(groups) == 2:
            out.append(f"{groups[0]} {groups[1].strip()}")
    return out


def _literals(text: str) -> list[str]:
    out: list[str] = []
    if '"' not in text and "'" not in text and "`" not in text:
        return out
    for match in _LITERAL_RE.finditer(text):
        value = match.group(2)
        if not _NAMING_RE.search(value) or _NOT_NAMING_RE.search(value):
            continue
        if _CLASS_ATTR_RE.search(text, max(0, match.start() - 12), match.start()):
            continue
        out.append(f'"{value}"')
    return out


_OPENERS = {"[": "]", "{": "}", "(": ")"}


def _statements(text: str) -> list[str]:
    """The lines of ``text`` with a statement that goes on over several lines joined into one (open brackets, a
    trailing comma or backslash), whitespace collapsed."""
    out: list[str] = []
    current: list[str] = []
    depth = 0
    for raw in text.splitlines():
        line = " ".join(raw.split())
        if not line:
            continue
        current.append(line)
        depth += sum(line.count(o) - line.count(c) for o, c in _OPENERS.items())
        if (depth <= 0 and not line.endswith((",", "\\"))) or len(current) > 12:
            out.append(" ".join(current))
            current, depth = [], 0
    if current:
        out.append(" ".join(current))
    return out


def _settings(text: str) -> list[str]:
    out: list[str] = []
    for line in _statements(text):
        if (
            len(line) >= 6
            and not line.startswith(("#", "//", ";", "--", "end", "]", "}", ")", "import "))
            and ("=" in line or ":" in line)
        ):
            out.append(f"`{line if len(line) <= 220 else line[:219] + '…'}`")
    return out


@attrs.frozen
class Change:
    """What a write or an edit does to a file's names (see :func:`changed_names`)."""

    added: list[str]
    removed: list[str]
    """Names the old text had and the new one has not (an edit that took a setting out)."""
    whole: bool
    """The write gives the whole file (its names are the file's, whatever was known before)."""


def _names(path: str, text: str) -> list[str]:
    body = text[:DEF_CHARS]
    found = definitions(body) if _MAY_DEFINE_RE.search(body) else []
    found += _dependencies(body)
    config = _CONFIG_PATH_RE.search(path) is not None
    named = list(dict.fromkeys(_settings(body)[: MAX_SETTINGS * 3] if config else _literals(body)))
    return found + named


def changed_names(path: str, arguments: Mapping[str, Any], *, removals: bool = True) -> Change:
    """What a write or edit of ``path`` adds that a resuming agent needs named: definitions (see
    :func:`definitions`), then dependencies with their versions (``plug_cowboy ~> 2.7``), then for a
    configuration file its new settings, else the naming literals of its new code (``"terminal_scrolled"``,
    ``"/api/hooks/session-start"``); each only when the old text did not have it. And what it takes out, unless
    the caller says it does not need that (``removals=False``: then an edit that adds no name reads no old text)."""
    new, old = _texts(arguments)
    whole = bool(arguments.get("content"))
    if len(new) < 4 and not old:
        return Change([], [], whole)
    now = _names(path, new) if len(new) >= 4 else []
    if not now and not removals:
        return Change([], [], whole)
    before = _names(path, old) if old else []
    known = set(before)
    added = [n for n in now if n not in known]
    kept = set(now)
    removed = [n for n in before if n not in kept]
    config = _CONFIG_PATH_RE.search(path) is not None
    defs = [n for n in added if not n.startswith(('"', "`"))]
    named = [n for n in added if n.startswith(('"', "`"))]
    if not whole and removed:
        defs = _renamed(defs, removed, new, old)
    return Change(defs + named[: MAX_SETTINGS if config else MAX_NAMED], removed, whole)


def _is_name(name: str) -> bool:
    """A definition's bare name (a function, a module), not a constant with its value or a literal."""
    return " " not in name and not name.startswith(('"', "`", "@"))


def _renamed(defs: list[str], removed: list[str], new_text: str, old_text: str) -> list[str]:
    """``defs`` with a rename told as one: an edit that takes out one name and puts in one, the rest of its text
    mostly the same under the new name (``read_rows [was fetch_rows]``; a function replaced by another is no
    rename); a resuming agent looks for the new name and may remember the old."""
    gone = [n for n in removed if _is_name(n)]
    new = [n for n in defs if _is_name(n)]
    if len(gone) != 1 or len(new) != 1:
        return defs
    before = [" ".join(line.split()) for line in old_text[:DEF_CHARS].replace(gone[0], new[0]).splitlines()]
    before = [line for line in before if line]
    after = {" ".join(line.split()) for line in new_text[:DEF_CHARS].splitlines()}
    if not before or sum(line in after for line in before) * 2 <= len(before):
        return defs
    return [f"{n} [was {gone[0]}]" if n == new[0] else n for n in defs]


def added_names(path: str, arguments: Mapping[str, Any]) -> list[str]:
    """The names a write or edit of ``path`` adds (see :func:`changed_names`)."""
    return changed_names(path, arguments, removals=False).added


def _texts(arguments: Mapping[str, Any]) -> tuple[str, str]:
    new = arguments.get("content") or arguments.get("new_string") or arguments.get("newText") or ""
    old = arguments.get("old_string") or arguments.get("oldText") or ""
    edits = arguments.get("edits")
    if isinstance(edits, list):
        new = "\n".join(str(e.get("new_string") or e.get("newText") or "") for e in edits if isinstance(e, Mapping))
        old = "\n".join(str(e.get("old_string") or e.get("oldText") or "") for e in edits if isinstance(e, Mapping))
    return (new if isinstance(new, str) else "", old if isinstance(old, str) else "")
