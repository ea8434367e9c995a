"""Fault tests for the session store with real processes: writers killed mid-append, several writers
at once, and a reader refreshing while others write.

Writers are separate Python processes running the helper script below (it imports ctxd from the
repository).  Each prints the ids of a batch only after ``append()`` returned, so every printed id
was acknowledged.  To make a SIGKILL likely to land in the middle of a line, a writer can replace
the store's ``write_all`` with one that issues the same bytes as several ``write()`` calls with
short pauses between them (a short write, as a slow disk or a signal would cause; the final
newline of each line is its own write, so a kill can also land between an object and its newline).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from ctxd.client import CtxdClient
from ctxd.store.create import create_session
from ctxd.store.session_file import SessionFile
from ctxd.tree.session import Session

REPO = str(Path(__file__).resolve().parents[2])

pytestmark = pytest.mark.slow

WRITER = r'''
import json, os, random, sys, time

import ctxd.store.session_file as sf
from ctxd.store.session_file import Durability, SessionFile

cfg = json.loads(sys.argv[1])
rng = random.Random(cfg["seed"])

if cfg.get("chunk"):
    chunk = cfg["chunk"]
    pause = cfg.get("pause", 0.0)

    def slow_write_all(fd, data):
        """The same bytes as write_all, as many short writes: pieces of `chunk` bytes, and each
        line's newline on its own."""
        pieces = []
        for line in bytes(data).split(b"\n")[:-1]:
            pieces.extend(line[k : k + chunk] for k in range(0, len(line), chunk))
            pieces.append(b"\n")
        for n, piece in enumerate(pieces):
            view = memoryview(piece)
            while view:
                view = view[os.write(fd, view):]
            if pause and n + 1 < len(pieces):
                time.sleep(pause)

    sf.write_all = slow_write_all

f = SessionFile.open(
    cfg["path"], durability=Durability[cfg.get("durability", "FLUSH")], tail_grace=cfg.get("grace", 0.05)
)
tag = cfg["tag"]


def out(*parts):
    sys.stdout.write(" ".join(parts) + "\n")
    sys.stdout.flush()


if cfg.get("probe"):
    # The first append of a new writer: it must repair whatever tail a killed writer left.
    (probe,) = f.append([{"type": "custom", "customType": "test.probe", "data": {"tag": tag}}])
    out("PROBE", probe, json.dumps([d.to_json() for d in f.diagnostics]))
out("READY")
if cfg.get("go"):
    while not os.path.exists(cfg["go"]):
        time.sleep(0.001)

count = cfg.get("count")  # None: until killed
explicit = cfg.get("explicit", False)
parent = None
seq = 0
while count is None or seq < count:
    k = rng.choice([1, 1, 1, 2, 3, 4])
    if count is not None:
        k = min(k, count - seq)
    batch = []
    for _ in range(k):
        if rng.random() < cfg.get("big", 0.2):
            size = rng.randint(50_000, 200_000)
        else:
            size = rng.randint(10, 400)
        text = rng.randbytes(size // 2).hex()
        if rng.random() < 0.3:
            text += " caf\u00e9 \u6f22\u5b57 \U0001f600"
        message = {"role": "user", "content": text, "timestamp": seq}
        batch.append({"type": "message", "message": message, "test": {"tag": tag, "seq": seq}})
        seq += 1
    if explicit:
        ids = f.append(batch, parent_id=parent)
        parent = ids[-1]
    else:
        ids = f.append(batch)
    out("ACK", *ids)
    if cfg.get("sleep"):
        time.sleep(rng.uniform(0, cfg["sleep"]))
f.refresh()
known = [h.id for h in f.heads]
out("DIAG", json.dumps([d.to_json() for d in f.diagnostics]))
out("DONE", json.dumps(known))
'''


class Writer:
    """One writer process and what it printed (collected by a thread so its pipe never fills)."""

    def __init__(self, script: Path, **cfg: Any) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
        self.proc = subprocess.Popen(
            [sys.executable, str(script), json.dumps(cfg)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
        self.lines: list[str] = []
        self.ready = threading.Event()
        self._stderr = b""
        self._out = threading.Thread(target=self._read, daemon=True)
        self._err = threading.Thread(target=self._read_err, daemon=True)
        self._out.start()
        self._err.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            line = raw.decode().rstrip("\n")
            self.lines.append(line)
            if line == "READY":
                self.ready.set()
        self.ready.set()  # EOF: don't leave a waiter hanging

    def _read_err(self) -> None:
        assert self.proc.stderr is not None
        self._stderr = self.proc.stderr.read()

    def wait_ready(self, timeout: float = 30) -> None:
        assert self.ready.wait(timeout), "writer never became ready"
        assert self.proc.poll() is None or "READY" in self.lines, self.stderr()

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.finish(expect_ok=False)

    def finish(self, *, expect_ok: bool = True, timeout: float = 60) -> None:
        self.proc.wait(timeout)
        self._out.join(timeout)
        self._err.join(timeout)
        if expect_ok:
            assert self.proc.returncode == 0, self.stderr()

    def stderr(self) -> str:
        return self._stderr.decode(errors="replace")

    @property
    def acked(self) -> list[str]:
        return [i for line in self.lines if line.startswith("ACK ") for i in line.split()[1:]]

    @property
    def probe(self) -> tuple[str, list[dict[str, Any]]] | None:
        for line in self.lines:
            if line.startswith("PROBE "):
                _, probe_id, diags = line.split(" ", 2)
                return probe_id, json.loads(diags)
        return None

    @property
    def diagnostics(self) -> list[dict[str, Any]]:
        for line in self.lines:
            if line.startswith("DIAG "):
                return list(json.loads(line[5:]))
        return []

    @property
    def known(self) -> list[str]:
        for line in self.lines:
            if line.startswith("DONE "):
                return list(json.loads(line[5:]))
        raise AssertionError("no DONE line: " + self.stderr())


@pytest.fixture
def writer_script(tmp_path: Path) -> Path:
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    return script


def split_lines(data: bytes) -> tuple[list[bytes], bytes]:
    """Complete lines (without newlines) and the partial tail after the last newline."""
    *complete, tail = data.split(b"\n")
    return complete, tail


def assert_complete_lines_are_single_objects(data: bytes) -> list[dict[str, Any]]:
    complete, _ = split_lines(data)
    objects = []
    for number, line in enumerate(complete, start=1):
        try:
            obj = json.loads(line)  # raises "Extra data" if two objects share the line
        except ValueError as exc:
            raise AssertionError(f"line {number} is not one JSON object: {exc}: {line[:120]!r}") from exc
        assert isinstance(obj, dict), f"line {number} is not an object"
        objects.append(obj)
    assert objects and objects[0]["type"] == "session"
    return objects


def parse_lines(data: bytes, torn: bytes) -> tuple[list[tuple[int, dict[str, Any]]], list[int]]:
    """The complete lines as (line number, object), and the numbers of the lines that are not one
    JSON object: each must be a torn line terminated in place, whose copy is in the sidecar."""
    complete, _ = split_lines(data)
    set_aside = set(torn.split(b"\n"))
    objects: list[tuple[int, dict[str, Any]]] = []
    malformed: list[int] = []
    for number, line in enumerate(complete, start=1):
        try:
            obj = json.loads(line)
        except ValueError:
            assert line in set_aside, f"line {number} is malformed but was not set aside: {line[:120]!r}"
            malformed.append(number)
            continue
        assert isinstance(obj, dict), f"line {number} is not an object"
        objects.append((number, obj))
    assert objects and objects[0][1]["type"] == "session"
    return objects, malformed


def assert_served_consistently(sf: SessionFile, objects: list[dict[str, Any]]) -> None:
    """The index serves exactly the complete lines, one entry per line, each body intact."""
    entries = objects[1:]
    assert [h.id for h in sf.heads] == [e["id"] for e in entries]
    assert list(sf.lines) == list(range(2, len(entries) + 2))  # one line each, none holding two objects
    assert [d for d in sf.diagnostics if d.severity != "info"] == []
    for i, body in enumerate(sf.entries(range(len(sf)))):
        assert body == entries[i]


def assert_served_around_torn_lines(
    sf: SessionFile, objects: list[tuple[int, dict[str, Any]]], malformed: list[int]
) -> None:
    """The index serves exactly the whole lines, one entry per line, each body intact; each torn
    line left in place is reported with its line number."""
    entries = objects[1:]
    assert [h.id for h in sf.heads] == [e["id"] for _, e in entries]
    assert list(sf.lines) == [n for n, _ in entries]
    assert sorted({d.line for d in sf.diagnostics if d.severity != "info"}) == malformed
    for i, body in enumerate(sf.entries(range(len(sf)))):
        assert body == entries[i][1]


def assert_linear_chain(entries: list[dict[str, Any]]) -> None:
    """A single writer at a time, always appending at the leaf: one chain in file order."""
    parent = None
    for e in entries:
        assert e["parentId"] == parent, f"{e['id']} hangs off {e['parentId']}, expected {parent}"
        parent = e["id"]


def _sidecar(path: str) -> bytes:
    return Path(path + ".torn").read_bytes() if os.path.exists(path + ".torn") else b""


def check_repair(path: str, before: bytes, sidecar_before: bytes, w: Writer) -> str:
    """The writer's first append (its probe) dealt correctly with the tail in ``before``: after
    the grace period it terminated the tail in place with one newline (nothing moved, nothing
    truncated), and recorded a torn one in the sidecar.  Returns which case it was."""
    assert w.probe is not None, w.stderr()
    probe_id, diags = w.probe
    messages = " ".join(d["message"] for d in diags)
    after = Path(path).read_bytes()
    _, tail = split_lines(before)
    old_end = len(before) - len(tail)
    assert after[: len(before)] == before  # nothing anyone wrote was touched
    tail_obj: Any = None
    if tail:
        try:
            tail_obj = json.loads(tail)
        except ValueError:
            tail_obj = None
    if not tail:
        kind = "clean"
        probe_at = old_end
        assert "torn" not in messages and "completed" not in messages
        assert _sidecar(path) == sidecar_before
    elif isinstance(tail_obj, dict):
        kind = "completed"
        assert after[old_end : old_end + len(tail) + 1] == tail + b"\n"
        probe_at = old_end + len(tail) + 1
        assert "completed" in messages
        assert _sidecar(path) == sidecar_before
    else:
        kind = "torn"
        assert after[old_end : old_end + len(tail) + 1] == tail + b"\n"  # terminated where it was
        probe_at = old_end + len(tail) + 1
        assert "torn" in messages
        assert _sidecar(path) == sidecar_before + tail + b"\n"  # and a copy kept for the record
    probe_line = after[probe_at : after.index(b"\n", probe_at)]
    assert json.loads(probe_line)["id"] == probe_id
    return kind


def _kill_rounds(script: Path, path: str, rounds: int, seed: int) -> dict[str, int]:
    rng = random.Random(seed)
    acked: list[str] = []
    stats = {"torn": 0, "completed": 0, "clean": 0}
    watcher = Session.open(path)  # a long-lived reader: refreshed across kills and repairs
    for r in range(rounds):
        before = Path(path).read_bytes()
        sidecar_before = _sidecar(path)
        cfg: dict[str, Any] = {"path": path, "tag": f"r{r}", "seed": rng.getrandbits(32), "probe": True}
        if rng.random() < 0.75:
            cfg.update(chunk=rng.choice([2048, 8192, 32768]), pause=0.001)
        else:
            cfg.update(sleep=0.002)  # plain writes: a kill lands between or (rarely) inside them
        w = Writer(script, **cfg)
        w.wait_ready()
        time.sleep(rng.uniform(0.0, 0.12))
        w.kill()

        # (b) for the previous kill: this writer's first append repaired what that one left.
        stats[check_repair(path, before, sidecar_before, w)] += 1

        # (a) Read-only open: changes nothing, serves every acknowledged id and only whole lines.
        after = Path(path).read_bytes()
        sf = SessionFile.open(path)
        assert Path(path).read_bytes() == after
        objects, malformed = parse_lines(after, _sidecar(path))
        assert_served_around_torn_lines(sf, objects, malformed)
        assert_linear_chain([o for _, o in objects[1:]])
        acked.extend(w.acked)
        missing = [i for i in acked if i not in sf.index]
        assert not missing, f"acknowledged ids lost: {missing}"
        order = [sf.index[i] for i in w.acked]
        assert order == sorted(order)
        # The watcher followed along incrementally (nothing is ever truncated any more).
        result, _ = watcher.refresh()
        assert not result.reloaded
        assert [h.id for h in watcher.file.heads] == [h.id for h in sf.heads]
        assert watcher.tree.parent == Session(sf).tree.parent

    # (b) for the last kill: a last writer repairs what it left; then every line is whole.
    before = Path(path).read_bytes()
    sidecar_before = _sidecar(path)
    final = Writer(script, path=path, tag="final", seed=seed, probe=True, count=1)
    final.finish()
    stats[check_repair(path, before, sidecar_before, final)] += 1
    data = Path(path).read_bytes()
    assert data.endswith(b"\n")
    objects, _ = parse_lines(data, _sidecar(path))
    assert_linear_chain([o for _, o in objects[1:]])
    ids = [o["id"] for _, o in objects[1:]]
    assert len(ids) == len(set(ids))
    assert set(acked) <= set(ids)
    assert SessionFile.open(path).pending_bytes() == 0
    return stats


ROUNDS = 9
"""Kills per file; four files are worked on at once."""


def test_sigkill_mid_append_loses_nothing_acknowledged_and_next_writer_repairs(
    tmp_path: Path, writer_script: Path
) -> None:
    files = [create_session(str(tmp_path), "/proj", path=str(tmp_path / f"s{k}.jsonl")) for k in range(4)]
    seed = random.randrange(1 << 32)
    with ThreadPoolExecutor(max_workers=len(files)) as pool:
        futures = [pool.submit(_kill_rounds, writer_script, p, ROUNDS, seed + k) for k, p in enumerate(files)]
        stats = []
        for f in futures:
            try:
                stats.append(f.result())
            except BaseException as exc:
                exc.add_note(f"kill rounds seeded with {seed} (+ file number)")
                raise
    total = {key: sum(s[key] for s in stats) for key in stats[0]}
    assert sum(total.values()) == len(files) * (ROUNDS + 1)  # the kills, and a final repair per file
    # The point of the test: some kills did land mid-line.
    assert total["torn"] > 0, (total, seed)


def test_concurrent_writers_never_interleave_and_keep_their_chains(tmp_path: Path, writer_script: Path) -> None:
    path = create_session(str(tmp_path), "/proj", path=str(tmp_path / "s.jsonl"))
    go = str(tmp_path / "go")
    per = 300
    modes = ["FLUSH", "FLUSH", "FSYNC_BATCH", "FSYNC"]
    writers = [
        Writer(
            writer_script,
            path=path,
            tag=f"w{k}",
            seed=k,
            count=per,
            explicit=True,
            go=go,
            big=0.04,
            durability=modes[k],
            **({"chunk": 8192, "pause": 0.0002} if k % 2 else {}),
        )
        for k in range(4)
    ]
    for w in writers:
        w.wait_ready()
    Path(go).touch()
    for w in writers:
        w.finish()

    data = Path(path).read_bytes()
    assert data.endswith(b"\n")
    objects = assert_complete_lines_are_single_objects(data)
    entries = objects[1:]
    assert len(entries) == 4 * per
    ids = [e["id"] for e in entries]
    assert len(set(ids)) == len(ids)
    sf = SessionFile.open(path)
    assert_served_consistently(sf, objects)
    for k, w in enumerate(writers):
        mine = [e for e in entries if e["test"]["tag"] == f"w{k}"]
        assert [e["id"] for e in mine] == w.acked  # all acknowledged, once, in order
        assert [e["test"]["seq"] for e in mine] == list(range(per))
        parent = None
        for e in mine:
            assert e["parentId"] == parent
            parent = e["id"]
        # Each writer's own index, caught up under the lock, agrees with the file.
        known = w.known
        assert known == ids[: len(known)] and len(known) >= per


def test_refreshing_reader_never_serves_a_partial_line(tmp_path: Path, writer_script: Path) -> None:
    path = create_session(str(tmp_path), "/proj", path=str(tmp_path / "s.jsonl"))
    go = str(tmp_path / "go")
    writers = [
        Writer(
            writer_script,
            path=path,
            tag=f"w{k}",
            seed=100 + k,
            count=120,
            go=go,
            big=0.15,
            chunk=4096,
            pause=0.0005,
            sleep=0.003,
        )
        for k in range(2)
    ]
    for w in writers:
        w.wait_ready()
    reader = Session.open(path)
    seen: list[str] = []
    partial_seen = 0
    Path(go).touch()
    deadline = time.monotonic() + 60
    fd = os.open(path, os.O_RDONLY)
    try:
        while True:
            running = any(w.proc.poll() is None for w in writers)
            result, new = reader.refresh()
            sf = reader.file
            assert not result.reloaded
            assert new == result.added
            for i in result.added:
                raw = os.pread(fd, sf.lengths[i] + 1, sf.offsets[i])
                assert raw.endswith(b"\n"), "served a line that has no newline yet"
                body = json.loads(raw)  # exactly one object
                assert body == sf.entry(i) and body["id"] == sf.heads[i].id
                seen.append(body["id"])
            assert list(sf.lines) == list(range(2, len(sf) + 2))
            if sf.pending_bytes():
                partial_seen += 1
            if not running:
                break
            assert time.monotonic() < deadline
    finally:
        os.close(fd)
    for w in writers:
        w.finish()
    assert len(reader.refresh()[0].added) == 0
    fresh = Session.open(path)
    assert seen == [h.id for h in fresh.file.heads]  # each entry served once, in file order
    assert [h.id for h in reader.file.heads] == [h.id for h in fresh.file.heads]
    assert reader.file.offsets == fresh.file.offsets and reader.file.lines == fresh.file.lines
    assert reader.tree.parent == fresh.tree.parent and reader.tree.depth == fresh.tree.depth
    assert {i for w in writers for i in w.acked} == set(fresh.file.index)
    assert sum(len(w.acked) for w in writers) == len(fresh.file) == 240
    assert reader.file.pending_bytes() == 0
    assert partial_seen > 0  # the reader did look while a line was half written


PI_WRITER = r'''
"""An agent that appends the way pi does: no lock, O_APPEND, one write() per line (or, with
"pieces", a line in several write() calls), each entry parented on its own previous one."""
import json, math, os, random, sys, time

cfg = json.loads(sys.argv[1])
rng = random.Random(cfg["seed"])
tag = cfg["tag"]
fd = os.open(cfg["path"], os.O_WRONLY | os.O_APPEND)
sys.stdout.write("READY\n")
sys.stdout.flush()
while not os.path.exists(cfg["go"]):
    time.sleep(0.001)
parent = None
for seq in range(cfg["count"]):
    size = int(math.exp(rng.uniform(math.log(50), math.log(60_000))))
    entry = {
        "type": "message",
        "id": f"{tag}-{seq:05d}",
        "parentId": parent,
        "timestamp": "2026-01-01T00:00:00.000Z",
        "message": {"role": "user", "content": "", "timestamp": seq},
        "test": {"tag": tag, "seq": seq},
    }
    bare = len(json.dumps(entry, separators=(",", ":")))
    entry["message"]["content"] = "p" * max(0, size - bare - 1)
    line = json.dumps(entry, separators=(",", ":")).encode() + b"\n"
    pieces = cfg.get("pieces", 1)
    cuts = sorted(rng.sample(range(1, len(line)), min(pieces - 1, len(line) - 1))) if pieces > 1 else []
    bounds = [0, *cuts, len(line)]
    for k in range(len(bounds) - 1):
        if k:
            time.sleep(cfg.get("gap", 0))
        piece = line[bounds[k] : bounds[k + 1]]
        assert os.write(fd, piece) == len(piece)  # a regular file takes a write whole
    parent = entry["id"]
    if cfg.get("pace"):
        time.sleep(cfg["pace"])
sys.stdout.write("DONE\n")
'''


@pytest.mark.parametrize(
    ("variant", "pi_cfg", "pi_writers", "per_pi", "per_ctxd"),
    [
        ("full speed", {}, 2, 1500, 250),
        ("paced 2 ms", {"pace": 0.002}, 2, 400, 250),
        ("lines in pieces", {"pieces": 3, "gap": 0.0005}, 1, 1000, 250),
    ],
)
def test_unlocked_agents_and_ctxd_writers_lose_nothing(
    tmp_path: Path,
    writer_script: Path,
    variant: str,
    pi_cfg: dict[str, Any],
    pi_writers: int,
    per_pi: int,
    per_ctxd: int,
) -> None:
    """pi-style writers (no lock, one write() per line, 50 B to 60 KB) and ctxd writers (separate
    processes appending through SessionFile, as two daemons would) on one file: afterwards every
    entry of every writer is there exactly once, every line is one JSON object, none is blank.

    With a writer that writes a line in several pieces, only one such writer runs: two of them (or
    one and any other unlocked writer) garble each other's lines without ctxd's help.  ctxd's wait
    keeps it from ever writing after a piece it saw; the microseconds between its last check and its
    write are healed by rule 4 (ctxd.store.tail), whose glued pieces stay as malformed lines: they
    are counted and must each be one that a ctxd writer reported.
    """
    path = create_session(str(tmp_path), "/proj", path=str(tmp_path / "s.jsonl"))
    go = str(tmp_path / "go")
    pi_script = tmp_path / "pi_writer.py"
    pi_script.write_text(PI_WRITER)
    pis = [Writer(pi_script, path=path, tag=f"pi{k}", seed=k, count=per_pi, go=go, **pi_cfg) for k in range(pi_writers)]
    ctxds = [
        Writer(writer_script, path=path, tag=f"cx{k}", seed=50 + k, count=per_ctxd, go=go, big=0.05, grace=1.0)
        for k in range(2)
    ]
    try:
        for w in pis + ctxds:
            w.wait_ready()
        started = time.monotonic()
        Path(go).touch()
        for w in pis + ctxds:
            w.finish()
        elapsed = time.monotonic() - started
    finally:
        for w in pis + ctxds:  # a failed test leaves no writer waiting for its go
            if w.proc.poll() is None:
                w.proc.kill()
                w.proc.wait()

    data = Path(path).read_bytes()
    assert data.endswith(b"\n")
    lines = data.split(b"\n")[:-1]
    assert all(lines), f"{variant}: {lines.count(b'')} blank lines"
    objects: list[dict[str, Any]] = []
    malformed = 0
    for line in lines:
        try:
            obj = json.loads(line)
        except ValueError:
            malformed += 1
            continue
        assert isinstance(obj, dict)
        objects.append(obj)
    glued = sum("landed inside another writer's line" in d["message"] for w in ctxds for d in w.diagnostics)
    assert malformed <= 2 * glued, (variant, malformed, glued)
    if len(pis) > 1 or not pi_cfg.get("pieces"):
        assert malformed == 0, variant
    ids = [o["id"] for o in objects[1:]]
    assert len(ids) == len(set(ids)), f"{variant}: an entry appears twice"
    for k in range(pi_writers):
        seqs = [o["test"]["seq"] for o in objects[1:] if o.get("test", {}).get("tag") == f"pi{k}"]
        assert sorted(seqs) == list(range(per_pi)), f"{variant}: pi{k} lost {per_pi - len(set(seqs))} entries"
    for k, w in enumerate(ctxds):
        mine = [o for o in objects[1:] if o.get("test", {}).get("tag") == f"cx{k}"]
        assert sorted(o["id"] for o in mine) == sorted(w.acked) and len(w.acked) == per_ctxd
    served = SessionFile.open(path)
    assert sorted(h.id for h in served.heads) == sorted(ids)
    print(f"{variant}: {len(lines) - 1} lines, {len(data)} bytes in {elapsed:.2f} s; {glued} glued, healed")


@pytest.mark.parametrize(
    ("variant", "pi_cfg", "per_pi"), [("full speed", {}, 1500), ("paced 2 ms", {"pace": 0.002}, 500)]
)
async def test_unlocked_agents_and_two_daemons_lose_nothing(
    tmp_path: Path, variant: str, pi_cfg: dict[str, Any], per_pi: int
) -> None:
    """As the issue measured it: two pi-style writers (no lock, one write() per line, 50 B to 60 KB)
    and two real ``ctxd serve`` daemons (watching the file, appending through ``session/append``)
    on one file. Afterwards every entry of every writer is there exactly once, every line is one
    JSON object and none is blank; each daemon serves the whole file once its watcher caught up."""
    root = tmp_path / "sessions"
    root.mkdir()
    path = create_session(str(root), "/proj", path=str(root / "s.jsonl"))
    go = str(tmp_path / "go")
    pi_script = tmp_path / "pi_writer.py"
    pi_script.write_text(PI_WRITER)
    pis = [Writer(pi_script, path=path, tag=f"pi{k}", seed=k, count=per_pi, go=go, **pi_cfg) for k in range(2)]
    env = {**os.environ, "CTXD_TAIL_GRACE_MS": "1000"}
    daemons = [
        # autoCompact off: the daemons' own compactions (a 60 KB line crosses the threshold) would
        # make the count of entries a race; appends are what this test is about.
        CtxdClient(
            initialization_options={"roots": [str(root)], "autoCompact": False}, env=env, stderr=subprocess.DEVNULL
        )
        for _ in range(2)
    ]
    acked: list[list[str]] = [[], []]
    per_daemon = 150

    async def run(k: int, client: CtxdClient) -> None:
        rng = random.Random(100 + k)
        seq = 0
        while seq < per_daemon:
            batch = []
            for _ in range(min(rng.choice([1, 1, 2, 3]), per_daemon - seq)):
                size = rng.randint(50_000, 60_000) if rng.random() < 0.05 else rng.randint(10, 400)
                message = {"role": "user", "content": "c" * size, "timestamp": seq}
                batch.append({"type": "message", "message": message, "test": {"tag": f"cx{k}", "seq": seq}})
                seq += 1
            answer = await client.request("session/append", {"session": path, "entries": batch})
            acked[k].extend(answer["ids"])

    try:
        for client in daemons:
            await client.start()
            await client.request("session/open", {"session": path})
        for w in pis:
            w.wait_ready()
        started = time.monotonic()
        Path(go).touch()
        await asyncio.gather(*(run(k, c) for k, c in enumerate(daemons)))
        for w in pis:
            await asyncio.to_thread(w.finish)
        elapsed = time.monotonic() - started
        lines_now = Path(path).read_bytes().count(b"\n") - 1
        served = [await _caught_up(c, path, lines_now) for c in daemons]
    finally:
        for w in pis:
            if w.proc.poll() is None:
                w.proc.kill()
                w.proc.wait()
        for client in daemons:
            await client.close()

    data = Path(path).read_bytes()
    assert data.endswith(b"\n")
    lines = data.split(b"\n")[:-1]
    assert all(lines), f"{variant}: {lines.count(b'')} blank lines"
    objects = [json.loads(line) for line in lines]  # every line is one JSON object
    ids = [o["id"] for o in objects[1:]]
    assert len(ids) == len(set(ids)), f"{variant}: an entry appears twice"
    for k in range(2):
        seqs = [o["test"]["seq"] for o in objects[1:] if o.get("test", {}).get("tag") == f"pi{k}"]
        assert sorted(seqs) == list(range(per_pi)), f"{variant}: pi{k} lost {per_pi - len(set(seqs))} entries"
        mine = [o for o in objects[1:] if o.get("test", {}).get("tag") == f"cx{k}"]
        assert sorted(o["id"] for o in mine) == sorted(acked[k]) and len(mine) == per_daemon
    assert all(s["entries"] == len(ids) and not s["diagnostics"] for s in served), [s["entries"] for s in served]
    assert not list(root.glob("*.torn")), "a live writer's line was taken for torn"
    print(f"{variant}: {len(lines) - 1} lines, {len(data)} bytes in {elapsed:.2f} s")


async def _caught_up(client: CtxdClient, path: str, entries: int, timeout: float = 10.0) -> dict[str, Any]:
    """``session/open``'s answer once the daemon serves ``entries`` entries (its watcher reads
    other writers' lines a few milliseconds after they land)."""
    deadline = time.monotonic() + timeout
    while True:
        answer: dict[str, Any] = await client.request("session/open", {"session": path})
        if answer["entries"] >= entries or time.monotonic() > deadline:
            return answer
        await asyncio.sleep(0.02)
