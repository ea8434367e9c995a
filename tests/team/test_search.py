"""Team search and expand through the service, as roles with different grants: row-level security and the
search function keep each role to its projects; filters narrow; a schema newer than ctxd is refused."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ctxd.errors import TeamError
from ctxd.service import protocol as p
from ctxd.service.config import Config
from ctxd.service.service import Service
from ctxd.team import driver, migrate
from ctxd.team.settings import TeamSettings

from .conftest import Cluster, TeamDb
from .helpers import indexed, publisher, session

NO_SESSIONS = "/nonexistent/ctxd-no-local-sessions"
"""The local root of a service that searches the team only (a configuration's roots are never empty)."""


def _publish(tmp_path: Path, dsn: str, user: str, machine: str, *sessions: tuple[str, str, str, str]) -> None:
    root = tmp_path / user / "sessions"
    for cwd, sid, text, ts in sessions:
        session(root, cwd, sid, text, ts=ts)
    pub = publisher(indexed(tmp_path / user, root), dsn, user=user, machine=machine)
    pub.run()
    pub.close()


@pytest.fixture
def team(tmp_path: Path, cluster: Cluster, team_db: TeamDb) -> dict[str, str]:
    """alice sees parser; bob sees parser and web; both published."""
    alice, _ = cluster.role("alice")
    bob, _ = cluster.role("bob")
    conn = driver.connect(team_db.dsn())
    migrate.grant(conn, alice, ["parser"])
    migrate.grant(conn, bob, ["parser", "web"])
    conn.close()
    _publish(
        tmp_path,
        team_db.dsn(alice),
        "alice",
        "laptop-a",
        ("/home/alice/parser", "sess-a1", "the tokenizer drops the trailing newline", "2026-10-02T08:00:00Z"),
    )
    _publish(
        tmp_path,
        team_db.dsn(bob),
        "bob",
        "ci-runner-7",
        ("/srv/ci/parser", "sess-b1", "tokenizer fix: keep the trailing newline token", "2026-11-05T08:00:00Z"),
        ("/srv/ci/web", "sess-b2", "the web tokenizer in the search box is slow", "2026-11-06T08:00:00Z"),
    )
    return {"alice": team_db.dsn(alice), "bob": team_db.dsn(bob)}


async def _search(dsn: str, query: str, **params: Any) -> dict[str, Any]:
    service = Service(Config(roots=[NO_SESSIONS], transcript_roots=[], archive_roots=[], team=TeamSettings(dsn=dsn)))
    try:
        return await service.history_search(p.HistorySearchParams(query, scope="team", **params))
    finally:
        await service.close()


async def test_a_role_sees_only_the_projects_it_is_granted(team: dict[str, str]) -> None:
    seen_by_alice = await _search(team["alice"], "tokenizer")
    assert {(h["user"], h["project"]) for h in seen_by_alice["hits"]} == {("alice", "parser"), ("bob", "parser")}
    seen_by_bob = await _search(team["bob"], "tokenizer")
    assert {h["project"] for h in seen_by_bob["hits"]} == {"parser", "web"}
    # A filter narrows the grants, never widens them (alice asking for web, which she is not granted: nothing).
    assert (await _search(team["alice"], "tokenizer", project="web"))["hits"] == []
    both = await _search(team["alice"], "tokenizer", project=["web", "parser"])
    assert {h["project"] for h in both["hits"]} == {"parser"}
    hit = next(h for h in seen_by_bob["hits"] if h["session"]["id"] == "sess-b2")
    assert (hit["agent"], hit["machine"], hit["role"], hit["line"]) == ("pi", "ci-runner-7", "user", 2)
    assert "«tokenizer»" in hit["snippet"] and hit["timestamp"] == "2026-11-06T08:00:00.000Z"
    assert hit["session"]["path"].endswith("sess-b2.jsonl") and seen_by_bob["scope"] == "team"
    # Direct SQL as alice: row-level security, not only the search function.
    conn = driver.connect(team["alice"])
    try:
        projects = {r[0] for r in conn.execute("SELECT project FROM ctxd.messages").fetchall()}
        sessions = {r[0] for r in conn.execute("SELECT session_id FROM ctxd.sessions").fetchall()}
        assert projects == {"parser"} and sessions == {"sess-a1", "sess-b1"}
        conn.rollback()
        changed = conn.execute("UPDATE ctxd.messages SET body = 'x' WHERE session_id = 'sess-b1'").rowcount
        assert changed == 0  # bob's rows: visible, but not alice's to change
        conn.rollback()
        with pytest.raises(Exception, match="row-level security"):
            conn.execute(
                "INSERT INTO ctxd.messages(session_id, entry_id, ts, project, agent, user_name, machine, line, role,"
                " tool, body) VALUES ('s', 'e', now(), 'web', 'pi', 'alice', 'm', 1, 'user', '', 'sneak')"
            )
        conn.rollback()
        # Asking the grants function about another role gives nothing.
        assert conn.execute("SELECT ctxd.projects_of('postgres')").fetchone()[0] == []
    finally:
        conn.close()


async def test_filters_by_project_agent_user_and_time(team: dict[str, str]) -> None:
    bob = team["bob"]
    assert {h["project"] for h in (await _search(bob, "tokenizer", project="web"))["hits"]} == {"web"}
    assert {h["user"] for h in (await _search(bob, "tokenizer", user="alice"))["hits"]} == {"alice"}
    assert (await _search(bob, "tokenizer", agent="claude"))["hits"] == []
    recent = await _search(bob, "tokenizer", since="2026-11-01", until="2026-11-06T00:00:00Z")
    assert [h["session"]["id"] for h in recent["hits"]] == ["sess-b1"]
    phrase = await _search(bob, '"trailing newline" -fix')
    assert [h["session"]["id"] for h in phrase["hits"]] == ["sess-a1"]
    assert (await _search(bob, "the and of"))["hits"] == []  # only stop words: nothing to look for
    with pytest.raises(p.InvalidParams, match="since"):
        await _search(bob, "tokenizer", since="last week")


async def test_local_searches_refuse_team_filters(tmp_path: Path) -> None:
    service = Service(Config(roots=[str(tmp_path)], transcript_roots=[], archive_roots=[]))
    try:
        with pytest.raises(p.InvalidParams, match="project"):
            await service.history_search(p.HistorySearchParams("x", project="parser"))
    finally:
        await service.close()


async def test_expand_reads_a_hits_session_from_the_server_within_the_grants(team: dict[str, str]) -> None:
    hits = (await _search(team["alice"], "tokenizer", user="bob"))["hits"]
    hit = hits[0]
    service = Service(
        Config(roots=[NO_SESSIONS], transcript_roots=[], archive_roots=[], team=TeamSettings(dsn=team["alice"]))
    )
    try:
        one = await service.history_expand(p.HistoryExpandParams(hit["session"]["id"], hit["entryId"], scope="team"))
        assert one["kind"] == "entry" and [m["text"] for m in one["messages"]] == [
            "tokenizer fix: keep the trailing newline token"
        ]
        whole = await service.history_expand(p.HistoryExpandParams("sess-b1", scope="team", maxChars=1000))
        assert whole["totalMessages"] == 4 and [m["line"] for m in whole["messages"]] == [2, 3, 4, 5]
        assert whole["messages"][2]["toolName"] == "bash" and whole["session"]["path"].endswith("sess-b1.jsonl")
        with pytest.raises(TeamError, match="no session sess-b2"):  # bob's web session: not alice's to read
            await service.history_expand(p.HistoryExpandParams("sess-b2", scope="team"))
    finally:
        await service.close()


async def test_expand_pages_a_long_session_from_the_server(tmp_path: Path, team_db: TeamDb) -> None:
    root = tmp_path / "sessions"
    texts = [f"question {n} " + "detail " * 300 for n in range(30)]
    session(root, "/work/parser", "sess-long", *texts)
    pub = publisher(indexed(tmp_path, root), team_db.dsn())
    pub.run()
    pub.close()
    service = Service(
        Config(roots=[NO_SESSIONS], transcript_roots=[], archive_roots=[], team=TeamSettings(dsn=team_db.dsn()))
    )
    try:
        seen: list[str] = []
        cursor = None
        for _ in range(40):
            page = await service.history_expand(
                p.HistoryExpandParams("sess-long", scope="team", maxChars=5000, cursor=cursor)
            )
            seen += [m["entryId"] for m in page["messages"] if not m.get("fromChar")]
            cursor = page["nextCursor"]
            if cursor is None:
                break
        assert len(seen) == page["totalMessages"] == 62 and len(set(seen)) == 62
    finally:
        await service.close()


def test_a_schema_newer_than_ctxd_is_refused_with_what_to_do(tmp_path: Path, team_db: TeamDb) -> None:
    with team_db.admin() as conn:
        conn.execute("UPDATE ctxd.meta SET value = '99' WHERE key = 'schema_version'")
    root = tmp_path / "sessions"
    session(root, "/work/parser", "sess-a", "hello")
    pub = publisher(indexed(tmp_path, root), team_db.dsn())
    with pytest.raises(TeamError, match=r"schema version 99, newer than this ctxd knows \(1\): upgrade ctxd") as info:
        pub.run()
    pub.close()
    assert info.value.kind == "schemaNewer" and pub.queued() == 4  # nothing lost: it waits in the spool
    conn = driver.connect(team_db.dsn())
    with pytest.raises(TeamError, match="upgrade ctxd before running init"):
        migrate.init(conn)
    conn.close()
