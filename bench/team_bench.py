"""``make bench-team``: team history on a real PostgreSQL server, at a team's scale.

1. Generates N entries (default 10,000,000) into a local history index, as ctxd's indexer writes them (the
   ``files``, ``rows`` and FTS5 ``entries`` tables, the spool's trigger filling ``team_spool``): sessions of 500
   entries over 20 projects and 12 months, text drawn from a Zipf-distributed vocabulary of words, code
   identifiers and paths, with rare error codes planted for the rare queries.
2. Publishes them with :class:`ctxd.team.publish.Publisher` (the daemon's own path: spool, redaction, COPY into
   the staging table, idempotent upsert, month partitions) and reports entries per second.
3. Searches as a role granted 10 of the 20 projects (the grants apply, as for every user), through
   ``ctxd.search()``: rare codes, medium words, common words, two-word queries, phrases, and the same with a
   project or a time filter; p50 and p95 of the whole query (ranking and snippets included), per class and
   overall, first run and repeated.
4. Reports the table's and indexes' size on disk, and the load average at each phase.

The server is started here (tests/helpers/pgserver.py: ``initdb`` + ``pg_ctl`` as the ``postgres`` user, a Unix socket
only) with the settings printed in the header; everything is removed at the end unless ``--keep DIR``, which
also reuses what an earlier run left in DIR: each phase done is noted in DIR/state.json, and a run goes on from
the first one not done (``--generate-only`` stops after generating; a later run publishes and searches). The
server's WAL is bounded by its own settings (``max_wal_size`` 4 GB, a checkpoint at least every 15 minutes): the
10-million-entry run needs about 8 GB for the local index, 16 GB for the database and 4 GB of WAL.

    python bench/team_bench.py [--entries 10000000] [--keep DIR] [--queries 40] [--connections 2]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from helpers.pgserver import SUPERPASSWORD, SUPERUSER, PgServer  # noqa: E402

from ctxd.history.db import connect as connect_history  # noqa: E402
from ctxd.history.extract import Item  # noqa: E402
from ctxd.history.rows import insert_items  # noqa: E402
from ctxd.team import spool  # noqa: E402
from ctxd.team.publish import Publisher  # noqa: E402
from ctxd.team.settings import TeamSettings  # noqa: E402

SETTINGS = {
    "shared_buffers": "1GB",
    "effective_cache_size": "8GB",
    "work_mem": "64MB",
    "maintenance_work_mem": "512MB",
    "max_wal_size": "4GB",
    "min_wal_size": "256MB",
    "checkpoint_timeout": "15min",
    "checkpoint_completion_target": "0.9",
    "wal_compression": "lz4",
    "synchronous_commit": "on",
    "jit": "off",
}
PROJECTS = [f"proj{n:02d}" for n in range(20)]
SESSION_ENTRIES = 500
MONTHS = 12
TARGETS = {"publish": 20_000.0, "p95_ms": 150.0}
ROLES = ("user", "assistant", "toolResult", "assistant")


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def backend_cpu(pid: int) -> float | None:
    """CPU seconds a server backend has used (this machine's /proc; None when it cannot be read)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# --- generated text -------------------------------------------------------------------------------------------


def _words(rng: random.Random, count: int) -> list[str]:
    onsets = [
        "b",
        "c",
        "d",
        "f",
        "g",
        "h",
        "j",
        "k",
        "l",
        "m",
        "n",
        "p",
        "r",
        "s",
        "t",
        "v",
        "w",
        "z",
        "br",
        "cl",
        "dr",
        "fl",
        "gr",
        "pl",
        "pr",
        "st",
        "tr",
        "sh",
        "ch",
        "th",
    ]
    vowels = [*"aeiou", "ai", "ea", "io", "ou"]
    out: set[str] = set()
    while len(out) < count:
        out.add("".join(rng.choice(onsets) + rng.choice(vowels) for _ in range(rng.randint(1, 3))))
    return sorted(out)


class Corpus:
    """Zipf-distributed words (rank r drawn with weight 1/r), identifiers and paths; a pool of message texts."""

    def __init__(self, seed: int = 7, pool: int = 200_000) -> None:
        rng = random.Random(seed)
        words = _words(rng, 30_000)
        rng.shuffle(words)
        idents = [f"{rng.choice(words)}_{rng.choice(words)}" for _ in range(4_000)]
        paths = [f"src/{rng.choice(words)}/{rng.choice(words)}.py" for _ in range(2_000)]
        self.vocab = words + idents + paths
        rng.shuffle(self.vocab)
        cum: list[float] = []
        total = 0.0
        for rank in range(1, len(self.vocab) + 1):
            total += 1.0 / rank
            cum.append(total)
        self.cum = cum
        self.texts = [self._text(rng) for _ in range(pool)]

    def _text(self, rng: random.Random) -> str:
        n = max(3, min(600, int(rng.lognormvariate(3.2, 0.9))))
        return " ".join(rng.choices(self.vocab, cum_weights=self.cum, k=n))

    def word(self, rank: int) -> str:
        return self.vocab[rank]


def generate(db: str, entries: int, target: str, seed: int = 11) -> dict[str, Any]:
    """Write ``entries`` into the history index at ``db`` (spooled by the trigger as they are written)."""
    corpus = Corpus()
    rng = random.Random(seed)
    conn = connect_history(db)
    spool.install(conn, target)
    start = dt.datetime(2025, 12, 1, tzinfo=dt.UTC)
    span = (dt.datetime(2026, 12, 1, tzinfo=dt.UTC) - start).total_seconds()
    codes: list[str] = []
    written = 0
    session_no = 0
    began = time.monotonic()
    while written < entries:
        n = min(SESSION_ENTRIES, entries - written)
        project = PROJECTS[session_no % len(PROJECTS)]
        user = f"user{session_no % 40:02d}"
        path = f"/home/{user}/.pi/agent/sessions/--{project}--/s{session_no:07d}.jsonl"
        sid = f"{session_no:08x}-0000-4000-8000-{rng.getrandbits(48):012x}"
        when = start + dt.timedelta(seconds=rng.random() * span)
        code = f"ERR_{rng.getrandbits(40):010x}"
        codes.append(code)
        items = []
        for k in range(n):
            text = corpus.texts[rng.randrange(len(corpus.texts))]
            if k % 97 == 5:
                text = f"{text} failed with {code}"
            when += dt.timedelta(seconds=rng.randint(1, 90))
            stamp = when.isoformat(timespec="milliseconds").replace("+00:00", "Z")
            role = ROLES[k % 4]
            items.append((k + 2, Item(f"{k:08x}", role, text, stamp, "bash" if role == "toolResult" else "")))
        conn.execute("BEGIN")
        insert_items(conn, path, items)
        conn.execute(
            "INSERT OR REPLACE INTO files VALUES (?, 'pi', ?, ?, 0, 0, 0, 0, 0, 0, x'', 0, ?, ?)",
            (path, sid, f"/home/{user}/src/{project}", n + 1, n + 1),
        )
        conn.execute("COMMIT")
        written += n
        session_no += 1
        if session_no % 2000 == 0:
            rate = written / (time.monotonic() - began)
            print(f"  generated {written:,} entries ({rate:,.0f}/s, load {load()})", flush=True)
    conn.close()
    return {"sessions": session_no, "codes": codes, "seconds": time.monotonic() - began}


# --- the server ------------------------------------------------------------------------------------------------


def server_in(folder: Path) -> PgServer:
    existing = folder / "server"
    if (existing / "data" / "PG_VERSION").exists():
        return PgServer.reuse(existing)
    return PgServer(SETTINGS, root=str(existing))


def _admin(server: PgServer, db: str) -> Any:
    import psycopg

    return psycopg.connect(server.dsn(SUPERUSER, db), autocommit=True)


def setup_database(server: PgServer) -> None:
    from ctxd.team import driver, migrate

    with _admin(server, "postgres") as conn:
        conn.execute("CREATE DATABASE team")
        for role in ("publisher", "reader"):
            conn.execute(f"CREATE ROLE {role} LOGIN PASSWORD 'pw-{role}'")
    conn = driver.connect(server.dsn(SUPERUSER, "team"))
    migrate.init(conn, grants={"publisher": ["*"], "reader": PROJECTS[:10]})
    conn.close()


def refresh(server: PgServer) -> None:
    """Data of an earlier run: this ctxd's functions (``ctxd team init`` again) and no GIN pending list left."""
    from ctxd.team import driver, migrate

    conn = driver.connect(server.dsn(SUPERUSER, "team"))
    migrate.init(conn)
    began = time.monotonic()
    conn.execute(
        "SELECT ctxd.flush_pending(array_agg(m::date))"
        " FROM generate_series('2025-12-01'::date, '2026-12-01', '1 month') m"
    )
    conn.commit()
    conn.close()
    print(f"  reused the data of an earlier run; pending lists merged in {time.monotonic() - began:.1f} s", flush=True)


# --- phases ----------------------------------------------------------------------------------------------------


def publish(server: PgServer, db: str, connections: int = 1) -> dict[str, Any]:
    settings = TeamSettings(
        dsn=server.dsn("publisher", "team"),
        projects=["*"],
        user="bench",
        machine="bench-1",
        batch_rows=20_000,
        connections=connections,
    )
    publisher = Publisher(settings, db)
    queued = publisher.queued()
    print(f"  publishing {queued:,} spooled entries over {connections} connection(s) (load {load()})", flush=True)
    pids = [conn.info.backend_pid for conn in publisher.connections(connections)]
    server_before = [backend_cpu(pid) for pid in pids]
    began, cpu = time.monotonic(), time.process_time()
    batches = [0]

    def progress() -> bool:
        batches[0] += 1
        if batches[0] % 25 == 0:
            sent = batches[0] * settings.batch_rows * connections
            print(f"  {sent:,} sent after {time.monotonic() - began:.0f} s (load {load()})", flush=True)
        return False

    done = publisher.run(stop=progress)
    seconds = time.monotonic() - began
    client = time.process_time() - cpu
    server_after = [backend_cpu(pid) for pid in pids]
    publisher.close()
    used = [None if a is None or b is None else a - b for a, b in zip(server_after, server_before, strict=True)]
    server_cpu = None if None in used else sum(u for u in used if u is not None)
    return {
        "entries": done.sent,
        "seconds": seconds,
        "rate": done.sent / seconds,
        "load": load(),
        "queued": done.queued,
        "connections": connections,
        "client_us": client / max(1, done.sent) * 1e6,
        "server_us": None if server_cpu is None else server_cpu / max(1, done.sent) * 1e6,
    }


def queries(corpus: Corpus, codes: list[str], count: int, seed: int = 3) -> list[tuple[str, str, dict[str, Any]]]:
    rng = random.Random(seed)
    out: list[tuple[str, str, dict[str, Any]]] = []
    recent = dt.datetime(2026, 9, 1, tzinfo=dt.UTC)
    for _ in range(count):
        out.append(("rare code", rng.choice(codes), {}))
        out.append(("medium word", corpus.word(rng.randint(1_000, 5_000)), {}))
        out.append(("common word", corpus.word(rng.randint(5, 60)), {}))
        out.append(("two words", f"{corpus.word(rng.randint(50, 500))} {corpus.word(rng.randint(50, 500))}", {}))
        out.append(("phrase", f'"{corpus.word(rng.randint(10, 200))} {corpus.word(rng.randint(10, 200))}"', {}))
        out.append(("word + project", corpus.word(rng.randint(20, 2_000)), {"projects": [rng.choice(PROJECTS[:10])]}))
        out.append(("word + since", corpus.word(rng.randint(20, 2_000)), {"since": recent}))
    return out


def search(server: PgServer, planned: list[tuple[str, str, dict[str, Any]]]) -> dict[str, Any]:
    import psycopg

    from ctxd.team.query import Filters
    from ctxd.team.query import search as team_search

    conn = psycopg.connect(server.dsn("reader", "team"))
    pid = conn.info.backend_pid
    cpu_before = backend_cpu(pid)
    rounds: list[dict[str, list[float]]] = []
    hits: dict[str, list[int]] = {}
    for _ in range(2):
        times: dict[str, list[float]] = {}
        for kind, query, extra in planned:
            filters = Filters(projects=extra.get("projects"), since=extra.get("since"))
            began = time.perf_counter()
            found = team_search(conn, query, filters, 20)
            times.setdefault(kind, []).append((time.perf_counter() - began) * 1000)
            hits.setdefault(kind, []).append(len(found))
        rounds.append(times)
    cpu_after = backend_cpu(pid)
    conn.close()
    cpu = None if cpu_before is None or cpu_after is None else (cpu_after - cpu_before) / (2 * len(planned)) * 1000
    return {"rounds": rounds, "hits": hits, "load": load(), "server_ms": cpu}


def sizes(server: PgServer) -> dict[str, int]:
    with _admin(server, "team") as conn:
        row = conn.execute(
            """
            SELECT sum(pg_relation_size(c.oid)) FILTER (WHERE c.relkind = 'r'),
                   sum(pg_relation_size(c.reltoastrelid)) FILTER (WHERE c.relkind = 'r' AND c.reltoastrelid <> 0),
                   sum(pg_relation_size(c.oid)) FILTER (WHERE c.relkind = 'i' AND c.relname LIKE '%tsv%'),
                   sum(pg_relation_size(c.oid)) FILTER (WHERE c.relkind = 'i' AND c.relname LIKE '%pkey%'),
                   sum(pg_relation_size(c.oid)) FILTER (WHERE c.relkind = 'i'
                                                        AND c.relname ~ 'project_ts(_idx)?$'),
                   pg_database_size('team')
            FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
            WHERE n.nspname = 'ctxd' AND c.relname LIKE 'messages%'
            """
        ).fetchone()
        count = conn.execute("SELECT count(*) FROM ctxd.messages").fetchone()[0]
    names = ("heap", "toast", "gin", "pkey", "project_ts", "database")
    return {"rows": int(count), **{k: int(v or 0) for k, v in zip(names, row, strict=True)}}


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def report(
    entries: int, made: dict[str, Any] | None, pub: dict[str, Any] | None, found: dict[str, Any], size: dict[str, int]
) -> None:
    mb = 1 << 20
    print()
    print(f"team history on PostgreSQL 15: {size['rows']:,} entries ({entries:,} asked)")
    print(f"server: {', '.join(f'{k}={v}' for k, v in SETTINGS.items())}; 2 cores shared")
    if made:
        print(f"generated into the local index: {made['sessions']:,} sessions in {made['seconds']:.0f} s")
    if pub:
        ok = "met" if pub["rate"] >= TARGETS["publish"] else "MISSED"
        print(
            f"publish: {pub['entries']:,} entries over {pub.get('connections', 1)} connection(s) in"
            f" {pub['seconds']:.1f} s = {pub['rate']:,.0f} entries/s"
            f" (target >= {TARGETS['publish']:,.0f}: {ok}); load average after: {pub['load']}"
        )
        if pub.get("server_us") is not None:
            cpu = pub["client_us"] + pub["server_us"]
            print(
                f"  CPU per entry: client {pub['client_us']:.1f} us (read, redact, COPY), server"
                f" {pub['server_us']:.1f} us (tsvector, GIN, keys, upsert): {1e6 / pub['server_us']:,.0f} entries/s"
                f" for one busy server core, {2e6 / cpu:,.0f} for both cores shared by client and server"
            )
    for n, times in enumerate(found["rounds"]):
        every = [t for ts in times.values() for t in ts]
        ok = "met" if _pct(every, 0.95) <= TARGETS["p95_ms"] else "MISSED"
        label = "first run" if n == 0 else "repeated"
        print(
            f"search ({label}): p50 {_pct(every, 0.5):.1f} ms, p95 {_pct(every, 0.95):.1f} ms over {len(every)}"
            f" queries (target p95 <= {TARGETS['p95_ms']:.0f} ms: {ok})"
        )
        for kind, ts in times.items():
            mean_hits = statistics.mean(found["hits"][kind])
            print(
                f"  {kind:15s} p50 {_pct(ts, 0.5):7.1f} ms  p95 {_pct(ts, 0.95):7.1f} ms  max {max(ts):7.1f} ms"
                f"  hits/query {mean_hits:.1f}"
            )
    print(f"  load average after searching: {found['load']}")
    if found.get("server_ms") is not None:
        print(f"  server CPU per query: {found['server_ms']:.1f} ms (mean over both runs)")
    print(
        f"size on disk: table {size['heap'] / mb:,.0f} MB + TOAST {size['toast'] / mb:,.0f} MB; indexes: GIN (tsvector)"
        f" {size['gin'] / mb:,.0f} MB, primary key {size['pkey'] / mb:,.0f} MB, (project, ts)"
        f" {size['project_ts'] / mb:,.0f} MB; database {size['database'] / mb:,.0f} MB"
        f" ({size['database'] / max(1, size['rows']):.0f} bytes per entry)"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--entries", type=int, default=10_000_000)
    parser.add_argument("--queries", type=int, default=40, help="queries per class (7 classes)")
    parser.add_argument("--keep", help="keep (and reuse) the server and the index in this folder")
    parser.add_argument("--generate-only", action="store_true", help="stop after generating (with --keep)")
    parser.add_argument("--connections", type=int, default=2, help="publishing connections (team.connections)")
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args()
    folder = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="ctxd-team-bench-"))
    folder.mkdir(parents=True, exist_ok=True)
    os.chmod(folder, 0o755)
    os.environ["PGPASSFILE"] = str(folder / "pgpass")
    (folder / "pgpass").write_text(
        f"*:*:*:{SUPERUSER}:{SUPERPASSWORD}\n*:*:*:publisher:pw-publisher\n*:*:*:reader:pw-reader\n"
    )
    os.chmod(folder / "pgpass", 0o600)
    server = server_in(folder)
    db = str(folder / "history.sqlite3")
    state_file = folder / "state.json"
    state = json.loads(state_file.read_text()) if state_file.exists() else {}
    if state and state.get("entries") != args.entries:
        server.stop()
        raise SystemExit(f"{folder} holds a run of {state.get('entries')} entries: use another --keep folder")
    made = pub = None
    try:
        print(f"ctxd team bench in {folder} (load {load()})", flush=True)
        if not state.get("generated"):  # each phase is kept in state.json: a later run goes on from there
            settings = TeamSettings(
                dsn=server.dsn("publisher", "team"), projects=["*"], user="bench", machine="bench-1"
            )
            made = generate(db, args.entries, Publisher(settings, db).target)
            state = {
                "entries": args.entries,
                "generated": True,
                "made": {k: v for k, v in made.items() if k != "codes"},
                "codes": made["codes"][:: max(1, len(made["codes"]) // 2000)],
            }
            state_file.write_text(json.dumps(state))
        if args.generate_only:
            return 0
        if "publish" not in state:
            setup_database(server)
            pub = publish(server, db, args.connections)
            state["publish"] = pub
            state_file.write_text(json.dumps(state))
        else:
            refresh(server)
        corpus = Corpus()
        found = search(server, queries(corpus, state["codes"], args.queries))
        size = sizes(server)
        report(args.entries, made or state.get("made"), pub or state.get("publish"), found, size)
        if args.json:
            Path(args.json).write_text(
                json.dumps({"publish": pub or state.get("publish"), "search": found, "size": size})
            )
    finally:
        server.stop()
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
