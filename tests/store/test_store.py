"""The session store: create, open, append, refresh, repair, migrate, list, fork."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from conftest import reference
from helpers.factories import assistant, chain, header, tool_result, user, write

from ctxd.errors import BadHeaderError, EntryNotFoundError, InvalidEntryError
from ctxd.store.create import create_session
from ctxd.store.listing import cwd_dirname, list_sessions
from ctxd.store.session_file import LEAF_MARKER, Durability, SessionFile
from ctxd.tree.session import Session


def lines_of(path: str | Path) -> list[str]:
    return Path(path).read_text().splitlines()


def test_create_is_private_and_pi_shaped(tmp_path: Path) -> None:
    path = create_session(str(tmp_path), "/home/me/proj")
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert Path(path).parent.name == cwd_dirname("/home/me/proj") == "--home-me-proj--"
    head = json.loads(lines_of(path)[0])
    assert head["type"] == "session" and head["version"] == 3 and head["cwd"] == "/home/me/proj"
    assert Path(path).name.endswith(f"_{head['id']}.jsonl")


def test_append_fills_ids_parents_and_chains_batches(tmp_path: Path) -> None:
    sf = SessionFile.open(create_session(str(tmp_path), "/p"))
    (a,) = sf.append([{"type": "message", "message": {"role": "user", "content": "hi"}}])
    b, c = sf.append([{"type": "label", "targetId": a}, {"type": "custom"}])
    bodies = [json.loads(x) for x in lines_of(sf.path)[1:]]
    assert [e["id"] for e in bodies] == [a, b, c]
    assert bodies[0]["parentId"] is None and bodies[1]["parentId"] == a and bodies[2]["parentId"] == b
    assert all(len(e["id"]) == 8 and e["timestamp"].endswith("Z") for e in bodies)
    assert sf.leaf_id() == c
    (d,) = sf.append([{"type": "custom"}], parent_id=a)
    assert sf.entry_by_id(d)["parentId"] == a


def test_append_validates_before_writing(tmp_path: Path) -> None:
    sf = SessionFile.open(create_session(str(tmp_path), "/p"))
    size = os.path.getsize(sf.path)
    with pytest.raises(InvalidEntryError):
        sf.append([{"type": "custom"}, {"no": "type"}])
    with pytest.raises(EntryNotFoundError):
        sf.append([{"type": "custom"}], parent_id="nope")
    with pytest.raises(InvalidEntryError, match="does not exist"):
        sf.append([{"type": "custom", "parentId": "nope"}])
    (a,) = sf.append([{"type": "custom", "id": "aaaaaaaa"}])
    with pytest.raises(InvalidEntryError, match="already exists"):
        sf.append([{"type": "custom", "id": a}])
    assert os.path.getsize(sf.path) > size and len(sf) == 1


@pytest.mark.parametrize("mode", list(Durability))
def test_durability_modes_write_the_same_bytes(tmp_path: Path, mode: Durability) -> None:
    sf = SessionFile.open(create_session(str(tmp_path), "/p"), durability=mode)
    ids = sf.append([{"type": "custom", "data": i} for i in range(3)])
    again = SessionFile.open(sf.path)
    assert [again.heads[i].id for i in range(3)] == ids


def test_refresh_reads_only_appended_bytes_and_holds_partial_lines(tmp_path: Path) -> None:
    entries = chain(user, assistant)
    path = write(tmp_path / "s.jsonl", entries)
    sf = SessionFile.open(path)
    end = sf.end
    extra = user(entries[-1]["id"], "more")
    line = json.dumps(extra)
    with open(path, "a") as f:
        f.write(line[:10])
    assert sf.refresh().added == range(2, 2)  # a partial line is not served
    assert sf.pending_bytes() == 10
    with open(path, "a") as f:
        f.write(line[10:] + "\n")
    result = sf.refresh()
    assert result.added == range(2, 3) and not result.reloaded
    assert sf.offsets[2] == end  # read from where it stopped
    assert sf.entry(2)["message"]["content"] == "more"


def test_refresh_reloads_after_truncation_or_replacement(tmp_path: Path) -> None:
    entries = chain(user, assistant, user)
    path = write(tmp_path / "s.jsonl", entries)
    sf = SessionFile.open(path)
    write(path, entries[:1])  # truncated (rewritten shorter in place)
    result = sf.refresh()
    assert result.reloaded and len(sf) == 1
    other = write(tmp_path / "other.jsonl", chain(user, user, user, user), header(id="sess-2"))
    os.replace(other, path)
    result = sf.refresh()
    assert result.reloaded and len(sf) == 4 and sf.session_id == "sess-2"


def test_complete_final_line_left_unchanged_is_completed_before_append(tmp_path: Path) -> None:
    entries = chain(user, assistant)
    path = write(tmp_path / "s.jsonl", entries)
    tail = json.dumps(user(entries[-1]["id"], "no newline"))
    with open(path, "a") as f:
        f.write(tail)
    sf = SessionFile.open(path, tail_grace=0.05)
    assert len(sf) == 2  # reading: not yet written
    (new,) = sf.append([{"type": "custom"}])
    lines = lines_of(path)
    assert lines[3] == tail and json.loads(lines[4])["id"] == new
    assert json.loads(lines[4])["parentId"] == json.loads(tail)["id"]  # the completed entry was the leaf
    assert any("completed" in d.message for d in sf.diagnostics)
    assert not os.path.exists(path + ".torn")


def test_torn_final_line_is_terminated_in_place_and_copied_to_sidecar(tmp_path: Path) -> None:
    entries = chain(user, assistant)
    path = write(tmp_path / "s.jsonl", entries)
    with open(path, "a") as f:
        f.write('{"type":"message","id":"torn0001","mess')
    before = Path(path).read_bytes()
    sf = SessionFile.open(path, tail_grace=0.05)
    (new,) = sf.append([{"type": "custom"}])
    after = Path(path).read_bytes()
    assert after.startswith(before + b"\n")  # nothing moved or truncated: only a newline added
    assert Path(path + ".torn").read_text() == '{"type":"message","id":"torn0001","mess\n'
    assert stat.S_IMODE(os.stat(path + ".torn").st_mode) == 0o600
    assert json.loads(lines_of(path)[4])["id"] == new
    diag = [d for d in sf.diagnostics if "torn" in d.message]
    assert diag and diag[0].line == 4 and diag[0].path == sf.path
    again = SessionFile.open(path)  # the torn line is now a malformed line, reported; the rest served
    assert [d.line for d in again.diagnostics] == [4] and len(again) == 3


def test_malformed_lines_are_reported_and_the_rest_served(tmp_path: Path) -> None:
    a, b, c = chain(user, assistant, user)
    path = tmp_path / "s.jsonl"
    path.write_text(
        "\n".join(
            [
                json.dumps(header()),
                json.dumps(a),
                "{not json",
                json.dumps(b) + json.dumps(c),  # two objects run together (how pi files were damaged)
                "",
                '{"type":"message","parentId":null}',  # no id
                "[1,2]",
            ]
        )
        + "\n"
    )
    sf = SessionFile.open(str(path))
    assert [h.id for h in sf.heads] == [a["id"], b["id"], c["id"]]
    assert list(sf.lines) == [2, 4, 4]
    by_line = {d.line: d.message for d in sf.diagnostics}
    assert "malformed JSON" in by_line[3]
    assert "2 JSON objects" in by_line[4]
    assert "no id" in by_line[6]
    assert "not a JSON object" in by_line[7]
    assert sf.entry(2)["message"]["content"] == "hello"


@pytest.mark.parametrize(
    ("first_line", "reason"),
    [
        ("", "empty"),
        ("{oops", "not JSON"),
        ('{"type":"message","id":"x"}', "not a session header"),
        ('{"type":"session"}', "no id"),
        ('{"type":"session","id":"x","version":"3"}', "version"),
    ],
)
def test_bad_header_is_refused_and_never_touched(tmp_path: Path, first_line: str, reason: str) -> None:
    path = tmp_path / "bad.jsonl"
    content = (first_line + "\n" + json.dumps(user(None)) + "\n") if first_line else ""
    path.write_text(content)
    with pytest.raises(BadHeaderError, match=reason) as info:
        SessionFile.open(str(path))
    assert info.value.path == str(path) and info.value.line == 1
    assert path.read_text() == content


def test_v1_migration_is_deterministic_and_atomic_on_first_write(tmp_path: Path) -> None:
    src = reference("pi", "before-compaction.jsonl")
    path = tmp_path / "v1.jsonl"
    path.write_bytes(src.read_bytes())
    one = SessionFile.open(str(path))
    two = SessionFile.open(str(path))
    assert one.version == 1 and [h.id for h in one.heads] == [h.id for h in two.heads]
    assert one.heads[5].parentId == one.heads[4].id
    comp = next(i for i, h in enumerate(one.heads) if h.type == "compaction")
    assert one.heads[comp].firstKeptEntryId in one.index
    assert "firstKeptEntryIndex" not in one.entry(comp)
    assert path.read_bytes() == src.read_bytes()  # reading never rewrites
    ids_before = [h.id for h in one.heads]
    (new,) = one.append([{"type": "custom"}])
    migrated = [json.loads(x) for x in lines_of(path)]
    assert migrated[0]["version"] == 3
    assert [e["id"] for e in migrated[1:-1]] == ids_before  # the same ids survive the rewrite
    assert migrated[-1]["id"] == new and migrated[-1]["parentId"] == ids_before[-1]
    assert len(migrated) == len(src.read_text().splitlines()) + 1  # every line kept in place
    assert not [p for p in os.listdir(tmp_path) if p.endswith(".tmp")]


def test_v2_hook_message_becomes_custom(tmp_path: Path) -> None:
    e = user(None)
    e["message"] = {"role": "hookMessage", "customType": "x", "content": "c", "display": True}
    path = write(tmp_path / "v2.jsonl", [e], header(version=2))
    sf = SessionFile.open(path)
    assert sf.entry(0)["message"]["role"] == "custom" and sf.heads[0].message.role == "custom"


def test_leaf_move_survives_restart_and_pi_lands_there(tmp_path: Path) -> None:
    entries = chain(user, assistant, user, assistant)
    path = write(tmp_path / "s.jsonl", entries)
    s = Session.open(path)
    s.move_leaf(entries[1]["id"])
    again = Session.open(path)
    assert again.leaf_id() == entries[1]["id"]
    last = json.loads(lines_of(path)[-1])  # pi's leaf: the last line
    assert last["type"] == "custom" and last["customType"] == LEAF_MARKER and last["parentId"] == entries[1]["id"]
    (child,) = again.append([{"type": "message", "message": {"role": "user", "content": "next"}}])
    assert again.file.entry_by_id(child)["parentId"] == entries[1]["id"]


def test_listing_by_root_and_cwd_newest_first_named_from_session_info(tmp_path: Path) -> None:
    root = str(tmp_path)
    old = create_session(root, "/a")
    new = create_session(root, "/b")
    SessionFile.open(old).append([user(None, "first question"), {"type": "session_info", "name": "Named"}])
    os.utime(old, (1, 1))
    found = list_sessions([root])
    assert [s.path for s in found] == [new, old]
    assert found[1].name == "Named" and found[1].title == "first question" and found[1].entries == 2
    assert [s.path for s in list_sessions([root], cwd="/a")] == [old]
    assert list_sessions([str(tmp_path / "missing")]) == []


def test_fork_copies_the_path_with_labels(tmp_path: Path) -> None:
    entries = chain(user, assistant, user, assistant)
    path = write(tmp_path / "s.jsonl", entries)
    s = Session.open(path)
    s.append([{"type": "label", "targetId": entries[0]["id"], "label": "start"}])
    forked = Session.open(s.fork(entries[2]["id"]))
    assert forked.file.header["parentSession"] == s.path
    assert forked.leaf_id() == entries[2]["id"]
    assert forked.path_ids() == [e["id"] for e in entries[:3]]
    assert forked.tree.labels == {0: "start"}
    assert stat.S_IMODE(os.stat(forked.path).st_mode) == 0o600


def test_tool_result_factory_parents(tmp_path: Path) -> None:
    # guards the factories used across the suite
    a = assistant(None, calls=[("c1", "read", {"path": "x"})])
    r = tool_result(a["id"], "c1")
    assert r["parentId"] == a["id"] and r["message"]["toolCallId"] == "c1"


def test_duplicate_ids_are_reported_and_the_later_wins(tmp_path: Path) -> None:
    a, b = chain(user, assistant)
    dup = dict(a, message={"role": "user", "content": "second copy"})
    path = write(tmp_path / "d.jsonl", [a, b, dup])
    sf = SessionFile.open(path)
    assert len(sf) == 3 and sf.index[a["id"]] == 2
    assert sf.entry_by_id(a["id"])["message"]["content"] == "second copy"
    assert [d.line for d in sf.diagnostics if "duplicate" in d.message] == [4]


def test_a_failed_reload_keeps_the_last_good_state(tmp_path: Path) -> None:
    entries = chain(user, assistant, user)
    path = write(tmp_path / "s.jsonl", entries)
    sf = SessionFile.open(path)
    generation = sf.generation
    Path(path).write_text("")  # caught half-rewritten by another process
    with pytest.raises(BadHeaderError):
        sf.refresh()
    assert len(sf) == 3 and sf.session_id == "sess-1" and sf.generation == generation
    write(path, entries[:1])
    result = sf.refresh()
    assert result.reloaded and len(sf) == 1 and sf.generation == generation + 1


def test_a_file_rewritten_in_place_with_another_header_reloads(tmp_path: Path) -> None:
    entries = chain(user, assistant)
    path = write(tmp_path / "s.jsonl", entries)
    sf = SessionFile.open(path)
    inode = os.stat(path).st_ino
    write(path, chain(user, user, user, user), header(id="sess-9"))  # same inode, longer, new header
    assert os.stat(path).st_ino == inode
    result = sf.refresh()
    assert result.reloaded and sf.session_id == "sess-9" and len(sf) == 4
