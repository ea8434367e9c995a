"""The tree index: parents, children, labels, name, paths, common ancestors, orphans."""

from __future__ import annotations

from pathlib import Path

from helpers.factories import assistant, entry, user, write

from ctxd.tree.index import NONE
from ctxd.tree.session import Session


def build(tmp_path: Path) -> tuple[Session, dict[str, str]]:
    r = user(None, id="r0000000")
    a = assistant(r["id"], id="a0000000")
    b1 = user(a["id"], "left", id="b1000000")
    b2 = user(a["id"], "right", id="b2000000")
    c1 = assistant(b1["id"], id="c1000000")
    lab1 = entry("label", c1["id"], targetId=a["id"], label="first")
    lab2 = entry("label", lab1["id"], targetId=a["id"], label="second")
    lab3 = entry("label", lab2["id"], targetId=r["id"], label="gone")
    lab4 = entry("label", lab3["id"], targetId=r["id"])
    info = entry("session_info", lab4["id"], name="My session")
    orphan = user("missing!", id="o0000000")
    path = write(tmp_path / "t.jsonl", [r, a, b1, b2, c1, lab1, lab2, lab3, lab4, info, orphan])
    return Session.open(path), {"r": r["id"], "a": a["id"], "b1": b1["id"], "b2": b2["id"], "c1": c1["id"]}


def test_structure_labels_name_and_orphans(tmp_path: Path) -> None:
    s, ids = build(tmp_path)
    t = s.tree
    ix = s.file.index
    assert t.parent[ix[ids["a"]]] == ix[ids["r"]]
    assert t.child_ids(ix[ids["a"]]) == [ix[ids["b1"]], ix[ids["b2"]]]
    assert t.depth[ix[ids["c1"]]] == 3
    assert t.labels == {ix[ids["a"]]: "second"}  # last wins; an empty label clears
    assert t.name == "My session"
    assert t.orphans == [ix["o0000000"]] and t.parent[ix["o0000000"]] == NONE
    assert t.roots == [ix[ids["r"]]]


def test_paths_and_common_ancestor(tmp_path: Path) -> None:
    s, ids = build(tmp_path)
    t = s.tree
    ix = s.file.index
    assert [t.id_of(i) for i in t.path_to_root(ix[ids["c1"]])] == [ids["r"], ids["a"], ids["b1"], ids["c1"]]
    assert t.common_ancestor(ix[ids["c1"]], ix[ids["b2"]]) == ix[ids["a"]]
    assert t.common_ancestor(ix[ids["c1"]], ix["o0000000"]) == NONE
    assert t.is_ancestor(ix[ids["a"]], ix[ids["c1"]]) and not t.is_ancestor(ix[ids["b2"]], ix[ids["c1"]])
    assert [t.id_of(i) for i in t.path_until(ix[ids["c1"]], ix[ids["a"]])] == [ids["a"], ids["b1"], ids["c1"]]


def test_incremental_update_matches_a_fresh_index(tmp_path: Path) -> None:
    s, ids = build(tmp_path)
    s.append([{"type": "label", "targetId": ids["b2"], "label": "new"}])
    s.append([{"type": "message", "message": {"role": "user", "content": "x"}}], parent_id=ids["b2"])
    fresh = Session.open(s.path)
    assert s.tree.parent == fresh.tree.parent
    assert s.tree.labels == fresh.tree.labels
    assert s.tree.depth == fresh.tree.depth


def test_settings_and_compaction_are_inherited_along_paths(tmp_path: Path) -> None:
    r = user(None)
    m = entry("model_change", r["id"], provider="p", modelId="x")
    t1 = entry("thinking_level_change", m["id"], thinkingLevel="high")
    a = assistant(t1["id"], model="y")
    other = user(r["id"], "sibling")
    path = write(tmp_path / "s.jsonl", [r, m, t1, a, other])
    s = Session.open(path)
    ix = s.file.index
    assert s.tree.last_model[ix[a["id"]]] == ix[a["id"]]
    assert s.tree.last_thinking[ix[a["id"]]] == ix[t1["id"]]
    assert s.tree.last_model[ix[other["id"]]] == NONE
