"""The ``team`` configuration: where team history is published, which projects, as whom.

``"team": {"dsn": "postgresql://alice@db.example.com/ctxd", "projects": ["parser", "~/src/web"]}`` in the
configuration, or ``CTXD_TEAM_DSN`` (and ``CTXD_TEAM_PROJECTS``, ``os.pathsep``-separated). The password is
libpq's business: ``PGPASSWORD`` or ``~/.pgpass`` (``PGPASSFILE``); a password written into the DSN still works,
but it is remembered as a secret (:func:`ctxd.redact.add_secret`) and every DSN ctxd shows is masked
(:func:`masked_dsn`).

``projects``: names (``"parser"``: sessions whose project is named so, see :mod:`ctxd.team.projects`) or paths
(``"~/src/web"``, anything with a ``/``: sessions started in that folder or below it, published as the folder's
name); ``"*"`` publishes every project. Without projects nothing is published (searching the team still works).
"""

from __future__ import annotations

import os
import re
from typing import Any

import attrs

from ctxd.redact import add_secret

ALL = "*"
_PASSWORD_IN_URL = re.compile(r"^(postgres(?:ql)?://[^:/@?#]*:)([^@/?#]*)(@)", re.IGNORECASE)
_PASSWORD_PARAM = re.compile(r"((?:^|[\s?&])password\s*=\s*)('(?:[^'\\]|\\.)*'|[^\s&]*)", re.IGNORECASE)


def _default_user() -> str:
    """The login name, as getpass.getuser() finds it (without importing getpass on every CLI start)."""
    for name in ("LOGNAME", "USER", "LNAME", "USERNAME"):
        if os.environ.get(name):
            return os.environ[name]
    try:
        import pwd

        return pwd.getpwuid(os.getuid()).pw_name
    except (ImportError, KeyError, OSError):
        return "unknown"


def _default_machine() -> str:
    return os.uname().nodename or "unknown"


@attrs.define
class TeamSettings:
    dsn: str = ""
    """A libpq connection string or URI; "" turns team history off."""
    projects: list[str] = attrs.field(factory=list)
    """Project names or folders to publish; ``"*"``: every project; empty: publish nothing."""
    user: str = attrs.field(factory=_default_user)
    """Who the published sessions are by (default: the login name)."""
    machine: str = attrs.field(factory=_default_machine)
    """Where they ran (default: the host name)."""
    publish: bool = True
    """Publish in the background (the daemon); off: only ``ctxd team sync`` publishes."""
    batchRows: int = 5000
    """Entries sent in one transaction."""
    connections: int = 2
    """Server connections a backlog (more than ``batchRows`` entries spooled) is sent over at once, split by
    session; 1: one connection always."""
    connectTimeout: int = 10
    """Seconds to wait for the server before giving up (a pass is retried later)."""

    @property
    def enabled(self) -> bool:
        return bool(self.dsn)

    @property
    def publishes_all(self) -> bool:
        return ALL in self.projects

    def to_json(self) -> dict[str, Any]:
        out = attrs.asdict(self)
        out["dsn"] = masked_dsn(self.dsn)
        return out


def masked_dsn(dsn: str) -> str:
    """``dsn`` with any password in it replaced by ``***`` (URI or key=value form)."""
    dsn = _PASSWORD_IN_URL.sub(lambda m: m.group(1) + "***" + m.group(3), dsn)
    return _PASSWORD_PARAM.sub(lambda m: m.group(1) + "***", dsn)


def dsn_password(dsn: str) -> str | None:
    """The password written into ``dsn``, if any (to be kept secret)."""
    m = _PASSWORD_IN_URL.match(dsn)
    if m and m.group(2):
        return m.group(2)
    m = _PASSWORD_PARAM.search(dsn)
    if m and m.group(2):
        return m.group(2).strip("'")
    return None


def _strings(value: Any) -> list[str] | None:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(v, str) and v.strip() for v in value):
        return [v.strip() for v in value]
    return None


def team_from_json(data: Any, problems: list[str], base: TeamSettings | None = None) -> TeamSettings:
    """TeamSettings from the ``team`` object (camelCase) over ``base``; invalid values are reported and skipped."""
    team = attrs.evolve(base) if base is not None else TeamSettings()
    if data is None:
        return team
    if not isinstance(data, dict):
        problems.append(f"team: expected an object, got {type(data).__name__}; team history is off")
        return team
    for key, value in data.items():
        if key == "dsn":
            if isinstance(value, str):
                team.dsn = value.strip()
            else:
                problems.append("team.dsn: expected a connection string")
        elif key == "projects":
            found = _strings(value)
            if found is None:
                problems.append('team.projects: expected a list of project names or folders (or "*")')
            else:
                team.projects = found
        elif key in ("user", "machine"):
            if isinstance(value, str) and value.strip():
                setattr(team, key, value.strip())
            else:
                problems.append(f"team.{key}: expected a non-empty string")
        elif key == "publish":
            if isinstance(value, bool):
                team.publish = value
            else:
                problems.append("team.publish: expected true or false")
        elif key in ("batchRows", "connectTimeout", "connections"):
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                setattr(team, key, value)
            else:
                problems.append(f"team.{key}: expected a positive integer")
        else:
            problems.append(f"team: unknown option {key!r} ignored")
    add_secret(dsn_password(team.dsn))
    return team


def team_from_env(environ: dict[str, str], data: dict[str, Any]) -> None:
    """Fold ``CTXD_TEAM_DSN`` and ``CTXD_TEAM_PROJECTS`` into the configuration's ``team`` object."""
    dsn, projects = environ.get("CTXD_TEAM_DSN"), environ.get("CTXD_TEAM_PROJECTS")
    if not dsn and not projects:
        return
    team = dict(data["team"]) if isinstance(data.get("team"), dict) else {}
    if dsn:
        team["dsn"] = dsn
    if projects:
        team["projects"] = [p for p in projects.split(os.pathsep) if p.strip()]
    data["team"] = team
