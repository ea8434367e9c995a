"""``ctxd check``: a corpus of broken session files, each with the findings it must produce; the
repairs (append-only, or a copy); the CLI's ``--json`` output and exit codes."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO
from helpers.broken import line, nested, non_utf8, write_raw
from helpers.factories import TS, assistant, chain, compaction, header, tool_result, user

from ctxd.context.check import check_session
from ctxd.context.repair import repair
from ctxd.tree.session import Session


def at(seconds: int) -> str:
    return f"2026-03-01T09:{seconds // 60:02d}:{seconds % 60:02d}.000Z"


# --- the corpus: each factory writes one file into a directory and returns its path -----------------

Factory = Callable[[Path], str]


def clean(d: Path) -> str:
    return write_raw(d / "clean.jsonl", *(line(e) for e in chain(user, assistant, user, assistant)))


def orphan(d: Path) -> str:
    a, b = chain(user, assistant)
    return write_raw(d / "orphan.jsonl", line(a), line(b), line(user("gone0001", "lost")))


def self_parent(d: Path) -> str:
    a = user(None)
    b = user(None, "me")
    b["parentId"] = b["id"]
    return write_raw(d / "self.jsonl", line(a), line(b))


def cycle(d: Path) -> str:
    a = user(None)
    x, y = user(None, "x"), user(None, "y")
    x["parentId"], y["parentId"] = y["id"], x["id"]
    return write_raw(d / "cycle.jsonl", line(a), line(x), line(y))


def duplicate(d: Path) -> str:
    a, b = chain(user, assistant)
    again = user(None, "again")
    again["id"] = a["id"]
    return write_raw(d / "dup.jsonl", line(a), line(b), line(again))


def orphan_result(d: Path) -> str:
    a, r, b = chain(user, lambda p: tool_result(p, "call_x"), assistant)
    return write_raw(d / "orphan-result.jsonl", line(a), line(r), line(b))


def missing_result(d: Path) -> str:
    es = chain(user, lambda p: assistant(p, calls=[("call_1", "read", {"path": "a"})]), user, assistant)
    return write_raw(d / "missing-result.jsonl", *(line(e) for e in es))


def pending_call(d: Path) -> str:
    es = chain(user, lambda p: assistant(p, calls=[("call_1", "read", {"path": "a"})]))
    return write_raw(d / "pending.jsonl", *(line(e) for e in es))


def interrupted_call(d: Path) -> str:
    es = chain(user, lambda p: assistant(p, calls=[("call_1", "read", {})], stop="aborted"), user, assistant)
    return write_raw(d / "interrupted.jsonl", *(line(e) for e in es))


def first_kept_off_path(d: Path) -> str:
    a, b = chain(user, assistant)
    side = user(a["id"], "side", timestamp=at(60))
    c = compaction(b["id"], side["id"], timestamp=at(300))  # its kept entry is on another branch
    return write_raw(d / "fk.jsonl", line(a), line(b), line(side), line(c), line(user(c["id"], timestamp=at(301))))


def partial_tail(d: Path) -> str:
    path = clean(d)
    with open(path, "ab") as f:
        f.write(b'{"type":"message","id":"tail0001","pa')
    return path


def malformed(d: Path) -> str:
    a, b, c = chain(user, assistant, user)
    return write_raw(d / "malformed.jsonl", line(a), b"{not json\n", line(b), line(c))


def two_objects(d: Path) -> str:
    a, b, c = chain(user, assistant, user)
    return write_raw(d / "two.jsonl", line(a), line(b)[:-1] + line(c))


def blank(d: Path) -> str:
    a, b = chain(user, assistant)
    return write_raw(d / "blank.jsonl", line(a), b"\n", line(b))


def deep(d: Path) -> str:
    a, b = chain(user, assistant)
    return write_raw(d / "deep.jsonl", line(a), nested(b, 300))


def bad_utf8(d: Path) -> str:
    a, b = chain(user, lambda p: user(p, "caf"))
    return write_raw(d / "utf8.jsonl", line(a), non_utf8(b))


def bad_field(d: Path) -> str:
    a, b = chain(user, assistant)
    c = compaction(b["id"], a["id"])
    c["tokensBefore"] = "x"
    return write_raw(d / "field.jsonl", line(a), line(b), line(c))


def two_writers(d: Path) -> str:
    """Two agents appending to one file at once: their chains interleave in file order."""
    root = user(None, "start", timestamp=at(0))
    a_parent, b_parent = root["id"], root["id"]
    out = [root]
    for k in range(4):
        a = user(a_parent, f"a{k}", timestamp=at(10 + 2 * k))
        b = assistant(b_parent, f"b{k}", timestamp=at(11 + 2 * k))
        out += [a, b]
        a_parent, b_parent = a["id"], b["id"]
    return write_raw(d / "two-writers.jsonl", *(line(e) for e in out))


def one_branch_switch_later(d: Path) -> str:
    """One agent going back to an old branch tip an hour later: not two writers."""
    a = user(None, timestamp=at(0))
    b = assistant(a["id"], timestamp=at(5))
    side = user(a["id"], "side", timestamp=at(60))
    back = user(b["id"], "back", timestamp="2026-03-01T10:30:00.000Z")
    return write_raw(d / "switch.jsonl", *(line(e) for e in (a, b, side, back)))


CORPUS: list[tuple[Factory, set[str], bool]] = [
    (clean, set(), True),
    (orphan, {"orphan"}, False),
    (self_parent, {"self-parent"}, False),
    (cycle, {"cycle"}, False),
    (duplicate, {"duplicate-id"}, False),
    (orphan_result, {"orphan-tool-result"}, False),
    (missing_result, {"missing-tool-result"}, False),
    (pending_call, {"pending-tool-call"}, True),
    (interrupted_call, {"interrupted-tool-call"}, True),
    (first_kept_off_path, {"first-kept-off-path"}, False),
    (partial_tail, {"partial-tail"}, False),
    (malformed, {"malformed"}, False),
    (two_objects, {"two-objects"}, False),
    (blank, {"blank-line"}, False),
    (deep, {"too-deep"}, False),
    (bad_utf8, {"bad-utf8"}, False),
    (bad_field, {"bad-field"}, False),
    (two_writers, {"two-writers"}, False),
    (one_branch_switch_later, set(), True),
]


@pytest.mark.parametrize(("make", "kinds", "is_clean"), CORPUS, ids=[m.__name__ for m, _, _ in CORPUS])
def test_each_broken_file_gets_its_findings(tmp_path: Path, make: Factory, kinds: set[str], is_clean: bool) -> None:
    path = make(tmp_path)
    before = Path(path).read_bytes()
    report = check_session(Session.open(path))
    found = {f.kind for f in report.findings}
    assert found == kinds, [f.to_json() for f in report.findings]
    assert report.clean is is_clean and report.exit_code == (0 if is_clean else 1)
    for f in report.findings:
        assert f.line is not None and f.severity in ("error", "warning", "info") and f.message
    assert Path(path).read_bytes() == before  # checking never writes


def test_findings_name_the_line_and_the_entry(tmp_path: Path) -> None:
    report = check_session(Session.open(orphan(tmp_path)))
    (f,) = report.findings
    lost = json.loads(Path(report.path).read_text().splitlines()[3])
    assert (f.kind, f.severity, f.line, f.entryId) == ("orphan", "warning", 4, lost["id"])
    writers = check_session(Session.open(two_writers(tmp_path)))
    (w,) = writers.findings
    assert w.line == 5 and "6 time(s) between lines 5 and 10" in w.message  # every hop after the first


# --- repair ----------------------------------------------------------------------------------------


def test_repair_moves_the_leaf_past_a_broken_branch_by_appending(tmp_path: Path) -> None:
    a, b, c, e = chain(user, assistant, user, assistant)
    path = write_raw(tmp_path / "s.jsonl", line(a), line(b), line(c)[:40] + b"\n", line(e))  # c torn: e orphaned
    before = Path(path).read_bytes()
    report = repair(Session.open(path))
    after = Path(path).read_bytes()
    assert after.startswith(before) and after.count(b"\n") == before.count(b"\n") + 1  # one line appended
    assert report.repair is not None
    assert (report.repair["leafFrom"], report.repair["leafTo"]) == (e["id"], b["id"])
    assert report.leafId == b["id"] and Session.open(path).leaf_id() == b["id"]
    marker = json.loads(after.splitlines()[-1])
    assert marker["customType"] == "ctxd.leaf" and marker["parentId"] == b["id"]
    copy = report.repair["copy"]
    assert copy == path + ".repaired.jsonl" and stat.S_IMODE(os.stat(copy).st_mode) == 0o600
    repaired = check_session(Session.open(copy))
    assert {f.kind for f in repaired.findings} == {"orphan"}  # the torn line is gone; e's parent still is
    assert all(json.loads(x) for x in Path(copy).read_bytes().splitlines())


def test_repair_copies_damaged_lines_into_a_clean_file(tmp_path: Path) -> None:
    a, b, c, d = chain(user, assistant, user, assistant)
    dup = user(d["id"], "dup")
    dup["id"] = b["id"]  # the later one wins
    dup["parentId"] = a["id"]
    selfish = user(None, "self")
    selfish["parentId"] = selfish["id"]
    path = write_raw(
        tmp_path / "s.jsonl",
        line(a),
        b"\n",
        line(b)[:-1] + line(c),
        b"{oops\n",
        nested(d, 300),
        line(selfish),
        line(dup),
    )
    before = Path(path).read_bytes()
    report = repair(Session.open(path))
    assert report.repair is not None and report.repair["appended"] == []
    assert Path(path).read_bytes() == before  # nothing needed appending: the file is untouched
    copy = Session.open(report.repair["copy"])
    assert check_session(copy).clean, [f.to_json() for f in check_session(copy).findings]
    ids = [h.id for h in copy.file.heads]
    assert ids == [a["id"], c["id"], d["id"], selfish["id"], b["id"]]
    assert copy.file.entry_by_id(selfish["id"])["parentId"] is None
    assert copy.file.entry_by_id(b["id"])["message"]["content"] == "dup"


def test_repair_of_a_partial_tail_terminates_it_in_place(tmp_path: Path) -> None:
    path = partial_tail(tmp_path)
    before = Path(path).read_bytes()
    session = Session.open(path)
    session.file.tail_grace = 0.05
    report = repair(session)
    assert Path(path).read_bytes() == before + b"\n"
    assert report.repair is not None and report.repair["tailSettled"] is True
    assert Path(path + ".torn").read_bytes() == before[before.rindex(b"\n") + 1 :] + b"\n"
    assert "partial-tail" not in {f.kind for f in report.findings}


# --- the command line ------------------------------------------------------------------------------


def ctxd(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "CTXD_TAIL_GRACE_MS": "50"}
    return subprocess.run(
        [sys.executable, "-m", "ctxd", *args], capture_output=True, text=True, cwd=REPO, env=env, timeout=120
    )


def test_cli_json_and_exit_codes(tmp_path: Path) -> None:
    good = ctxd("check", clean(tmp_path), "--json")
    assert good.returncode == 0, good.stderr
    data: dict[str, Any] = json.loads(good.stdout)
    assert {
        "path",
        "sessionId",
        "version",
        "entries",
        "lines",
        "leafId",
        "clean",
        "counts",
        "findings",
        "repair",
    } <= set(data)
    assert data["clean"] is True and data["findings"] == [] and data["entries"] == 4 and data["lines"] == 5

    bad = ctxd("check", malformed(tmp_path), "--json")
    assert bad.returncode == 1
    data = json.loads(bad.stdout)
    assert data["counts"] == {"malformed": 1}
    assert data["findings"][0] == {
        "kind": "malformed",
        "severity": "error",
        "line": 3,
        "entryId": None,
        "message": data["findings"][0]["message"],
    }

    text = ctxd("check", orphan(tmp_path))
    assert text.returncode == 1 and "line 4 [warning] orphan" in text.stdout

    (tmp_path / "p").mkdir()
    fixed = ctxd("check", partial_tail(tmp_path / "p"), "--repair", "--json")
    assert fixed.returncode == 1, fixed.stdout + fixed.stderr  # the torn line stays, terminated, as a bad line
    data = json.loads(fixed.stdout)
    assert data["repair"]["tailSettled"] is True and data["counts"] == {"malformed": 1, "torn": 1}
    assert data["repair"]["copy"].endswith(".repaired.jsonl")


def test_cli_exit_2_for_a_file_that_is_no_session(tmp_path: Path) -> None:
    not_session = tmp_path / "x.jsonl"
    not_session.write_text('{"type":"message","id":"a"}\n')
    fifo = tmp_path / "f.jsonl"
    os.mkfifo(fifo)
    for path in (not_session, fifo, tmp_path / "missing.jsonl"):
        out = ctxd("check", str(path), "--json")
        assert out.returncode == 2, (path, out.stdout, out.stderr)
        assert "Traceback" not in out.stderr and json.loads(out.stdout)["error"]["message"]


def test_a_long_single_chain_written_in_one_second_is_clean(tmp_path: Path) -> None:
    # Every factory entry has the same timestamp (TS): one chain is never mistaken for two writers.
    path = write_raw(tmp_path / "big.jsonl", *(line(e) for e in chain(*[user, assistant] * 2000)), hdr=header())
    out = ctxd("check", path, "--json")
    assert out.returncode == 0 and json.loads(out.stdout)["entries"] == 4000
    assert all(json.loads(x)["timestamp"] == TS for x in Path(path).read_text().splitlines()[1:])
