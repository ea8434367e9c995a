"""The daemon's configuration: one defaulted, typed tree.

It arrives as ``initializationOptions`` (camelCase JSON) from a client, or, for the CLI, from a
JSON config file and ``CTXD_*`` environment variables.  Invalid values are reported and replaced
by their defaults; they never stop the daemon.
"""

from __future__ import annotations

import json
import os
from typing import Any

import attrs

from ctxd.compaction.settings import CompactionSettings
from ctxd.context.cut_rules import DEFAULT_SHARE
from ctxd.redact import add_secret
from ctxd.store.dirs import default_archive_roots
from ctxd.store.listing import default_roots, default_transcript_roots
from ctxd.store.opencode import default_databases
from ctxd.store.session_file import Durability
from ctxd.team.settings import TeamSettings, team_from_env, team_from_json


@attrs.define
class OpenSessions:
    """How many sessions the daemon keeps open, and for how long (see :mod:`ctxd.service.keeping`).

    A session closed for these reasons opens again on its next request and answers the same; one in
    use (a request on it, an append or a compaction under way or scheduled) is never closed."""

    idleSeconds: float = 300.0
    """A session no request touched for this long is closed (a composition a client follows keeps it)."""
    maxCount: int = 16
    """At most this many open sessions: past it, the least recently used are closed first."""
    maxBytes: int = 64 << 20
    """At most about this much memory (bytes, estimated) held by open sessions: past it, the least
    recently used are closed first."""

    @classmethod
    def from_json(cls, data: Any, problems: list[str], base: OpenSessions) -> OpenSessions:
        out = attrs.evolve(base)
        if data is None:
            return out
        if not isinstance(data, dict):
            problems.append(f"openSessions: expected an object, got {show(data)}; using the defaults")
            return out
        for key in ("idleSeconds", "maxCount", "maxBytes"):
            if key not in data:
                continue
            value = data[key]
            if _positive(value) and (key == "idleSeconds" or float(value).is_integer()):
                setattr(out, key, float(value) if key == "idleSeconds" else int(value))
            else:
                kind = "a positive number" if key == "idleSeconds" else "a positive integer"
                problems.append(f"openSessions.{key}: expected {kind}, got {show(value)}")
        for key in data:
            if key not in ("idleSeconds", "maxCount", "maxBytes"):
                problems.append(f"unknown option openSessions.{show(key)} ignored")
        return out


@attrs.define
class Config:
    roots: list[str] = attrs.field(factory=default_roots)
    """pi session roots (read-write; new sessions go into the first)."""
    transcriptRoots: list[str] = attrs.field(factory=default_transcript_roots)
    """Claude Code and Codex session folders (read-only); by default those that exist."""
    archiveRoots: list[str] = attrs.field(factory=default_archive_roots)
    """ctxd's archive of Claude Code transcripts (read-only; kept by ``ctxd hook``), when it exists."""
    watch: bool = True
    durability: str = "flush"
    """flush | fsync | fsync-batch"""
    autoCompact: bool = True
    autoCompactExternal: bool = False
    """Let another process's writes trigger auto-compaction too (an agent that leaves compaction to
    ctxd). Off: an agent that compacts on its own (pi) must not meet a second compactor in its file."""
    promptCacheTtlSeconds: float | None = None
    """With a TTL, threshold compactions wait until just before the prompt cache would expire."""
    compaction: CompactionSettings = attrs.field(factory=CompactionSettings)
    watchStepMs: int = 10
    appendLockTimeout: float = 10.0
    """Seconds an append waits for another process's write lock before it fails (-31010)."""
    openSessions: OpenSessions = attrs.field(factory=OpenSessions)
    """How many sessions stay open, and how long (memory stays bounded however many are touched)."""
    opencodeDatabases: list[str] = attrs.field(factory=default_databases)
    """opencode's SQLite databases (read-only); by default ``$XDG_DATA_HOME/opencode/opencode.db`` if it exists.
    A session in one is named ``<database>#<session id>``."""
    team: TeamSettings = attrs.field(factory=TeamSettings)
    """Team history on PostgreSQL (:mod:`ctxd.team`): off without a DSN."""
    toolOutputShare: float = DEFAULT_SHARE
    """The share of the model's window one tool output may fill when the window is known (``context/truncate``:
    window x share x 4 characters, at most 30,000); see :func:`ctxd.context.cut_rules.window_limit`."""

    @property
    def all_roots(self) -> list[str]:
        """Every root served: only files under these can be reached."""
        extra = [*self.transcriptRoots, *self.archiveRoots]
        return [*self.roots, *(r for i, r in enumerate(extra) if r not in self.roots and r not in extra[:i])]

    @property
    def durability_mode(self) -> Durability:
        return Durability(self.durability)

    def to_json(self) -> dict[str, Any]:
        out = attrs.asdict(self)
        out["compaction"]["apiKey"] = "***" if self.compaction.apiKey else None
        out["team"] = self.team.to_json()
        return out


def show(value: Any, limit: int = 80) -> str:
    """``repr(value)``, cut to ``limit`` characters (a problem report never echoes megabytes)."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _positive(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value > 0


def _paths(value: Any) -> list[str] | None:
    """``value`` as a list of absolute paths (``~`` expanded), or None unless it is a list of non-empty strings."""
    if isinstance(value, list) and all(isinstance(r, str) and r for r in value):
        return [os.path.abspath(os.path.expanduser(r)) for r in value]
    return None


def config_from_json(data: Any, problems: list[str] | None = None, *, base: Config | None = None) -> Config:
    """A Config from camelCase JSON over ``base`` (default: the defaults).

    ``model``/``apiBase``/``apiKey`` may sit at the top level too."""
    problems = problems if problems is not None else []
    cfg = (
        attrs.evolve(
            base,
            compaction=attrs.evolve(base.compaction),
            team=attrs.evolve(base.team),
            openSessions=attrs.evolve(base.openSessions),
        )
        if base is not None
        else Config()
    )
    if data is None:
        return cfg
    if not isinstance(data, dict):
        problems.append(f"configuration must be an object, not {type(data).__name__}; using defaults")
        return cfg
    roots = data.get("roots", data.get("sessionRoots"))
    if roots is not None:
        found = _paths([roots] if isinstance(roots, str) else roots)
        if found:
            cfg.roots = found
        else:
            problems.append(f"roots: expected a non-empty list of paths, got {show(roots)}; using {cfg.roots}")
    for key in ("transcriptRoots", "archiveRoots", "opencodeDatabases"):
        value = data.get(key)
        if value is not None:
            found = _paths(value)
            if found is not None:
                setattr(cfg, key, found)
            else:
                problems.append(f"{key}: expected a list of paths, got {show(value)}")
    for key in ("watch", "autoCompact", "autoCompactExternal"):
        if key in data:
            if isinstance(data[key], bool):
                setattr(cfg, key, data[key])
            else:
                problems.append(f"{key}: expected true or false, got {show(data[key])}")
    if "durability" in data:
        if data["durability"] in {d.value for d in Durability}:
            cfg.durability = data["durability"]
        else:
            problems.append(f"durability: expected flush, fsync or fsync-batch, got {show(data['durability'])}")
    if "appendLockTimeout" in data:
        if _positive(data["appendLockTimeout"]):
            cfg.appendLockTimeout = float(data["appendLockTimeout"])
        else:
            problems.append(f"appendLockTimeout: expected a positive number, got {show(data['appendLockTimeout'])}")
    for key in ("promptCacheTtlSeconds",):
        if key in data:
            if data[key] is None or _positive(data[key]):
                setattr(cfg, key, data[key])
            else:
                problems.append(f"{key}: expected a positive number, got {show(data[key])}")
    if "toolOutputShare" in data:
        share = data["toolOutputShare"]
        if _positive(share) and share <= 1:
            cfg.toolOutputShare = float(share)
        else:
            problems.append(f"toolOutputShare: expected a number above 0, at most 1, got {show(share)}")
    if "watchStepMs" in data:
        if _positive(data["watchStepMs"]):
            cfg.watchStepMs = int(data["watchStepMs"])
        else:
            problems.append(f"watchStepMs: expected a positive number, got {show(data['watchStepMs'])}")
    cfg.openSessions = OpenSessions.from_json(data.get("openSessions"), problems, cfg.openSessions)
    compaction = dict(data.get("compaction") or {}) if isinstance(data.get("compaction", {}), dict) else {}
    if not isinstance(data.get("compaction", {}), dict):
        problems.append("compaction: expected an object; using defaults")
    for key in ("model", "apiBase", "apiKey"):
        if key in data and key not in compaction:
            compaction[key] = data[key]
    cfg.compaction = CompactionSettings.from_json(compaction, problems, base=cfg.compaction)
    if "team" in data:
        cfg.team = team_from_json(data["team"], problems, base=cfg.team)
    add_secret(cfg.compaction.apiKey)  # never shown in any answer, notification or log
    known = {f.name for f in attrs.fields(Config)} | {"sessionRoots", "model", "apiBase", "apiKey", "hooks", "client"}
    known.add("claudeCode")  # read by `ctxd hook` (ctxd/cli/hook.py), not by the daemon
    for key in data:
        if key not in known:
            problems.append(f"unknown option {show(key)} ignored")
    return cfg


ENV_KEYS = {
    "CTXD_ROOTS": "roots",
    "CTXD_TRANSCRIPT_ROOTS": "transcriptRoots",
    "CTXD_MODEL": "model",
    "CTXD_API_BASE": "apiBase",
    "CTXD_API_KEY": "apiKey",
    "CTXD_DURABILITY": "durability",
    "CTXD_OPENCODE_DATABASES": "opencodeDatabases",
}


PATH_LISTS = ("roots", "transcriptRoots", "opencodeDatabases")


def load_cli_config(path: str | None = None, environ: dict[str, str] | None = None) -> tuple[Config, list[str]]:
    """The CLI's configuration: ``path`` (or $CTXD_CONFIG, or ~/.config/ctxd/config.json) then env."""
    environ = dict(os.environ if environ is None else environ)
    problems: list[str] = []
    data: dict[str, Any] = {}
    candidate = path or environ.get("CTXD_CONFIG") or os.path.expanduser("~/.config/ctxd/config.json")
    if candidate and os.path.exists(candidate):
        try:
            with open(candidate, encoding="utf-8") as f:
                loaded = json.load(f)
            if isinstance(loaded, dict):
                data.update(loaded)
            else:
                problems.append(f"{candidate}: expected a JSON object")
        except (OSError, ValueError) as exc:
            problems.append(f"{candidate}: {exc}")
    elif path:
        problems.append(f"{path}: no such config file")
    for env, key in ENV_KEYS.items():
        if environ.get(env):
            data[key] = environ[env].split(os.pathsep) if key in PATH_LISTS else environ[env]
    team_from_env(environ, data)
    if environ.get("CTXD_TOOL_OUTPUT_SHARE"):
        try:
            data["toolOutputShare"] = float(environ["CTXD_TOOL_OUTPUT_SHARE"])
        except ValueError:
            problems.append(f"CTXD_TOOL_OUTPUT_SHARE: expected a number, got {show(environ['CTXD_TOOL_OUTPUT_SHARE'])}")
    for env, key in (("CTXD_AUTO_COMPACT", "autoCompact"), ("CTXD_WATCH", "watch")):
        if env in environ:
            data[key] = environ[env].lower() not in ("0", "false", "no", "off")
    return config_from_json(data, problems), problems
