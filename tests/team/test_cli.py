"""The command line over team history, as a person uses it: ``ctxd team init`` (the admin), ``sync``,
``status``, ``ctxd search --team``, and ``ctxd doctor`` naming what is wrong with the team database (an
unreachable server, refused credentials, a DSN with a typo, no such database, no schema). No password is ever
printed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO
from helpers.pgserver import SUPERPASSWORD, SUPERUSER

from .conftest import Cluster, TeamDb
from .helpers import session


def _ctxd(home: Path, *args: str, config: dict[str, Any] | None = None, **env: str) -> subprocess.CompletedProcess[str]:
    (home / "sessions").mkdir(parents=True, exist_ok=True)
    cfg = {"roots": [str(home / "sessions")], "transcriptRoots": [], "archiveRoots": [], "opencodeDatabases": []}
    (home / "config.json").write_text(json.dumps({**cfg, **(config or {})}))
    full = {
        **os.environ,
        "HOME": str(home),
        "XDG_DATA_HOME": str(home / "data"),
        "XDG_STATE_HOME": str(home / "state"),
        "CTXD_CONFIG": str(home / "config.json"),
        "PYTHONPATH": str(REPO),
        "PGPASSFILE": "",
        **env,
    }
    return subprocess.run(
        [sys.executable, "-P", "-m", "ctxd", *args], env=full, capture_output=True, text=True, timeout=120
    )


def test_init_sync_status_and_search_from_the_command_line(tmp_path: Path, cluster: Cluster) -> None:
    with cluster.admin() as conn:
        conn.execute("CREATE DATABASE team_cli")
    try:
        alice, alice_pw = cluster.role("alice")
        admin = tmp_path / "admin"
        dsn = cluster.server.dsn(SUPERUSER, "team_cli")
        init = _ctxd(
            admin,
            "team",
            "init",
            "--dsn",
            dsn,
            "--grant",
            f"{alice}=parser",
            "--retention-months",
            "24",
            PGPASSWORD=SUPERPASSWORD,
        )
        assert init.returncode == 0, init.stderr
        assert "schema ctxd version 1: created" in init.stdout and f"{alice} sees parser" in init.stdout
        assert "retention: 24 months" in init.stdout
        again = _ctxd(admin, "team", "init", "--dsn", dsn, "--json", PGPASSWORD=SUPERPASSWORD)
        assert json.loads(again.stdout)["done"][0] == "schema ctxd version 1: up to date"

        home = tmp_path / "alice"
        session(home / "sessions", "/home/alice/parser", "sess-1", "the lexer chokes on a BOM")
        session(home / "sessions", "/home/alice/other", "sess-2", "unrelated lexer notes")
        team = {"team": {"dsn": cluster.server.dsn(alice, "team_cli"), "projects": ["parser"], "user": "alice"}}
        before = _ctxd(home, "team", "status", "--json", config=team, PGPASSWORD=alice_pw)
        assert before.returncode == 0, before.stderr
        assert json.loads(before.stdout)["queued"] == 0  # nothing indexed yet
        synced = _ctxd(home, "team", "sync", config=team, PGPASSWORD=alice_pw)
        assert synced.returncode == 0, synced.stderr
        assert (
            "published 4 entries" in synced.stdout and "4 entries of projects that are not published" in synced.stdout
        )
        status = json.loads(_ctxd(home, "team", "status", "--json", config=team, PGPASSWORD=alice_pw).stdout)
        assert (status["queued"], status["lastPass"]["sent"], status["lastError"]) == (0, 4, None)
        assert status["dsn"] == team["team"]["dsn"] and status["projects"] == ["parser"]
        text = _ctxd(home, "team", "status", config=team, PGPASSWORD=alice_pw).stdout
        assert "queued: 0 entries" in text and "publishing as alice@" in text
        found = _ctxd(home, "search", "lexer", "--team", "--json", config=team, PGPASSWORD=alice_pw)
        assert found.returncode == 0, found.stderr
        hits = json.loads(found.stdout)["hits"]
        assert [(h["session"]["id"], h["project"], h["user"]) for h in hits] == [("sess-1", "parser", "alice")]
        shown = _ctxd(home, "search", "lexer BOM", "--team", "--project", "parser", config=team, PGPASSWORD=alice_pw)
        assert "1. " in shown.stdout and "project parser" in shown.stdout and "«BOM»" in shown.stdout
        wrong = _ctxd(home, "search", "lexer", "--project", "parser", config=team)
        assert wrong.returncode == 2 and "--project filters team searches: add --team" in wrong.stderr
        for done in (init, synced, found, shown):
            assert alice_pw not in done.stdout + done.stderr and SUPERPASSWORD not in done.stdout + done.stderr
    finally:
        with cluster.admin() as conn:
            conn.execute("DROP DATABASE IF EXISTS team_cli WITH (FORCE)")


def _doctor(home: Path, dsn: str, **env: str) -> tuple[subprocess.CompletedProcess[str], list[dict[str, Any]]]:
    done = _ctxd(home, "doctor", "--json", config={"team": {"dsn": dsn, "projects": ["*"]}}, **env)
    checks = [c for c in json.loads(done.stdout)["checks"] if c["integration"] == "team"]
    return done, checks


def test_doctor_says_what_is_wrong_with_the_team_database_and_never_prints_a_password(
    tmp_path: Path, cluster: Cluster, team_db: TeamDb
) -> None:
    alice, alice_pw = cluster.role("alice")
    home = tmp_path / "home"
    done, checks = _doctor(home, team_db.dsn(alice), PGPASSWORD=alice_pw)
    assert [(c["check"], c["ok"]) for c in checks] == [("dsn", True), ("connection", True), ("schema", False)]
    assert checks[2]["detail"].startswith("permission: ") and "ctxd team grant" in checks[2]["fix"]
    assert done.returncode == 1
    from ctxd.team import driver, migrate

    conn = driver.connect(team_db.dsn())
    migrate.grant(conn, alice, ["parser"])
    conn.close()
    done, checks = _doctor(home, team_db.dsn(alice), PGPASSWORD=alice_pw)
    assert [(c["check"], c["ok"]) for c in checks] == [
        ("dsn", True),
        ("connection", True),
        ("schema", True),
        ("grants", True),
        ("spool", True),
    ]
    assert done.returncode == 0 and checks[3]["detail"] == "this role sees: parser"
    nowhere = tmp_path / "no-server"
    nowhere.mkdir()
    wrong_password = "Wrong-Pass-31415926"
    inline = cluster.server.dsn(alice, team_db.name).replace(f"{alice}@", f"{alice}:Inline-Secret-2718@")
    cases = {
        "unreachable": (f"postgresql://{alice}@/team?host={nowhere}", {"PGPASSWORD": alice_pw}),
        "auth": (team_db.dsn(alice), {"PGPASSWORD": wrong_password}),
        "auth-inline": (inline, {}),
        "config": (team_db.dsn(alice).replace("port=", "prot="), {"PGPASSWORD": alice_pw}),
        "config-scheme": (team_db.dsn(alice).replace("postgresql://", "postgresq://"), {"PGPASSWORD": alice_pw}),
        "database": (cluster.server.dsn(alice, "no_such_db"), {"PGPASSWORD": alice_pw}),
    }
    for case, (dsn, env) in cases.items():
        done, checks = _doctor(home, dsn, **env)
        failed = [c for c in checks if not c["ok"]]
        assert done.returncode == 1 and len(failed) == 1, (case, checks)
        kind = case.split("-")[0]
        assert failed[0]["detail"].startswith(f"{kind}: "), (case, failed)
        assert failed[0]["fix"], case
        printed = done.stdout + done.stderr
        for secret in (wrong_password, alice_pw, "Inline-Secret-2718"):
            assert secret not in printed, (case, printed)
    text = _ctxd(home, "doctor", config={"team": {"dsn": cases["unreachable"][0]}}).stdout
    assert (
        "FAIL team: connection: unreachable: cannot reach the team database" in text and "fix: check the host" in text
    )
    with team_db.admin() as conn:
        conn.execute("DROP SCHEMA ctxd CASCADE")
    done, checks = _doctor(home, team_db.dsn(alice), PGPASSWORD=alice_pw)
    assert checks[-1]["check"] == "schema" and "run `ctxd team init`" in checks[-1]["detail"]


@pytest.mark.parametrize("missing", ["psycopg"])
def test_without_the_team_extra_ctxd_runs_and_a_team_command_says_how_to_install(tmp_path: Path, missing: str) -> None:
    """psycopg hidden from the interpreter: local search works, a team command names the extra."""
    script = (
        "import sys\n"
        "class Hide:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        f"        if name == {missing!r} or name.startswith({missing!r} + '.'):\n"
        "            raise ImportError('hidden')\n"
        "sys.meta_path.insert(0, Hide())\n"
        "from ctxd.cli import main\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    home = tmp_path / "home"
    session(home / "sessions", "/work/parser", "sess-1", "the cache misses on cold start")
    env = {**os.environ, "HOME": str(home), "XDG_DATA_HOME": str(home / "data"), "PYTHONPATH": str(REPO)}
    config = home / "config.json"
    config.write_text(
        json.dumps(
            {
                "roots": [str(home / "sessions")],
                "transcriptRoots": [],
                "archiveRoots": [],
                "team": {"dsn": "postgresql://alice@db.example/team", "projects": ["*"]},
            }
        )
    )
    env["CTXD_CONFIG"] = str(config)
    local = subprocess.run(
        [sys.executable, "-c", script, "search", "cache", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert local.returncode == 0, local.stderr
    assert json.loads(local.stdout)["hits"]
    team = subprocess.run(
        [sys.executable, "-c", script, "team", "sync"], env=env, capture_output=True, text=True, timeout=120
    )
    assert team.returncode == 2 and "pip install 'ctxd[team]'" in team.stderr
