"""Auto-compaction in the daemon: the threshold, context overflows, and what never triggers."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from pytest_lsp import LanguageClient

from ctxd.service import protocol as p

from .harness import append, assistant, conversation, new_session, read_entries, start_ctxd, user

pytestmark = pytest.mark.asyncio(loop_scope="module")

WINDOW = 4_000
RESERVE = 1_000
THRESHOLD = WINDOW - RESERVE
CTXD_OPTIONS = {
    "autoCompact": True,
    "compaction": {"contextWindow": WINDOW, "reserveTokens": RESERVE, "keepRecentTokens": 300},
}
OVERFLOW = "400 prompt is too long: 213462 tokens > 200000 maximum"


async def test_crossing_the_threshold_compacts_in_the_background(ctxd: LanguageClient) -> None:
    notes = ctxd.notes  # type: ignore[attr-defined]
    path = await new_session(ctxd)
    below = await append(ctxd, path, *conversation(4), user("go on"), assistant("fine", total=THRESHOLD - 10))
    assert below["compactionDue"] is False
    assert below["usage"]["threshold"] == THRESHOLD and below["usage"]["window"] == WINDOW

    mark = notes.mark()
    result = await append(ctxd, path, user("and more"), assistant("a long answer", total=THRESHOLD + 500))
    assert result["compactionDue"] is True
    assert result["reason"] == f"context {THRESHOLD + 500:,} > threshold {THRESHOLD:,}"
    assert result["usage"]["tokens"] == THRESHOLD + 500
    assert result["usage"]["percent"] == pytest.approx(100 * (THRESHOLD + 500) / WINDOW, abs=0.1)
    usage = await notes.wait(p.CONTEXT_USAGE, session=path, since=mark)
    assert usage["tokens"] == THRESHOLD + 500 and usage["threshold"] == THRESHOLD and usage["window"] == WINDOW

    running = await notes.wait(p.COMPACTION_STATUS, lambda s: s["state"] == "running", session=path, since=mark)
    assert running["trigger"] == "threshold" and running["tokensBefore"] == THRESHOLD + 500
    done = await notes.wait(p.COMPACTION_STATUS, lambda s: s["state"] != "running", session=path, since=mark)
    assert done["state"] == "succeeded" and done["trigger"] == "threshold" and done["retry"] is False
    assert done["tokensAfter"] < done["tokensBefore"]
    entry = read_entries(path)[-1]
    assert entry["type"] == "compaction" and entry["id"] == done["entryId"]
    assert entry["parentId"] == result["leafId"]
    assert entry["details"]["ctxd"]["trigger"] == "threshold"
    after = await notes.wait(p.CONTEXT_USAGE, lambda u: u["leafId"] == done["entryId"], session=path, since=mark)
    assert after["tokens"] < THRESHOLD


async def test_a_context_overflow_error_compacts_and_asks_for_a_retry(ctxd: LanguageClient) -> None:
    notes = ctxd.notes  # type: ignore[attr-defined]
    path = await new_session(ctxd)
    before = (await append(ctxd, path, *conversation(4), user("one more question")))["leafId"]
    mark = notes.mark()
    result = await append(ctxd, path, assistant("", stop="error", error=OVERFLOW))
    assert result["compactionDue"] is True and "overflow" in result["reason"]
    done = await notes.wait(p.COMPACTION_STATUS, lambda s: s["state"] != "running", session=path, since=mark)
    assert done["state"] == "succeeded" and done["trigger"] == "overflow" and done["retry"] is True
    running = notes.of(p.COMPACTION_STATUS, path, mark)[0]
    assert running["state"] == "running" and running["trigger"] == "overflow"
    entry = next(e for e in read_entries(path) if e.get("id") == done["entryId"])
    assert entry["type"] == "compaction"
    assert entry["parentId"] == before  # the error itself leaves the context


async def test_other_errors_and_aborted_turns_trigger_nothing(ctxd: LanguageClient) -> None:
    notes = ctxd.notes  # type: ignore[attr-defined]
    path = await new_session(ctxd)
    await append(ctxd, path, *conversation(4), user("question"))
    mark = notes.mark()
    aborted = await append(ctxd, path, assistant("partial", stop="aborted", total=THRESHOLD * 2))
    assert aborted["compactionDue"] is False and "aborted" in aborted["reason"]
    failed = await append(ctxd, path, user("again"), assistant("", stop="error", error="503 service unavailable"))
    assert failed["compactionDue"] is False
    await asyncio.sleep(1.0)
    assert not notes.of(p.COMPACTION_STATUS, path, mark)
    assert all(e["type"] != "compaction" for e in read_entries(path)[1:])


async def test_nothing_happens_when_compaction_is_disabled(tmp_path) -> None:  # type: ignore[no-untyped-def]
    options = {
        "roots": [str(tmp_path)],
        "watch": False,
        "autoCompact": True,
        "compaction": {**CTXD_OPTIONS["compaction"], "enabled": False},  # type: ignore[dict-item]
    }
    async with start_ctxd(options) as client:
        notes = client.notes  # type: ignore[attr-defined]
        path = await new_session(client)
        over = await append(client, path, *conversation(4), user("q"), assistant("a", total=THRESHOLD * 2))
        assert over["compactionDue"] is False and over["reason"] == "compaction is disabled"
        overflow = await append(client, path, user("q"), assistant("", stop="error", error=OVERFLOW))
        assert overflow["compactionDue"] is False
        await asyncio.sleep(1.0)
        assert not notes.of(p.COMPACTION_STATUS)
        assert all(e["type"] != "compaction" for e in read_entries(path)[1:])


async def test_auto_compact_off_reports_but_does_not_compact(tmp_path) -> None:  # type: ignore[no-untyped-def]
    options = {"roots": [str(tmp_path)], "watch": False, "autoCompact": False, "compaction": CTXD_OPTIONS["compaction"]}
    async with start_ctxd(options) as client:
        path = await new_session(client)
        over = await append(client, path, *conversation(4), user("q"), assistant("a", total=THRESHOLD * 2))
        assert over["compactionDue"] is True
        await asyncio.sleep(1.0)
        assert not client.notes.of(p.COMPACTION_STATUS)  # type: ignore[attr-defined]


def _write_as_an_agent(path: str, *messages: dict[str, Any]) -> None:
    """Append ``messages`` the way pi does (no lock, one write per line, chained on the last entry)."""
    parent = read_entries(path)[-1].get("id")
    with open(path, "a", encoding="utf-8") as f:
        for k, message in enumerate(messages):
            entry_id = f"ext{k:05d}"
            entry = {"type": "message", "id": entry_id, "parentId": parent, "timestamp": "2026-01-01T00:00:00.000Z"}
            f.write(json.dumps({**entry, "message": message}) + "\n")
            f.flush()
            parent = entry_id


@pytest.mark.parametrize("external", [False, True])
async def test_another_writers_turn_compacts_only_when_asked(tmp_path, external: bool) -> None:  # type: ignore[no-untyped-def]
    """An agent that writes its own file (pi) compacts it itself: its turns crossing the threshold
    make ctxd report the usage, and compact only with ``autoCompactExternal``."""
    options = {**CTXD_OPTIONS, "roots": [str(tmp_path)], "watch": True, "autoCompactExternal": external}
    async with start_ctxd(options) as client:
        notes = client.notes  # type: ignore[attr-defined]
        path = await new_session(client)
        await append(client, path, *conversation(4), user("go on"))
        mark = notes.mark()
        _write_as_an_agent(path, assistant("a long answer", total=THRESHOLD + 500))
        usage = await notes.wait(p.CONTEXT_USAGE, lambda u: u["tokens"] == THRESHOLD + 500, session=path, since=mark)
        assert usage["threshold"] == THRESHOLD
        if external:
            done = await notes.wait(p.COMPACTION_STATUS, lambda s: s["state"] != "running", session=path, since=mark)
            assert done["state"] == "succeeded" and done["trigger"] == "threshold"
            assert read_entries(path)[-1]["type"] == "compaction"
        else:
            await asyncio.sleep(1.0)
            assert not notes.of(p.COMPACTION_STATUS, path, mark)
            assert all(e["type"] != "compaction" for e in read_entries(path)[1:])
