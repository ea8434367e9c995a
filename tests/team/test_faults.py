"""Never losing or doubling a row: the server stopped in the middle of a sync, and ``ctxd team sync`` killed in
the middle of a batch; in both cases what was sent lands once and what was not waits in the spool."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from conftest import REPO

from ctxd.errors import TeamError

from .conftest import Cluster, TeamDb
from .helpers import indexed, publisher, session


def _many(root: Path, sessions: int, texts: int) -> int:
    """Sessions in one project; the number of entries the index makes of them."""
    for n in range(sessions):
        session(root, "/work/parser", f"sess-{n:03d}", *[f"step {k} of session {n}" for k in range(texts)])
    return sessions * (2 * texts + 2)


def _wait_for(check, timeout: float = 60.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_the_server_stopped_mid_sync_and_started_again_every_row_arrives_once(
    tmp_path: Path, cluster: Cluster, team_db: TeamDb
) -> None:
    root = tmp_path / "sessions"
    total = _many(root, 40, 25)
    db = indexed(tmp_path, root)

    def slow_facts(path: str) -> dict[str, str]:
        time.sleep(0.03)  # a batch takes a while: the server goes down with batches still to send
        return {"path": path}

    pub = publisher(db, team_db.dsn(), batch_rows=40, facts_of=slow_facts)
    failure: list[BaseException] = []

    def run() -> None:
        try:
            pub.run()
        except BaseException as exc:
            failure.append(exc)

    worker = threading.Thread(target=run)
    worker.start()
    _wait_for(lambda: team_db.count() >= 200)
    cluster.server.stop("immediate")  # as a crash: the batch in flight is lost with its transaction
    try:
        worker.join(60)
        assert failure and isinstance(failure[0], TeamError) and failure[0].kind in ("unreachable", "server")
        assert 0 < pub.queued() < total
        with pytest.raises(TeamError) as down:
            pub.run()  # still down: a clear error, the spool intact
        assert down.value.kind == "unreachable" and "cannot reach the team database" in down.value.message
    finally:
        cluster.server.start()
    again = pub.run()
    pub.close()
    assert again.queued == 0 and again.sent > 0
    with team_db.admin() as conn:
        count, distinct = conn.execute(
            "SELECT count(*), count(DISTINCT (session_id, entry_id)) FROM ctxd.messages"
        ).fetchone()
    assert count == distinct == total


def test_team_sync_killed_mid_batch_then_run_again_sends_every_row_once(tmp_path: Path, team_db: TeamDb) -> None:
    root = tmp_path / "sessions"
    total = _many(root, 60, 40)
    data = tmp_path / "data"
    indexed(tmp_path, root)
    config = tmp_path / "config.json"
    config.write_text(
        json.dumps(
            {
                "roots": [str(root)],
                "transcriptRoots": [],
                "archiveRoots": [],
                "opencodeDatabases": [],
                "team": {"dsn": team_db.dsn(), "projects": ["*"], "batchRows": 25},
            }
        )
    )
    env = {**os.environ, "CTXD_CONFIG": str(config), "XDG_DATA_HOME": str(data), "PYTHONPATH": str(REPO)}
    command = [sys.executable, "-P", "-m", "ctxd", "team", "sync", "--json"]
    sync = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        _wait_for(lambda: team_db.count() >= 300 or sync.poll() is not None)
        sync.send_signal(signal.SIGKILL)
    finally:
        sync.wait(30)
    landed = team_db.count()
    assert 0 < landed < total, f"the sync was not killed mid-way ({landed} of {total})"
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["queued"] == 0 and result["sent"] >= total - landed
    with team_db.admin() as conn:
        count, distinct = conn.execute(
            "SELECT count(*), count(DISTINCT (session_id, entry_id)) FROM ctxd.messages"
        ).fetchone()
    assert count == distinct == total
