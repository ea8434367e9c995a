"""Publishing the local history index to a real PostgreSQL: what a row carries, incrementally, only the listed
projects, redacted, and never twice."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from .conftest import TeamDb
from .helpers import append, indexed, publisher, reindex, session


def test_a_pass_publishes_every_indexed_entry_with_project_agent_user_machine_and_time(
    tmp_path: Path, team_db: TeamDb
) -> None:
    root = tmp_path / "sessions"
    repo = tmp_path / "src" / "parser"
    (repo / ".git").mkdir(parents=True)
    (repo / "lib").mkdir()
    session(root, str(repo / "lib"), "sess-a", "The parser crashes on empty input")
    db = indexed(tmp_path, root)
    pub = publisher(db, team_db.dsn(), user="alice", machine="laptop-1", facts_of=lambda path: {"goal": "fix it"})
    done = pub.run()
    pub.close()
    assert (done.sent, done.queued, done.skipped, done.refilled) == (4, 0, 0, True)
    with team_db.admin() as conn:
        rows = conn.execute(
            "SELECT session_id, project, agent, user_name, machine, line, role, tool, body, ts FROM ctxd.messages"
            " ORDER BY line"
        ).fetchall()
        sessions = conn.execute("SELECT session_id, project, path, cwd, facts, first_ts FROM ctxd.sessions").fetchall()
    assert [r[5:8] for r in rows] == [
        (2, "user", ""),
        (3, "assistant", "bash"),
        (4, "toolResult", "bash"),
        (5, "assistant", ""),
    ]
    assert {r[:5] for r in rows} == {("sess-a", "parser", "pi", "alice", "laptop-1")}  # the git work tree's name
    assert rows[0][8] == "The parser crashes on empty input"
    assert rows[0][9] == dt.datetime(2026, 11, 20, 10, tzinfo=dt.UTC)
    [(sid, project, path, cwd, facts, first)] = sessions
    assert (sid, project, cwd, facts) == ("sess-a", "parser", str(repo / "lib"), {"goal": "fix it"})
    assert path.endswith("sess-a.jsonl") and first == rows[0][9]
    with team_db.admin() as conn:  # the pass merged the full-text index's pending list: searches read no backlog
        left = conn.execute(
            "SELECT sum(gin_clean_pending_list(c.oid)) FROM pg_class c JOIN pg_am a ON a.oid = c.relam"
            " WHERE a.amname = 'gin' AND c.relkind = 'i' AND c.relnamespace = 'ctxd'::regnamespace"
        ).fetchone()[0]
    assert left == 0


def test_an_appended_session_costs_its_new_entries_and_nothing_is_sent_twice(tmp_path: Path, team_db: TeamDb) -> None:
    root = tmp_path / "sessions"
    path = session(root, "/work/parser", "sess-a", "first question")
    db = indexed(tmp_path, root)
    pub = publisher(db, team_db.dsn())
    assert pub.run().sent == 4
    assert pub.run().sent == 0  # nothing new
    append(path, "second question", "third question")
    reindex(db, root)
    again = pub.run()
    pub.close()
    assert (again.sent, again.refilled) == (2, False)
    assert team_db.count() == 6
    assert team_db.count("body = 'third question'") == 1


def test_only_the_listed_projects_leave_the_machine(tmp_path: Path, team_db: TeamDb) -> None:
    root = tmp_path / "sessions"
    session(root, "/work/parser", "sess-p", "parser work")
    session(root, "/work/secret-client", "sess-s", "client work")
    session(root, str(tmp_path / "web" / "app"), "sess-w", "web work")
    db = indexed(tmp_path, root)
    pub = publisher(db, team_db.dsn(), projects=["parser", str(tmp_path / "web")])
    done = pub.run()
    pub.close()
    assert (done.sent, done.skipped, done.queued) == (8, 4, 0)
    with team_db.admin() as conn:
        found = dict(conn.execute("SELECT session_id, project FROM ctxd.sessions").fetchall())
    assert found == {"sess-p": "parser", "sess-w": "web"}  # a listed folder names its project
    # Publishing every project later sends what was held back (everything is spooled again; nothing doubles).
    pub = publisher(db, team_db.dsn(), projects=["*"])
    wider = pub.run()
    pub.close()
    assert wider.refilled and team_db.count() == 12
    assert team_db.count("project = 'secret-client'") == 4


def test_secrets_are_redacted_before_they_leave(tmp_path: Path, team_db: TeamDb, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("DEPLOY_TOKEN", "tok-4f9a8b7c6d5e")
    root = tmp_path / "sessions"
    session(
        root,
        "/work/parser",
        "sess-k",
        "use OPENAI_API_KEY=sk-proj-AbCdEf0123456789xyz for the call",
        "and the deploy token tok-4f9a8b7c6d5e, header Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.abc",
    )
    db = indexed(tmp_path, root)
    facts = {"constraints": ["never print sk-proj-AbCdEf0123456789xyz"]}
    pub = publisher(db, team_db.dsn(), facts_of=lambda path: facts)
    pub.run()
    pub.close()
    with team_db.admin() as conn:
        bodies = " ".join(r[0] for r in conn.execute("SELECT body FROM ctxd.messages").fetchall())
        stored = str(conn.execute("SELECT facts FROM ctxd.sessions").fetchone()[0])
    for secret in ("sk-proj-AbCdEf0123456789xyz", "tok-4f9a8b7c6d5e", "eyJhbGciOiJIUzI1NiJ9"):
        assert secret not in bodies and secret not in stored
    assert "***" in bodies and "***" in stored and "deploy token" in bodies


def test_a_batch_sent_twice_lands_once(tmp_path: Path, team_db: TeamDb) -> None:
    """A daemon killed after the server committed a batch but before the spool forgot it sends it again."""
    root = tmp_path / "sessions"
    session(root, "/work/parser", "sess-a", "one", "two", "three")
    db = indexed(tmp_path, root)
    pub = publisher(db, team_db.dsn())
    assert pub.run().sent == 8
    pub.local().execute("INSERT INTO team_spool(row_id) SELECT id FROM rows")  # as if never taken off the spool
    assert pub.run().sent == 8
    pub.close()
    assert team_db.count() == 8
    with team_db.admin() as conn:
        assert conn.execute("SELECT count(DISTINCT (session_id, entry_id)) FROM ctxd.messages").fetchone()[0] == 8


def test_entries_past_the_retention_are_not_sent_and_old_partitions_are_dropped(
    tmp_path: Path, team_db: TeamDb
) -> None:
    from ctxd.team import driver, migrate

    root = tmp_path / "sessions"
    session(root, "/work/parser", "sess-old", "ancient history", ts="2020-01-15T10:00:00.000Z")
    now = dt.datetime.now(dt.UTC).isoformat().replace("+00:00", "Z")
    session(root, "/work/parser", "sess-new", "fresh work", ts=now)
    db = indexed(tmp_path, root)
    with team_db.admin() as conn:
        conn.execute("SELECT ctxd.ensure_month('2019-12-01')")
    conn = driver.connect(team_db.dsn())
    lines = migrate.init(conn, retention_months=12)
    conn.close()
    assert "retention: 12 months" in lines and any("dropped 1 partition" in line for line in lines)
    pub = publisher(db, team_db.dsn())
    done = pub.run()
    pub.close()
    assert (done.sent, done.expired) == (4, 4)
    with team_db.admin() as conn:
        parts = [
            r[0]
            for r in conn.execute(
                "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid"
                " WHERE i.inhparent = 'ctxd.messages'::regclass ORDER BY 1"
            ).fetchall()
        ]
    this_month = dt.datetime.now(dt.UTC).strftime("messages_%Y_%m")
    assert this_month in parts and "messages_2019_12" not in parts and "messages_2020_01" not in parts


def test_a_backlog_published_over_several_connections_arrives_once_each_in_session_order(
    tmp_path: Path, team_db: TeamDb
) -> None:
    """A backlog goes out over ``connections`` server connections (split by session), and every entry lands
    once; an entry rewritten later in the spool (a session file rewritten) lands as its last version."""
    root = tmp_path / "sessions"
    paths = [session(root, f"/work/p{n % 3}", f"sess-{n:02d}", *(f"q{n}-{k}" for k in range(5))) for n in range(12)]
    db = indexed(tmp_path, root)
    pub = publisher(db, team_db.dsn(), batch_rows=7, connections=3)
    backends: set[int] = set()
    sent = pub._send

    def watched(conn, batch) -> None:  # type: ignore[no-untyped-def]
        backends.add(conn.info.backend_pid)
        sent(conn, batch)

    pub._send = watched  # type: ignore[method-assign]
    done = pub.run()
    assert len(backends) == 3  # the backlog used three connections
    assert (done.sent, done.queued) == (12 * 12, 0)
    # A session rewritten: its entries are indexed (and spooled) again, after the first copies.
    text = paths[4].read_text().replace("q4-3", "q4-3 rewritten")
    paths[4].write_text(text)
    reindex(db, root)
    again = pub.run()
    pub.close()
    assert again.sent == 12
    with team_db.admin() as conn:
        total, distinct = conn.execute(
            "SELECT count(*), count(DISTINCT (session_id, entry_id, ts)) FROM ctxd.messages"
        ).fetchone()
        bodies = [r[0] for r in conn.execute("SELECT body FROM ctxd.messages WHERE body LIKE 'q4-3%'").fetchall()]
        sessions = conn.execute("SELECT count(*) FROM ctxd.sessions").fetchone()[0]
    assert (total, distinct, sessions) == (12 * 12, 12 * 12, 12)
    assert bodies == ["q4-3 rewritten"]


def test_a_part_that_fails_stays_spooled_and_the_committed_parts_leave(tmp_path: Path, team_db: TeamDb) -> None:
    root = tmp_path / "sessions"
    for n in range(6):
        session(root, "/work/parser", f"sess-{n}", *(f"q{n}-{k}" for k in range(3)))
    db = indexed(tmp_path, root)
    pub = publisher(db, team_db.dsn(), batch_rows=10, connections=2)
    sent = pub._send
    calls = [0]

    def flaky(conn, batch) -> None:  # type: ignore[no-untyped-def]
        calls[0] += 1
        if any(m[0] == "sess-3" for m in batch.messages):
            raise RuntimeError("connection dropped")
        sent(conn, batch)

    pub._send = flaky  # type: ignore[method-assign]
    try:
        pub.run()
    except Exception:
        pass
    else:
        raise AssertionError("the failed part was not reported")
    assert calls[0] >= 2
    held = pub.queued()
    assert 0 < held < 6 * 8 and team_db.count() == 6 * 8 - held  # what the server committed left the spool
    assert team_db.count("session_id = 'sess-3'") == 0
    pub._send = sent  # type: ignore[method-assign]
    done = pub.run()
    pub.close()
    assert done.queued == 0 and team_db.count() == 6 * 8
    with team_db.admin() as conn:
        assert conn.execute("SELECT count(DISTINCT (session_id, entry_id, ts)) FROM ctxd.messages").fetchone()[0] == 48
