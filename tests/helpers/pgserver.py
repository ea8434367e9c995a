"""A real PostgreSQL server for the team tests and ``make bench-team``: ``initdb`` and ``pg_ctl`` in a temporary
folder, listening on a Unix socket only, stopped at the end.

PostgreSQL refuses to run as root: as root, the server runs as the ``postgres`` user (``runuser -u postgres``),
and its folder belongs to that user. The superuser ``postgres`` has a password (scram-sha-256 on the socket), so
that the tests can check what a wrong password does; :attr:`PgServer.dsn` names the socket folder as ``host``.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

SUPERUSER = "postgres"
SUPERPASSWORD = "pg-super-Secret-7731"
PORT = 5432
"""The socket's number (only in its file name: ``.s.PGSQL.5432``; nothing listens on TCP)."""


def binaries() -> str | None:
    """The folder holding ``initdb`` and ``pg_ctl`` (PATH first, then Debian's PostgreSQL folders, newest first)."""
    found = shutil.which("initdb")
    if found and shutil.which("pg_ctl"):
        return os.path.dirname(os.path.realpath(found))
    for folder in sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda f: int(f.split("/")[-2]), reverse=True):
        if os.access(os.path.join(folder, "initdb"), os.X_OK):
            return folder
    return None


def _as_server_user(cmd: list[str]) -> list[str]:
    if os.geteuid() != 0:
        return cmd
    return ["runuser", "-u", SUPERUSER, "--", *cmd]


class PgServer:
    """One running server. ``settings``: extra ``postgresql.conf`` lines (``name = value``)."""

    def __init__(
        self, settings: dict[str, str] | None = None, base: str | None = None, root: str | None = None
    ) -> None:
        """A new cluster in ``root`` (default: a new folder in ``base`` or the temporary folder), started."""
        if root is not None:
            os.makedirs(root, exist_ok=True)
        self._paths(Path(root) if root is not None else Path(tempfile.mkdtemp(prefix="ctxd-pg-", dir=base)))
        if os.geteuid() == 0:
            user = pwd.getpwnam(SUPERUSER)
            os.chown(self.root, user.pw_uid, user.pw_gid)
        os.chmod(self.root, 0o755)
        pwfile = self.root / "pw"
        pwfile.write_text(SUPERPASSWORD + "\n")
        os.chmod(pwfile, 0o644)
        self._run(
            [
                f"{self.bin}/initdb",
                "-D",
                str(self.data),
                "-U",
                SUPERUSER,
                f"--pwfile={pwfile}",
                "--auth=scram-sha-256",
                "--encoding=UTF8",
                "--locale=C",
                "--no-sync",
            ]
        )
        pwfile.unlink()
        conf = {
            "listen_addresses": "''",
            "unix_socket_directories": f"'{self.socket}'",
            "port": str(PORT),
            "fsync": "on",
            "max_connections": "60",
            **(settings or {}),
        }
        with open(self.data / "postgresql.conf", "a") as f:
            f.writelines(f"{k} = {v}\n" for k, v in conf.items())
        self.start()

    def _paths(self, root: Path) -> None:
        folder = binaries()
        if folder is None:
            raise FileNotFoundError("no PostgreSQL server binaries (initdb, pg_ctl)")
        self.bin = folder
        self.root = root
        self.data = root / "data"
        self.socket = str(root)
        self.log = root / "server.log"

    @classmethod
    def reuse(cls, root: Path) -> PgServer:
        """The cluster an earlier :class:`PgServer` left in ``root``, started again."""
        server = cls.__new__(cls)
        server._paths(root)
        server.start()
        return server

    def _run(self, cmd: list[str]) -> None:
        done = subprocess.run(_as_server_user(cmd), capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed ({done.returncode}): {done.stderr.strip() or done.stdout}")

    def start(self) -> None:
        self._run([f"{self.bin}/pg_ctl", "-D", str(self.data), "-l", str(self.log), "-w", "-t", "60", "start"])

    def stop(self, mode: str = "fast") -> None:
        self._run([f"{self.bin}/pg_ctl", "-D", str(self.data), "-m", mode, "-w", "-t", "60", "stop"])

    def running(self) -> bool:
        return os.path.exists(os.path.join(self.socket, f".s.PGSQL.{PORT}"))

    def dsn(self, user: str = SUPERUSER, dbname: str = "postgres") -> str:
        """A DSN without a password (it comes from PGPASSWORD or ~/.pgpass, as ctxd wants it)."""
        return f"postgresql://{user}@/{dbname}?host={self.socket}&port={PORT}"

    def psql_env(self) -> dict[str, str]:
        return {**os.environ, "PGPASSWORD": SUPERPASSWORD}

    def close(self) -> None:
        if self.running():
            try:
                self.stop("immediate")
            except RuntimeError:
                pass
        for _ in range(50):
            if not self.running():
                break
            time.sleep(0.1)
        shutil.rmtree(self.root, ignore_errors=True)
