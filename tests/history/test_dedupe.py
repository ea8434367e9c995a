"""A hit in ctxd's archived copy of a transcript is shown only when the live transcript lacks the entry."""

from __future__ import annotations

import shutil
from pathlib import Path

from conftest import LOCAL

from ctxd.history.index import HistoryIndex
from ctxd.service.history import _dedupe


def test_archived_copies_do_not_repeat_live_hits(tmp_path: Path) -> None:
    live_root, archive = tmp_path / "projects", tmp_path / "archive"
    (live_root / "p").mkdir(parents=True)
    (archive / "claude" / "p").mkdir(parents=True)
    source = LOCAL / "claude" / "incremental-turn-2.jsonl"
    shutil.copy(source, live_root / "p" / "s.jsonl")
    shutil.copy(source, archive / "claude" / "p" / "s.jsonl")
    index = HistoryIndex(str(tmp_path / "h.sqlite3"))
    index.update([str(live_root)], [str(archive)])
    hits = index.search("the", limit=500)
    assert {h.archived for h in hits} == {False, True}
    shown = _dedupe(hits)
    assert shown and not any(h.archived for h in shown)
    assert len(shown) == len({(h.session, h.entryId) for h in hits})
    # The live transcript lost its entries (Claude Code's cleanup): the archive's hits are shown.
    (live_root / "p" / "s.jsonl").unlink()
    index.update([str(live_root)], [str(archive)])
    assert all(h.archived for h in _dedupe(index.search("the", limit=500)))
    index.close()
