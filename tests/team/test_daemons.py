"""Two real daemons, two HOMEs (two users, two machines), one team database: each publishes in the background
what it indexes, a team search through either finds both within its grants, secrets arrive redacted, and a
daemon whose team database fails logs it once while local search goes on."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO

from ctxd.client import ClientError, CtxdClient

from .conftest import Cluster, TeamDb
from .helpers import append, session

API_KEY = "sk-ant-api03-Zz9Yy8Xx7Ww6Vv5Uu4Tt3"


def _home(tmp_path: Path, name: str) -> Path:
    home = tmp_path / name
    (home / "sessions").mkdir(parents=True)
    return home


def _env(home: Path, **extra: str) -> dict[str, str]:
    env = {
        "HOME": str(home),
        "XDG_DATA_HOME": str(home / "data"),
        "XDG_STATE_HOME": str(home / "state"),
        "XDG_CACHE_HOME": str(home / "cache"),
        "PGPASSFILE": "",  # libpq's default: ~/.pgpass of this HOME
        "PGPASSWORD": "",
        "CTXD_CONFIG": str(home / "no-config.json"),
        "PYTHONPATH": str(REPO),
        "CTXD_LOG_LEVEL": "INFO",
    }
    env.update(extra)
    return env


def _options(home: Path, team: dict[str, Any]) -> dict[str, Any]:
    return {
        "roots": [str(home / "sessions")],
        "transcriptRoots": [],
        "archiveRoots": [],
        "opencodeDatabases": [],
        "watch": True,
        "team": team,
    }


async def _until(check: Any, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.1)


async def _search(client: CtxdClient, query: str, **params: Any) -> dict[str, Any]:
    found: dict[str, Any] = await client.request("history/search", {"query": query, **params})
    return found


async def test_two_daemons_publish_to_one_server_and_each_team_search_stays_in_its_grants(
    tmp_path: Path, cluster: Cluster, team_db: TeamDb
) -> None:
    from ctxd.team import driver, migrate

    alice, alice_pw = cluster.role("alice")
    bob, bob_pw = cluster.role("bob")
    conn = driver.connect(team_db.dsn())
    migrate.grant(conn, alice, ["parser"])
    migrate.grant(conn, bob, ["parser", "web"])
    conn.close()
    a, b = _home(tmp_path, "alice-laptop"), _home(tmp_path, "bob-ci")
    (a / ".pgpass").write_text(f"*:*:*:{alice}:{alice_pw}\n")  # alice's password: her ~/.pgpass
    (a / ".pgpass").chmod(0o600)
    path_a = session(
        a / "sessions", "/home/alice/parser", "sess-alice", f"the flaky test again; export ANTHROPIC_API_KEY={API_KEY}"
    )
    session(a / "sessions", "/home/alice/diary", "sess-diary", "a flaky private note that stays here")
    session(b / "sessions", "/srv/ci/parser", "sess-bob-parser", "flaky test_tokenize_unicode on the CI runner")
    session(b / "sessions", "/srv/ci/web", "sess-bob-web", "flaky checkout test in the web app")
    team_a = {"dsn": team_db.dsn(alice), "projects": ["parser"], "user": "alice", "machine": "laptop-a"}
    team_b = {"dsn": team_db.dsn(bob), "projects": ["parser", "web"], "user": "bob", "machine": "ci-7"}
    logs = [open(tmp_path / "a.log", "wb"), open(tmp_path / "b.log", "wb")]  # noqa: SIM115
    daemon_a = CtxdClient(initialization_options=_options(a, team_a), env=_env(a), stderr=logs[0])
    daemon_b = CtxdClient(  # bob's password: PGPASSWORD
        initialization_options=_options(b, team_b), env=_env(b, PGPASSWORD=bob_pw), stderr=logs[1]
    )
    try:
        async with daemon_a, daemon_b:
            await _until(lambda: team_db.count("user_name = 'alice'") == 4 and team_db.count("user_name = 'bob'") == 8)
            found = await _search(daemon_a, "flaky", scope="team")
            assert {(h["user"], h["machine"], h["project"]) for h in found["hits"]} == {
                ("alice", "laptop-a", "parser"),
                ("bob", "ci-7", "parser"),
            }  # never bob's web rows, never alice's unlisted diary
            assert {h["project"] for h in (await _search(daemon_b, "flaky", scope="team"))["hits"]} == {"parser", "web"}
            # The key left alice's machine redacted.
            assert team_db.count(f"body LIKE '%{API_KEY[:12]}%'") == 0
            assert team_db.count("body LIKE '%ANTHROPIC_API_KEY=***%'") == 1
            # expand reads bob's session from the server, through alice's daemon.
            bobs = next(h for h in found["hits"] if h["user"] == "bob")
            expanded = await daemon_a.request(
                "history/expand", {"session": bobs["session"]["id"], "scope": "team", "maxChars": 2000}
            )
            assert expanded["totalMessages"] == 4 and "test_tokenize_unicode" in expanded["messages"][0]["text"]
            # Written while the daemons run: published in the background as the watcher indexes it.
            append(path_a, "a new flaky lead: the locale of the CI image")
            await _until(lambda: team_db.count("body LIKE '%locale of the CI image%'") == 1, 30)
            # Local search is untouched by all this.
            local = await _search(daemon_a, "flaky", waitMs=5000)
            assert {h["session"]["id"] for h in local["hits"]} == {"sess-alice", "sess-diary"}
    finally:
        for log in logs:
            log.close()
    for name, password in (("a.log", alice_pw), ("b.log", bob_pw)):
        text = (tmp_path / name).read_text()
        assert password not in text and API_KEY not in text


async def _failing_daemon(tmp_path: Path, name: str, dsn: str, **env: str) -> tuple[str, dict[str, Any]]:
    """A daemon whose team database fails: local search works, a team search says why; its log."""
    home = _home(tmp_path, name)
    path = session(home / "sessions", "/work/parser", f"sess-{name}", "the cold start takes 418.7 ms")
    team = {"dsn": dsn, "projects": ["*"]}
    log_path = tmp_path / f"{name}.log"
    with open(log_path, "wb") as log:
        async with CtxdClient(initialization_options=_options(home, team), env=_env(home, **env), stderr=log) as daemon:
            found = await _search(daemon, "418.7", waitMs=5000)
            assert [h["session"]["id"] for h in found["hits"]] == [f"sess-{name}"]
            for n in range(3):  # more indexing passes, each asking for a publishing pass
                append(path, f"more work {n}")
                await asyncio.sleep(1.0)
            await asyncio.sleep(3.0)  # and the retries (2 s, 4 s)
            assert (await _search(daemon, "work", waitMs=5000))["hits"]
            with pytest.raises(ClientError) as failed:  # a team search says why it cannot answer
                await daemon.request("history/search", {"query": "x", "scope": "team"})
    return log_path.read_text(), {"code": failed.value.code, "data": failed.value.data, "text": str(failed.value)}


async def test_a_daemon_whose_team_server_fails_logs_it_once_and_local_search_goes_on(
    tmp_path: Path, cluster: Cluster, team_db: TeamDb
) -> None:
    """An unreachable server, wrong credentials, a DSN with a typo: three daemons at once."""
    alice, _ = cluster.role("alice")
    nowhere = tmp_path / "no-server"
    nowhere.mkdir()
    wrong = "Wrong-Password-4242"
    cases = {
        "unreachable": (f"postgresql://alice@/team?host={nowhere}", {}, "cannot reach the team database"),
        "auth": (team_db.dsn(alice), {"PGPASSWORD": wrong}, "refused the credentials"),
        "config": (team_db.dsn(alice).replace("port=", "prot="), {}, "is not valid"),
    }
    done = await asyncio.gather(*(_failing_daemon(tmp_path, kind, dsn, **env) for kind, (dsn, env, _) in cases.items()))
    for (kind, (_, _, said)), (log, error) in zip(cases.items(), done, strict=True):
        assert error["code"] == -31040 and error["data"] == {"kind": kind} and said in error["text"], (kind, error)
        assert log.count(said) == 1, (kind, log)  # logged once, however often it was tried
        assert "local search goes on" in log and wrong not in log
    assert str(nowhere) in done[0][0]
