"""``session/create`` and ``session/fork`` answer a clean -31010 (never -32603 with a traceback)
when the file cannot be written: a full disk, a read-only mount, no permission, an over-long or
NUL ``cwd``, a root that is a file (issue 19, item 5) — as ``session/append`` does.  Each case is a
real daemon subprocess; the mounts need root (skipped with the reason otherwise), and EACCES is
real: the daemon runs without root's capabilities that override permissions (setpriv), since root is never
refused by them, and that works wherever the checkout is (a 0700 folder included)."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import mounts
from pytest_lsp import LanguageClient

from ctxd.service import protocol as p

from .harness import (
    SERVER_COMMAND,
    append,
    assistant,
    call,
    call_error,
    new_session,
    start_ctxd,
    user,
)


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Path]:
    with mounts.tmpfs(tmp_path / "tmpfs") as where:
        yield where


def clean(error: Any) -> None:
    assert error.code == -31010, (error.code, error.message)
    assert "Traceback" not in str(error.message) and "internal error" not in str(error.message)


async def refused_like_append(client: LanguageClient, path: str, root: Path, *, appends: bool = True) -> None:
    """create (in the session's root) and fork answer -31010; so does an append that needs room
    (a small one can fit in the file's last page), unless the daemon opened the file for appending
    before it was made read-only (``appends``: False)."""
    ids = (await call(client, p.SESSION_TREE, {"session": path, "collapse": 0}))["rows"]
    clean(await call_error(client, p.SESSION_FORK, {"session": path, "entryId": ids[0]["id"]}))
    clean(await call_error(client, p.SESSION_CREATE, {"cwd": "/proj", "root": str(root)}))
    clean(await call_error(client, p.SESSION_CREATE, {"cwd": "/elsewhere", "root": str(root)}))
    if appends:
        clean(await call_error(client, p.SESSION_APPEND, {"session": path, "messages": [user("more " * 4000)]}))


async def one_session(client: LanguageClient) -> str:
    path = await new_session(client, cwd="/proj")
    await append(client, path, user("hi"), assistant("hello"))
    return path


async def test_a_full_disk(tmpfs: Path) -> None:
    root = tmpfs / "root"
    root.mkdir()
    async with start_ctxd({"roots": [str(root)], "watch": False}) as client:
        path = await one_session(client)
        size = os.path.getsize(path)
        mounts.fill(tmpfs)
        await refused_like_append(client, path, root)
        # The batch that did not fit is not on disk, nor in what the daemon serves (item 3).
        batch = [user("big " * 1500) for _ in range(8)]
        clean(await call_error(client, p.SESSION_APPEND, {"session": path, "messages": batch}))
        assert os.path.getsize(path) == size
        built = await call(client, p.CONTEXT_BUILD, {"session": path})
        assert len(built["messages"]) == 2
        for name in ("filler", "filler2"):
            (tmpfs / name).unlink()
        await append(client, path, *batch)
        assert len((await call(client, p.CONTEXT_BUILD, {"session": path}))["messages"]) == 10
        assert (await call(client, p.SESSION_CHECK, {"session": path}))["findings"] == []


@pytest.fixture
def read_only(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """A folder and a read-only bind mount of it, unmounted in teardown."""
    mounts.needs_root()
    writable, ro = tmp_path / "writable", tmp_path / "ro"
    writable.mkdir()
    ro.mkdir()
    mounted = subprocess.run(["mount", "--bind", str(writable), str(ro)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot bind-mount here: {mounted.stderr.decode(errors='replace').strip()}")
    try:
        subprocess.run(["mount", "-o", "remount,bind,ro", str(ro)], check=True, capture_output=True)
        yield writable, ro
    finally:
        subprocess.run(["umount", "-l", str(ro)], check=False)


async def test_a_read_only_mount(read_only: tuple[Path, Path]) -> None:
    writable, ro = read_only
    async with start_ctxd({"roots": [str(writable)], "watch": False}) as client:
        made = await one_session(client)
    async with start_ctxd({"roots": [str(ro)], "watch": False}) as client:
        path = str(ro / Path(made).relative_to(writable))
        await refused_like_append(client, path, ro)


async def test_no_permission(tmp_path: Path) -> None:
    root, home = tmp_path / "root", tmp_path / "home"
    for folder in (root, home):
        folder.mkdir()
    env = {"HOME": str(home), "XDG_CACHE_HOME": str(home / "cache")}
    async with start_ctxd({"roots": [str(root)], "watch": False}, command=unprivileged(), **env) as client:
        path = await one_session(client)
        for folder in (root, Path(path).parent):
            folder.chmod(0o555)
        try:
            await refused_like_append(client, path, root, appends=False)
        finally:
            for folder in (root, Path(path).parent):
                folder.chmod(0o755)


# What lets root write where the permission bits say no (and read where they say no: dropped as well, so the
# daemon reads what its user could read).
DAC_CAPABILITIES = "-dac_override,-dac_read_search,-fowner"


def unprivileged() -> list[str]:
    """``SERVER_COMMAND`` as a user the permission bits bind, wherever the checkout and its Python are.

    As root: the same user without the capabilities that override file permissions (setpriv drops them from
    the bounding set, so the daemon and whatever it starts never hold them). Root keeps reading what root
    owns, so a checkout in a 0700 folder, or a Python under /root, still runs; writing into a 0555 folder is
    refused by the kernel (EACCES), as for any user. Not as root: the command as it is.
    """
    if os.geteuid() != 0:
        return SERVER_COMMAND
    if shutil.which("setpriv") is None:
        pytest.skip("setpriv (util-linux) is needed to run the daemon without root's file-permission override")
    return ["setpriv", "--inh-caps=-all", f"--bounding-set={DAC_CAPABILITIES}", *SERVER_COMMAND]


@pytest.mark.parametrize("cwd", ["/" + "a" * 5000, "/a/" + "b" * 300, "/a\x00b"], ids=["long", "long-name", "nul"])
async def test_a_cwd_that_cannot_be_a_folder(tmp_path: Path, cwd: str) -> None:
    async with start_ctxd({"roots": [str(tmp_path)], "watch": False}) as client:
        clean(await call_error(client, p.SESSION_CREATE, {"cwd": cwd}))
        path = await one_session(client)  # the daemon still serves
        assert (await call(client, p.SESSION_OPEN, {"session": path}))["entries"] == 2


async def test_a_root_that_is_a_file(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.write_text("not a folder\n")
    async with start_ctxd({"roots": [str(root)], "watch": False}) as client:
        clean(await call_error(client, p.SESSION_CREATE, {"cwd": "/proj"}))
