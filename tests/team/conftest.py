"""A real PostgreSQL server for the whole test run (``initdb`` + ``pg_ctl`` in a temporary folder, a Unix socket
only; see tests/helpers/pgserver.py), a fresh database with ctxd's schema per test, and login roles made on demand.

Passwords reach libpq as they do for a user: the in-process tests use one ``PGPASSFILE`` that holds every role's
password; the daemons get a HOME with its own ``~/.pgpass`` or ``PGPASSWORD``. Without PostgreSQL's server
binaries the team tests skip, saying so once.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest
from helpers.pgserver import SUPERPASSWORD, SUPERUSER, PgServer, binaries

_names = itertools.count(1)


@attrs.define
class Cluster:
    server: PgServer
    passfile: Path

    def admin(self, dbname: str = "postgres"):  # type: ignore[no-untyped-def]
        import psycopg

        return psycopg.connect(self.server.dsn(SUPERUSER, dbname), autocommit=True)

    def role(self, prefix: str) -> tuple[str, str]:
        """A new login role and its password (also written to the shared passfile)."""
        name = f"{prefix}_{next(_names)}"
        password = f"pw-{name}-Zq81x"
        with self.admin() as conn:
            conn.execute(f"CREATE ROLE {name} LOGIN PASSWORD '{password}'")
        with open(self.passfile, "a") as f:
            f.write(f"*:*:*:{name}:{password}\n")
        return name, password


@attrs.define
class TeamDb:
    cluster: Cluster
    name: str

    def dsn(self, user: str = SUPERUSER) -> str:
        return self.cluster.server.dsn(user, self.name)

    def admin(self):  # type: ignore[no-untyped-def]
        return self.cluster.admin(self.name)

    def count(self, where: str = "true") -> int:
        with self.admin() as conn:
            return int(conn.execute(f"SELECT count(*) FROM ctxd.messages WHERE {where}").fetchone()[0])


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    if binaries() is None:
        pytest.skip("no PostgreSQL server binaries (initdb, pg_ctl): the team tests need PostgreSQL 15")
    pytest.importorskip("psycopg", reason="the team tests need psycopg 3 (the team extra)")
    if os.geteuid() == 0:
        import pwd

        try:
            pwd.getpwnam(SUPERUSER)
        except KeyError:
            pytest.skip("PostgreSQL refuses to run as root and there is no postgres user: the team tests skip")
    server = PgServer()
    passfile = tmp_path_factory.mktemp("pgpass") / "pgpass"
    passfile.write_text(f"*:*:*:{SUPERUSER}:{SUPERPASSWORD}\n")
    passfile.chmod(0o600)
    before = os.environ.get("PGPASSFILE")
    os.environ["PGPASSFILE"] = str(passfile)
    try:
        yield Cluster(server, passfile)
    finally:
        if before is None:
            os.environ.pop("PGPASSFILE", None)
        else:
            os.environ["PGPASSFILE"] = before
        server.close()


@pytest.fixture
def team_db(cluster: Cluster) -> Iterator[TeamDb]:
    """A fresh database with ctxd's schema (``ctxd team init``'s work), dropped afterwards."""
    from ctxd.team import driver, migrate

    name = f"team_{next(_names)}"
    with cluster.admin() as conn:
        conn.execute(f"CREATE DATABASE {name}")
    db = TeamDb(cluster, name)
    conn = driver.connect(db.dsn())
    try:
        migrate.init(conn)
    finally:
        conn.close()
    yield db
    with cluster.admin() as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
