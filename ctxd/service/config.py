"""The daemon's configuration: one defaulted, typed tree.

It arrives as ``initializationOptions`` (camelCase JSON) from a client, or, for the CLI, from a JSON config file
and ``CTXD_*`` environment variables; :mod:`ctxd.options` reads each source over the one before (the file over the
defaults, each variable over the file, ``initializationOptions`` over them all). Invalid values are reported,
naming their source and key path, and the value in effect before them stays; they never stop the daemon.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from ctxd.compaction.settings import CompactionSettings
from ctxd.context.cut_rules import DEFAULT_SHARE
from ctxd.options import PATHS, POSITIVE, POSITIVE_INT, SHARE, Check, one_of, read, show, unstructure
from ctxd.redact import add_secret
from ctxd.store.dirs import default_archive_roots
from ctxd.store.listing import default_roots, default_transcript_roots
from ctxd.store.opencode import default_databases
from ctxd.store.session_file import Durability
from ctxd.team.settings import TeamSettings, dsn_password

__all__ = ["Config", "OpenSessions", "config_from_json", "load_cli_config", "show"]
INITIALIZATION_OPTIONS = "initializationOptions"


def _absolute(value: Any) -> Any:
    """A list of paths made absolute (``~`` expanded); a value of another type is left for the check to refuse."""
    if isinstance(value, list) and all(isinstance(p, str) and p for p in value):
        return [os.path.abspath(os.path.expanduser(p)) for p in value]
    return value


def _roots(value: Any) -> Any:
    """The roots: one path or a list of them."""
    return _absolute([value] if isinstance(value, str) else value)


@attrs.define
class OpenSessions:
    """How many sessions the daemon keeps open, and for how long (see :mod:`ctxd.service.keeping`).

    A session closed for these reasons opens again on its next request and answers the same; one in
    use (a request on it, an append or a compaction under way or scheduled) is never closed."""

    idle_seconds: float = attrs.field(default=300.0, validator=POSITIVE)
    """A session no request touched for this long is closed (a composition a client follows keeps it)."""
    max_count: int = attrs.field(default=16, validator=POSITIVE_INT)
    """At most this many open sessions: past it, the least recently used are closed first."""
    max_bytes: int = attrs.field(default=64 << 20, validator=POSITIVE_INT)
    """At most about this much memory (bytes, estimated) held by open sessions: past it, the least
    recently used are closed first."""


@attrs.define
class Config:
    """The configuration's keys are these fields' names in camelCase (``transcript_roots``: ``transcriptRoots``)."""

    roots: list[str] = attrs.field(
        factory=default_roots,
        converter=_roots,
        validator=Check("a path or a non-empty list of paths", lambda v: PATHS.test(v) and len(v) > 0),
    )
    """pi session roots (read-write; new sessions go into the first)."""
    transcript_roots: list[str] = attrs.field(factory=default_transcript_roots, converter=_absolute, validator=PATHS)
    """Claude Code and Codex session folders (read-only); by default those that exist."""
    archive_roots: list[str] = attrs.field(factory=default_archive_roots, converter=_absolute, validator=PATHS)
    """ctxd's archive of Claude Code transcripts (read-only; kept by ``ctxd hook``), when it exists."""
    watch: bool = True
    durability: str = attrs.field(default="flush", validator=one_of(*(d.value for d in Durability)))
    """flush | fsync | fsync-batch"""
    auto_compact: bool = True
    auto_compact_external: bool = False
    """Let another process's writes trigger auto-compaction too (an agent that leaves compaction to
    ctxd). Off: an agent that compacts on its own (pi) must not meet a second compactor in its file."""
    prompt_cache_ttl_seconds: float | None = attrs.field(default=None, validator=POSITIVE.or_null())
    """With a TTL, threshold compactions wait until just before the prompt cache would expire."""
    compaction: CompactionSettings = attrs.field(factory=CompactionSettings)
    watch_step_ms: int = attrs.field(default=10, validator=POSITIVE_INT)
    append_lock_timeout: float = attrs.field(default=10.0, validator=POSITIVE)
    """Seconds an append waits for another process's write lock before it fails (-31010)."""
    open_sessions: OpenSessions = attrs.field(factory=OpenSessions)
    """How many sessions stay open, and how long (memory stays bounded however many are touched)."""
    opencode_databases: list[str] = attrs.field(factory=default_databases, converter=_absolute, validator=PATHS)
    """opencode's SQLite databases (read-only); by default ``$XDG_DATA_HOME/opencode/opencode.db`` if it exists.
    A session in one is named ``<database>#<session id>``."""
    team: TeamSettings = attrs.field(factory=TeamSettings)
    """Team history on PostgreSQL (:mod:`ctxd.team`): off without a DSN."""
    tool_output_share: float = attrs.field(default=DEFAULT_SHARE, validator=SHARE)
    """The share of the model's window one tool output may fill when the window is known (``context/truncate``:
    window x share x 4 characters, at most 30,000); see :func:`ctxd.context.cut_rules.window_limit`."""

    @property
    def all_roots(self) -> list[str]:
        """Every root served: only files under these can be reached."""
        extra = [*self.transcript_roots, *self.archive_roots]
        return [*self.roots, *(r for i, r in enumerate(extra) if r not in self.roots and r not in extra[:i])]

    @property
    def durability_mode(self) -> Durability:
        return Durability(self.durability)

    def to_json(self) -> dict[str, Any]:
        """The effective configuration as its wire JSON, its secrets masked."""
        out: dict[str, Any] = unstructure(self)
        out["compaction"]["apiKey"] = "***" if self.compaction.api_key else None
        out["team"] = self.team.to_json()
        return out


ALIASES = {"sessionRoots": "roots"}
"""Older names of keys."""
SHORTCUTS = ("model", "apiBase", "apiKey")
"""Top-level shortcuts for the ``compaction`` keys of the same names."""
READ_ELSEWHERE = ("hooks", "client", "claudeCode")
"""Keys of the configuration read by others: the server (``hooks``), nobody (``client``: free-form), ``ctxd hook``
(``claudeCode``, :mod:`ctxd.cli.hook`)."""


def _wire(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` in the tree's own shape: aliases renamed, shortcuts moved into ``compaction``, others' keys left out."""
    out = {ALIASES.get(key, key): value for key, value in data.items() if key not in READ_ELSEWHERE}
    if "roots" in data and "sessionRoots" in data:
        out["roots"] = data["roots"]
    shortcuts = {key: out.pop(key) for key in SHORTCUTS if key in out}
    compaction = out.get("compaction", {})
    if shortcuts and isinstance(compaction, dict):
        out["compaction"] = {**shortcuts, **compaction}
    return out


def config_from_json(
    data: Any, problems: list[str] | None = None, *, base: Config | None = None, source: str = INITIALIZATION_OPTIONS
) -> Config:
    """A Config from camelCase JSON over ``base`` (default: the defaults); what was not taken is appended to
    ``problems``, each naming ``source`` and its key path.

    ``model``/``apiBase``/``apiKey`` may sit at the top level too."""
    problems = problems if problems is not None else []
    if data is None:
        return config_from_json({}, problems, base=base, source=source)
    config, found = read(Config, _wire(data) if isinstance(data, dict) else data, source=source, base=base)
    problems += [str(problem) for problem in found]
    add_secret(config.compaction.api_key)  # never shown in any answer, notification or log
    add_secret(dsn_password(config.team.dsn))
    return config


def _listed(text: str) -> list[str]:
    return text.split(os.pathsep)


def _projects(text: str) -> list[str]:
    return [p for p in text.split(os.pathsep) if p.strip()]


def _number(text: str) -> Any:
    """A number, or the text itself (for the check to refuse, naming the variable)."""
    try:
        return float(text)
    except ValueError:
        return text


def _flag(text: str) -> bool:
    return text.lower() not in ("0", "false", "no", "off")


ENV: dict[str, tuple[tuple[str, ...], Callable[[str], Any]]] = {
    "CTXD_ROOTS": (("roots",), _listed),
    "CTXD_TRANSCRIPT_ROOTS": (("transcriptRoots",), _listed),
    "CTXD_MODEL": (("compaction", "model"), str),
    "CTXD_API_BASE": (("compaction", "apiBase"), str),
    "CTXD_API_KEY": (("compaction", "apiKey"), str),
    "CTXD_DURABILITY": (("durability",), str),
    "CTXD_OPENCODE_DATABASES": (("opencodeDatabases",), _listed),
    "CTXD_TEAM_DSN": (("team", "dsn"), str),
    "CTXD_TEAM_PROJECTS": (("team", "projects"), _projects),
    "CTXD_TOOL_OUTPUT_SHARE": (("toolOutputShare",), _number),
    "CTXD_AUTO_COMPACT": (("autoCompact",), _flag),
    "CTXD_WATCH": (("watch",), _flag),
}
"""The environment variables the CLI reads: each sets one key (path) of the configuration, parsed from text."""
PRESENT = ("CTXD_AUTO_COMPACT", "CTXD_WATCH")
"""Variables taken when set at all (the others when not empty)."""


def _from_file(candidate: str, explicit: bool, problems: list[str]) -> Config:
    if not os.path.exists(candidate):
        if explicit:
            problems.append(f"{candidate}: no such config file")
        return Config()
    try:
        with open(candidate, encoding="utf-8") as f:
            loaded = json.load(f)
    except (OSError, ValueError) as exc:
        problems.append(f"{candidate}: {exc}")
        loaded = {}
    return config_from_json(loaded, problems, source=candidate)


def load_cli_config(path: str | None = None, environ: Mapping[str, str] | None = None) -> tuple[Config, list[str]]:
    """The CLI's configuration: ``path`` (or $CTXD_CONFIG, or ~/.config/ctxd/config.json), then the environment."""
    environ = os.environ if environ is None else environ
    problems: list[str] = []
    candidate = path or environ.get("CTXD_CONFIG") or os.path.expanduser("~/.config/ctxd/config.json")
    config = _from_file(candidate, bool(path), problems)
    for name, (key, parse) in ENV.items():
        if name in environ if name in PRESENT else environ.get(name):
            value: Any = parse(environ[name])
            for part in reversed(key):
                value = {part: value}
            config = config_from_json(value, problems, base=config, source=name)
    return config, problems
