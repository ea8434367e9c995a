"""The one module that imports psycopg 3 (the ``team`` extra), and what a failure to connect means.

Every connection ctxd makes to the team database comes from :func:`connect`, and every error on the way is a
:class:`ctxd.errors.TeamError` whose ``kind`` says which of the usual faults it is: psycopg missing (``driver``),
a DSN that does not parse (``config``), a server that cannot be reached (``unreachable``), credentials it refused
(``auth``), no such database (``database``), a missing right (``permission``). Messages name the server as
``user@host:port/database``, never a password: libpq's own texts do not carry it, and the DSN is masked
(:func:`ctxd.team.settings.masked_dsn`) and redacted anyway.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from ctxd.errors import TeamError
from ctxd.redact import redact
from ctxd.team.settings import masked_dsn

if TYPE_CHECKING:
    import psycopg

INSTALL = (
    "team history needs psycopg 3: install ctxd's team extra (pip install 'ctxd[team]',"
    " or pipx inject ctxd 'psycopg[binary]')"
)

_AUTH = re.compile(
    r"password authentication failed|authentication failed|no password supplied|password is required"
    r"|role \"[^\"]*\" does not exist|pg_hba\.conf rejects|SCRAM|Kerberos|GSSAPI",
    re.IGNORECASE,
)
_DATABASE = re.compile(r"database \"[^\"]*\" does not exist", re.IGNORECASE)
_UNREACHABLE = re.compile(
    r"connection refused|could not connect|no such file or directory|timeout expired|could not translate host"
    r"|name or service not known|network is unreachable|no route to host|connection timed out|server closed"
    r"|connection to server .* failed|terminating connection|the database system is (?:starting|shutting) down"
    r"|is the server running",
    re.IGNORECASE,
)


def _psycopg() -> Any:
    try:
        import psycopg
    except ImportError:
        raise TeamError("driver", INSTALL) from None
    return psycopg


def where(dsn: str) -> str:
    """``user@host:port/database`` of a DSN (libpq's defaults where it names none), for messages."""
    psycopg = _psycopg()
    try:
        parts = psycopg.conninfo.conninfo_to_dict(dsn)
    except psycopg.ProgrammingError:
        return masked_dsn(dsn)
    host = str(parts.get("host") or "localhost")
    port = str(parts.get("port") or "5432")
    return f"{parts.get('user') or '(login name)'}@{host}:{port}/{parts.get('dbname') or '(user name)'}"


def check_dsn(dsn: str) -> None:
    """Raise TeamError(``config``) unless ``dsn`` is a connection string libpq can read."""
    if not dsn:
        raise TeamError("config", 'no team database: set "team": {"dsn": ...} in the configuration or CTXD_TEAM_DSN')
    psycopg = _psycopg()
    try:
        psycopg.conninfo.conninfo_to_dict(dsn)
    except psycopg.ProgrammingError as exc:
        raise TeamError("config", f"the team DSN {masked_dsn(dsn)!r} is not valid: {_text(exc)}") from None
    if "://" in dsn and not re.match(r"^postgres(?:ql)?://", dsn, re.IGNORECASE):
        raise TeamError("config", f"the team DSN {masked_dsn(dsn)!r} is not valid: a URI starts with postgresql://")


def _text(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return redact(text)[:500] or type(exc).__name__


def classify(exc: BaseException, dsn: str) -> TeamError:
    """The TeamError for an error psycopg raised while talking to the server at ``dsn``."""
    if isinstance(exc, TeamError):
        return exc
    psycopg = _psycopg()
    text = _text(exc)
    at = where(dsn)
    if isinstance(exc, psycopg.errors.InsufficientPrivilege):
        return TeamError("permission", f"the team database at {at} refused: {text} (ask its admin: ctxd team grant)")
    if isinstance(
        exc, psycopg.errors.InvalidSchemaName | psycopg.errors.UndefinedTable | psycopg.errors.UndefinedFunction
    ):
        return TeamError("schema", f"the team database at {at} has no ctxd schema ({text}): run `ctxd team init`")
    if isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError):
        if _AUTH.search(text):
            return TeamError("auth", f"the team database at {at} refused the credentials: {text}")
        if _DATABASE.search(text):
            return TeamError("database", f"the team database at {at} does not exist: {text}")
        if _UNREACHABLE.search(text) or isinstance(exc, psycopg.InterfaceError):
            return TeamError("unreachable", f"cannot reach the team database at {at}: {text}")
    if isinstance(exc, psycopg.ProgrammingError) and "conninfo" in text.lower():
        return TeamError("config", f"the team DSN {masked_dsn(dsn)!r} is not valid: {text}")
    return TeamError("server", f"the team database at {at} failed: {text}")


def connect(dsn: str, *, timeout: int = 10, autocommit: bool = False) -> psycopg.Connection[Any]:
    """A connection to the team database (the password from PGPASSWORD or ~/.pgpass, as libpq finds it)."""
    check_dsn(dsn)
    psycopg = _psycopg()
    try:
        return psycopg.connect(  # type: ignore[no-any-return]
            dsn, connect_timeout=timeout, autocommit=autocommit, application_name="ctxd"
        )
    except Exception as exc:
        raise classify(exc, dsn) from None


def is_connection_lost(exc: BaseException) -> bool:
    """Whether an error means the connection is gone (the server stopped, the network dropped)."""
    psycopg = _psycopg()
    return isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError)


def copy_rows(cur: Any, table: str, columns: list[tuple[str, str]], rows: list[tuple[Any, ...]]) -> None:
    """``COPY table (columns) FROM STDIN`` of ``rows`` in the binary format (psycopg's COPY protocol: the
    field's fastest way in); ``columns``: (name, type) pairs."""
    names = ", ".join(name for name, _ in columns)
    with cur.copy(f"COPY {table} ({names}) FROM STDIN (FORMAT BINARY)") as copy:
        copy.set_types([kind for _, kind in columns])
        for row in rows:
            copy.write_row(row)


def json_value(value: Any) -> Any:
    """``value`` as a jsonb parameter."""
    from psycopg.types.json import Jsonb

    return Jsonb(value)


def ident(conn: Any, name: str) -> str:
    """``name`` quoted as an SQL identifier for ``conn``."""
    from psycopg import sql

    return sql.Identifier(name).as_string(conn)
