"""Every search query is answered (issue 30): a query FTS5 rejects is searched as plain words, never
an internal error; through the service in process, a real ``ctxd serve`` and ``ctxd search``.
(``ctxd mcp``'s tool: tests/mcp_tools/test_mcp_stdio.py.)"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from helpers.factories import assistant, chain, header, user, write
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from ctxd.service import protocol as p
from ctxd.service.config import Config
from ctxd.service.service import Service

from .harness import REPO, encode, server_env
from .test_fuzz import SyncDaemon

TEXT = 'Please fix the "parser" bug: NEAR(x) fails, and * or ( crash the lexer.'
REJECTED = ['fix the "parser', "*", '"', "(", "a AND", "NEAR/3", "lexer:", "x\x00y", "\ud800", "-fix", "^ fix"]
"""Queries SQLite's FTS5 rejects (the first three are the issue's)."""
SYNTAX = [*"\"*()^:-+{},.\\/'", "AND", "OR", "NOT", "NEAR", "text:", " ", "\t", "\x00", "\ud800"]
queries = st.one_of(
    st.sampled_from(REJECTED),
    st.text(max_size=40),
    st.lists(
        st.sampled_from(SYNTAX) | st.sampled_from(["fix", "parser", "lexer"]) | st.text(max_size=3), max_size=12
    ).map("".join),
)


def _session(root: Path) -> Path:
    entries = chain(lambda p_: user(p_, TEXT), lambda p_: assistant(p_, "Looking at the lexer now"))
    path = root / "proj" / "s.jsonl"
    path.parent.mkdir(parents=True)
    write(path, entries, header(id="sess-queries", cwd="/proj"))
    return path


def test_every_query_through_the_service_is_answered(tmp_path: Path) -> None:
    root = tmp_path / "root"
    _session(root)
    service = Service(
        Config(roots=[str(root)], transcript_roots=[], archive_roots=[], opencode_databases=[], watch=False)
    )
    service.history_indexer(str(tmp_path / "history.sqlite3"))
    loop = asyncio.new_event_loop()

    def search(query: str) -> dict[str, Any]:
        result: dict[str, Any] = loop.run_until_complete(
            service.history_search(p.HistorySearchParams(query, None, 20, 5000))
        )
        return result

    try:
        hits = search(REJECTED[0])["hits"]
        assert hits and "parser" in hits[0]["snippet"]  # searched as the words it holds
        assert search("*")["hits"] == [] and search('"')["hits"] == []  # no word in them: nothing found

        @settings(max_examples=200, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
        @given(query=queries)
        def answered(query: str) -> None:
            result = search(query)
            assert result["query"] == query and isinstance(result["hits"], list)

        answered()
    finally:
        loop.run_until_complete(service.close())
        loop.close()


def test_every_query_through_the_daemon_is_answered(tmp_path: Path) -> None:
    """history/search answers every query with hits, or -32602 for what its params forbid (an
    empty query, one over 4,096 characters); never an internal error."""
    root = tmp_path / "root"
    _session(root)
    daemon = SyncDaemon()
    try:
        options = {"roots": [str(root)], "transcriptRoots": [], "archiveRoots": [], "opencodeDatabases": []}
        init = daemon.call("initialize", {"capabilities": {}, "initializationOptions": options})
        assert "result" in init, init
        daemon.send_bytes(encode({"jsonrpc": "2.0", "method": "initialized", "params": {}}))
        first = daemon.call(p.HISTORY_SEARCH, {"query": REJECTED[0], "waitMs": 5000})
        assert "parser" in first["result"]["hits"][0]["snippet"], first

        @settings(
            max_examples=150,
            deadline=None,
            database=None,
            phases=[Phase.explicit, Phase.generate],
            suppress_health_check=[HealthCheck.too_slow],
        )
        @given(query=queries | st.just("x" * 5000))
        def answered(query: str) -> None:
            answer = daemon.call(p.HISTORY_SEARCH, {"query": query})
            if "error" in answer:
                assert answer["error"]["code"] == -32602, (query, answer)
                assert not query or len(query) > 4096, (query, answer)
            else:
                assert isinstance(answer["result"]["hits"], list), answer

        try:
            answered()
        except BaseException:
            print(daemon.tail())
            raise
        assert daemon.close() == 0
    finally:
        if daemon.process.poll() is None:
            daemon.process.kill()
            daemon.process.wait()


def test_cli_search_takes_what_fts5_rejects_as_words(tmp_path: Path) -> None:
    """The issue's three queries ended in "internal error: OperationalError" (exit 70)."""
    root = tmp_path / "root"
    path = _session(root)
    env = server_env(XDG_DATA_HOME=str(tmp_path / "data"))
    for query in REJECTED[:3]:
        command = [sys.executable, "-P", "-m", "ctxd", "search", query, "--root", str(root), "--json"]
        out = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60, cwd=REPO)
        assert out.returncode == 0, (query, out.stderr)
        assert out.stderr == ""
        hits = json.loads(out.stdout)["hits"]
        if query == REJECTED[0]:  # "*" and '"' hold no word: nothing to find, and no error
            assert hits[0]["session"]["path"] == str(path), query
