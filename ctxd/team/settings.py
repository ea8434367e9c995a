"""The ``team`` configuration: where team history is published, which projects, as whom.

``"team": {"dsn": "postgresql://alice@db.example.com/ctxd", "projects": ["parser", "~/src/web"]}`` in the
configuration (read by :mod:`ctxd.options`), or ``CTXD_TEAM_DSN`` (and ``CTXD_TEAM_PROJECTS``, ``os.pathsep``-separated:
:mod:`ctxd.service.config`). The password is
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

from ctxd.options import NON_EMPTY, POSITIVE_INT, SECRET, Check, unstructure

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


def _tidy(value: Any) -> Any:
    """A name stripped of blanks (a value of another type is left for the check to refuse)."""
    return value.strip() if isinstance(value, str) else value


def _names(value: Any) -> Any:
    """``"*"`` or one name as a list of one; each name stripped."""
    if isinstance(value, str):
        return [value]
    return [_tidy(v) for v in value] if isinstance(value, list) else value


NAMES = Check(
    'a list of project names or folders (or "*")',
    lambda v: isinstance(v, list) and all(isinstance(n, str) and n for n in v),
)


@attrs.define
class TeamSettings:
    """Read from the configuration's ``team`` object (camelCase keys: :mod:`ctxd.options`)."""

    dsn: str = attrs.field(
        default="",
        converter=_tidy,
        validator=Check("a connection string", lambda v: isinstance(v, str)),
        metadata={SECRET: True},
    )
    """A libpq connection string or URI; "" turns team history off."""
    projects: list[str] = attrs.field(factory=list, converter=_names, validator=NAMES)
    """Project names or folders to publish; ``"*"``: every project; empty: publish nothing."""
    user: str = attrs.field(factory=_default_user, converter=_tidy, validator=NON_EMPTY)
    """Who the published sessions are by (default: the login name)."""
    machine: str = attrs.field(factory=_default_machine, converter=_tidy, validator=NON_EMPTY)
    """Where they ran (default: the host name)."""
    publish: bool = True
    """Publish in the background (the daemon); off: only ``ctxd team sync`` publishes."""
    batch_rows: int = attrs.field(default=5000, validator=POSITIVE_INT)
    """Entries sent in one transaction."""
    connections: int = attrs.field(default=2, validator=POSITIVE_INT)
    """Server connections a backlog (more than ``batchRows`` entries spooled) is sent over at once, split by
    session; 1: one connection always."""
    connect_timeout: int = attrs.field(default=10, validator=POSITIVE_INT)
    """Seconds to wait for the server before giving up (a pass is retried later)."""

    @property
    def enabled(self) -> bool:
        return bool(self.dsn)

    @property
    def publishes_all(self) -> bool:
        return ALL in self.projects

    def to_json(self) -> dict[str, Any]:
        """The settings' wire JSON, the DSN masked."""
        out: dict[str, Any] = unstructure(self)
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
