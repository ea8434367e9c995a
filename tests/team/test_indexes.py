"""The full-text index: GIN on (project, tsv) where the server has ``btree_gin``, GIN on tsv and a B-tree on
(project, ts) where it has not; the planner uses it for a role's (or a filter's) projects either way, and the
answers are the same."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ctxd.team import driver, migrate
from ctxd.team.query import Filters, search

from .conftest import Cluster, TeamDb
from .helpers import indexed, publisher, session

_BRANCH = (
    "EXPLAIN (COSTS OFF) SELECT m.entry_id FROM ctxd.messages m WHERE m.ts >= '2026-11-01' AND m.ts < '2026-12-01'"
    " AND m.tsv @@ websearch_to_tsquery('english', %s) AND m.project = ANY (%s)"
)
"""One month's branch of ``ctxd.search()`` for a role that sees some projects."""


def _indexes(team_db: TeamDb) -> set[str]:
    with team_db.admin() as conn:
        rows = conn.execute("SELECT indexname FROM pg_indexes WHERE schemaname = 'ctxd' AND tablename = 'messages'")
        return {r[0] for r in rows.fetchall()}


@pytest.mark.parametrize("btree_gin", [True, False], ids=["btree_gin", "plain"])
def test_a_projects_search_uses_the_full_text_index_with_or_without_btree_gin(
    tmp_path: Path, cluster: Cluster, team_db: TeamDb, btree_gin: bool
) -> None:
    conn = driver.connect(team_db.dsn())
    said = migrate.init(conn, btree_gin=None if btree_gin else False)  # None: where the server has it (it has)
    reader, _ = cluster.role("reader")
    migrate.grant(conn, reader, ["parser"])
    conn.close()
    if btree_gin:
        assert "full-text index: GIN on (project, tsv) with btree_gin" in said
        assert _indexes(team_db) == {"messages_pkey", "messages_project_tsv"}
    else:
        assert any(line.startswith("full-text index: GIN on tsv and a B-tree on (project, ts)") for line in said)
        assert _indexes(team_db) == {"messages_pkey", "messages_tsv", "messages_project_ts"}
    root = tmp_path / "sessions"
    for n in range(24):
        project = ("parser", "web", "infra", "docs")[n % 4]
        texts = [f"step {k} of job {n} in {project}" for k in range(6)]
        texts[2] = f"the tokenizer drops the trailing newline (run {n})"
        session(root, f"/work/{project}", f"sess-{n:02d}", *texts, ts="2026-11-05T08:00:00Z")
    pub = publisher(indexed(tmp_path, root), team_db.dsn())
    pub.run()
    pub.close()
    with team_db.admin() as admin:  # other teams' history around it, so that the planner's choice is a real one
        admin.execute(
            "INSERT INTO ctxd.messages (session_id, entry_id, ts, project, agent, user_name, machine, line, role,"
            " tool, body) SELECT 'other-' || (i / 100), i::text, '2026-11-10'::timestamptz + i * interval '1 s',"
            " 'team' || (i % 20), 'pi', 'carol', 'm9', i % 100, 'user', '', 'build step ' || i ||"
            " CASE WHEN i % 10 = 0 THEN ' tokenizer' ELSE '' END"
            " FROM generate_series(1, 20000) i"
        )
        admin.execute("VACUUM ANALYZE ctxd.messages")
        plan = "\n".join(r[0] for r in admin.execute(_BRANCH, ("tokenizer", ["parser"])).fetchall())
    if btree_gin:  # one index finds the project's rows holding the word
        assert "Bitmap Index Scan on messages_2026_11_project_tsv_idx" in plan
        assert "Index Cond: ((project = ANY ('{parser}'::text[])) AND (tsv @@" in plan
    else:
        assert "Bitmap Index Scan on messages_2026_11_tsv_idx" in plan
    found: dict[str, Any] = {}
    for who, filters in (("reader", Filters()), ("admin", Filters(projects=["web"]))):
        with driver.connect(team_db.dsn(reader if who == "reader" else "postgres")) as conn:
            hits = search(conn, "tokenizer newline", filters, 50)
        found[who] = sorted((h.project, h.session) for h in hits)
    assert found["reader"] == [("parser", f"sess-{n:02d}") for n in range(0, 24, 4)]
    assert found["admin"] == [("web", f"sess-{n:02d}") for n in range(1, 24, 4)]
