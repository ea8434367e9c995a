"""The session roots are a boundary: nothing whose real path lies outside them is read, listed,
written, watched or created, whichever way it is named (path, relative path, id, listing, watcher,
fork, create), even after a link that was inside is retargeted outside."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from pytest_lsp import LanguageClient

from ctxd.service import protocol as p

from .harness import append, assistant, call, call_error, new_session, user

pytestmark = pytest.mark.asyncio(loop_scope="module")

DATA = Path(__file__).resolve().parents[1] / "data"


def ctxd_options(root: Path, request: pytest.FixtureRequest) -> dict[str, Any]:
    claude = root.parent / f"{root.name}-claude"
    claude.mkdir()
    return {"roots": [str(root)], "transcriptRoots": [str(claude)], "autoCompact": False, "watch": True}


OUTSIDE_ID = "0199aaaa-0000-7000-8000-00000000beef"


def write_session(path: Path, session_id: str, *texts: str) -> bytes:
    """A small pi session file (header + user messages) at ``path``; returns its bytes."""
    lines = [{"type": "session", "version": 3, "id": session_id, "timestamp": "2025-01-01T00:00:00.000Z", "cwd": "/x"}]
    parent = None
    for i, text in enumerate(texts):
        entry_id = f"e{i:07d}"
        message = {"role": "user", "content": text, "timestamp": 1}
        lines.append(
            {
                "type": "message",
                "id": entry_id,
                "parentId": parent,
                "timestamp": "2025-01-01T00:00:01.000Z",
                "message": message,
            }
        )
        parent = entry_id
    data = "".join(json.dumps(line) + "\n" for line in lines).encode()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return data


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A directory outside the roots holding one session file."""
    folder = tmp_path / "outside"
    write_session(folder / f"2025-01-01T00-00-00-000Z_{OUTSIDE_ID}.jsonl", OUTSIDE_ID, "secret plans")
    return folder


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(f): f.read_bytes() for f in sorted(folder.rglob("*")) if f.is_file()}


async def test_a_link_to_an_outside_file_is_unreachable_by_id_and_never_listed(
    ctxd: LanguageClient, outside: Path
) -> None:
    root = Path(ctxd.root)  # type: ignore[attr-defined]
    target = next(outside.iterdir())
    link = root / "--x--" / target.name
    link.parent.mkdir(exist_ok=True)
    link.symlink_to(target)
    before = snapshot(outside)
    try:
        listed = await call(ctxd, p.SESSION_LIST, {})
        assert OUTSIDE_ID not in [s["id"] for s in listed["sessions"]]
        assert not [s for s in listed["sessions"] if str(outside) in s["path"]]
        for ref in (OUTSIDE_ID, str(link), os.path.relpath(link, root)):
            for method, extra in (
                (p.SESSION_OPEN, {}),
                (p.SESSION_TREE, {}),
                (p.SESSION_STATS, {}),
                (p.CONTEXT_BUILD, {}),
                (p.SESSION_APPEND, {"messages": [user("injected")]}),
                (p.SESSION_LABEL, {"entryId": "e0000000", "label": "x"}),
                (p.SESSION_FORK, {"entryId": "e0000000"}),
                (p.SESSION_ENTRY, {"entryId": "e0000000"}),
                (p.BRANCH, {"entryId": "e0000000"}),
                (p.COMPACT, {"dryRun": True}),
            ):
                error = await call_error(ctxd, method, {"session": ref, **extra})
                assert error.code == -31001, (method, ref, error)
                assert "secret plans" not in error.message
        assert snapshot(outside) == before  # nothing written, nothing forked outside
    finally:
        link.unlink()


async def test_an_open_session_is_unreachable_once_its_folder_is_swapped_for_a_link_outside(
    ctxd: LanguageClient, outside: Path, tmp_path: Path
) -> None:
    root = Path(ctxd.root)  # type: ignore[attr-defined]
    folder = root / "--swapped--"
    session_id = "0199aaaa-0000-7000-8000-00000000cafe"
    inner = folder / f"2025-01-01T00-00-00-000Z_{session_id}.jsonl"
    write_session(inner, session_id, "inside")
    opened = await call(ctxd, p.SESSION_OPEN, {"session": session_id})
    assert opened["path"] == str(inner)
    await call(ctxd, p.SESSION_TREE, {"session": str(inner)})
    # The folder is replaced by a link to a folder outside holding a file of the same name.
    shutil.move(str(folder), str(tmp_path / "moved-away"))
    elsewhere = tmp_path / "elsewhere"
    write_session(elsewhere / inner.name, session_id, "outside")
    folder.symlink_to(elsewhere, target_is_directory=True)
    before = snapshot(elsewhere)
    try:
        for ref in (session_id, str(inner), os.path.relpath(inner, root)):
            for method, extra in (
                (p.SESSION_OPEN, {}),
                (p.CONTEXT_BUILD, {}),
                (p.SESSION_APPEND, {"messages": [user("injected")]}),
                (p.SESSION_FORK, {"entryId": "e0000000"}),
            ):
                error = await call_error(ctxd, method, {"session": ref, **extra})
                assert error.code == -31001, (method, ref, error)
        assert snapshot(elsewhere) == before
    finally:
        folder.unlink()


async def test_a_link_retargeted_outside_no_longer_reaches_the_session(ctxd: LanguageClient, outside: Path) -> None:
    root = Path(ctxd.root)  # type: ignore[attr-defined]
    path = await new_session(ctxd)
    await append(ctxd, path, user("hello"), assistant("hi"))
    link = root / "alias.jsonl"
    link.symlink_to(path)
    try:
        assert (await call(ctxd, p.SESSION_OPEN, {"session": "alias.jsonl"}))["path"] == path
        assert (await call(ctxd, p.SESSION_OPEN, {"session": str(link)}))["path"] == path
        link.unlink()
        link.symlink_to(next(outside.iterdir()))
        before = snapshot(outside)
        for ref in ("alias.jsonl", str(link)):
            assert (await call_error(ctxd, p.SESSION_OPEN, {"session": ref})).code == -31001
            error = await call_error(ctxd, p.SESSION_APPEND, {"session": ref, "messages": [user("x")]})
            assert error.code == -31001
        assert snapshot(outside) == before
        assert (await call(ctxd, p.SESSION_OPEN, {"session": path}))["entries"] == 2  # the real one still works
    finally:
        link.unlink()


async def test_create_refuses_a_root_or_a_cwd_folder_that_leads_outside(
    ctxd: LanguageClient, outside: Path, tmp_path: Path
) -> None:
    root = Path(ctxd.root)  # type: ignore[attr-defined]
    before = snapshot(outside)
    # A folder in pi's layout that is a link to a folder outside.
    (root / "--evil--").symlink_to(outside, target_is_directory=True)
    escape = root / "escape"
    escape.symlink_to(outside, target_is_directory=True)
    try:
        error = await call_error(ctxd, p.SESSION_CREATE, {"cwd": "/evil"})
        assert error.code == -31001
        error = await call_error(ctxd, p.SESSION_CREATE, {"cwd": "/proj", "root": str(escape)})
        assert error.code == -31001
        error = await call_error(ctxd, p.SESSION_CREATE, {"cwd": "/proj", "root": str(tmp_path)})
        assert error.code == -31001
        assert snapshot(outside) == before
        listed = await call_error(ctxd, p.SESSION_LIST, {"roots": [str(escape)]})
        assert listed.code == -31001
    finally:
        (root / "--evil--").unlink()
        escape.unlink()


async def test_fork_refuses_a_destination_outside(ctxd: LanguageClient, outside: Path, tmp_path: Path) -> None:
    """A fork goes next to its session: a folder swapped for a link leads it outside."""
    path = await new_session(ctxd, cwd="/forky")
    ids = (await append(ctxd, path, user("hello"), assistant("hi")))["ids"]
    folder = Path(path).parent
    # Swap the session's folder for a link to an outside copy: the fork would go next to the file.
    shutil.move(str(folder), str(tmp_path / "forky-moved"))
    shutil.copytree(tmp_path / "forky-moved", outside / "forky")
    folder.symlink_to(outside / "forky", target_is_directory=True)
    before = snapshot(outside)
    try:
        error = await call_error(ctxd, p.SESSION_FORK, {"session": path, "entryId": ids[0]})
        assert error.code == -31001
        assert snapshot(outside) == before
    finally:
        folder.unlink()


async def test_compacting_a_transcript_refuses_a_fork_folder_that_leads_outside(
    ctxd: LanguageClient, outside: Path
) -> None:
    """A read-only transcript compacts into a pi fork under the first root, in pi's folder for its cwd."""
    root = Path(ctxd.root)  # type: ignore[attr-defined]
    transcript = root.parent / f"{root.name}-claude" / "-Users-user-repo" / "session-624a4a58.jsonl"
    transcript.parent.mkdir()
    shutil.copy(DATA / "claude" / "session-624a4a58.jsonl", transcript)
    folder = root / "--Users-user-repo--"  # where the fork would go
    folder.symlink_to(outside, target_is_directory=True)
    before = snapshot(outside)
    try:
        error = await call_error(ctxd, p.COMPACT, {"session": str(transcript)})
        assert error.code == -31001
        assert snapshot(outside) == before
    finally:
        folder.unlink()
    compacted = await call(ctxd, p.COMPACT, {"session": str(transcript)})  # the real folder: fine
    assert compacted["forkedFrom"] == str(transcript) and compacted["session"].startswith(str(folder))


async def test_the_watcher_ignores_links_to_files_outside(ctxd: LanguageClient, outside: Path) -> None:
    notes = ctxd.notes  # type: ignore[attr-defined]
    root = Path(ctxd.root)  # type: ignore[attr-defined]
    target = next(outside.iterdir())
    mark = notes.mark()
    link = root / "--watched--" / "2025-01-01T00-00-00-000Z_linked.jsonl"
    link.parent.mkdir()
    link.symlink_to(target)
    try:
        # Something inside, announced after the link: by then the link has been seen too.
        path = await new_session(ctxd, cwd="/watched")
        await notes.wait(p.DID_CREATE, session=path, since=mark)
        with target.open("a") as f:
            f.write(json.dumps({"type": "session_info", "id": "i0000000", "parentId": "e0000000", "name": "x"}) + "\n")
        await asyncio.sleep(1.5)
        for method, params in notes.items[mark:]:
            if method == p.DID_DELETE:
                continue  # links removed by earlier tests (paths inside the root)
            text = json.dumps(params)
            assert str(outside) not in text and "_linked" not in text and OUTSIDE_ID not in text, (method, params)
    finally:
        link.unlink()
