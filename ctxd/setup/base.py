"""What every integration's installer shares: the environment it looks at, the record of what it installed,
the copies it owns in ctxd's data folder, and the commands it runs.

An installer never prints: it returns the lines saying what it changed (or, with ``dry_run``, would change);
the CLI prints them. Everything it installs is recorded in ``$XDG_DATA_HOME/ctxd/installed/<name>.json``
(:class:`Record`), which ``--uninstall`` and ``ctxd doctor`` read.
"""

from __future__ import annotations

import filecmp
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from ctxd import __version__
from ctxd.errors import CtxdError
from ctxd.store.files import atomic_write

COMMAND_TIMEOUT = 180.0


class SetupError(CtxdError):
    """Setup cannot go on; the message says why and what to do (the CLI prints it and exits 2)."""


def ctxd_executable(argv0: str | None = None) -> str:
    """The absolute path of the ``ctxd`` command running now, links resolved, so that nothing installed depends
    on PATH or an active virtual environment: the console script that started us, else the one beside this
    Python."""
    candidates = []
    argv0 = sys.argv[0] if argv0 is None else argv0
    if argv0 and os.path.basename(argv0) == "ctxd":
        candidates.append(shutil.which(argv0) if os.sep not in argv0 else argv0)
    candidates.append(os.path.join(os.path.dirname(sys.executable), "ctxd"))
    for found in candidates:
        if found and os.path.isfile(found) and os.access(found, os.X_OK):
            return os.path.realpath(os.path.abspath(found))
    raise SetupError(
        f"cannot find the ctxd command (started as {argv0!r}, Python {sys.executable}): "
        "install ctxd as a command (`pipx install ctxd-*.whl`) and run `ctxd setup` with it"
    )


@attrs.define
class Context:
    """What an installer works with: the environment (HOME, XDG_*, PATH, the agents' own variables), the ctxd
    command to write into the integration, and whether to change anything."""

    environ: Mapping[str, str]
    ctxd: str
    dry_run: bool = False
    version: str = __version__
    compact_prompt: bool = False
    """``ctxd setup codex --compact-prompt``: also install ctxd's compaction prompt."""

    @property
    def home(self) -> str:
        return self.environ.get("HOME") or os.path.expanduser("~")

    def xdg(self, key: str, fallback: str) -> str:
        value = self.environ.get(key, "")
        return value if os.path.isabs(value) else os.path.join(self.home, fallback)

    @property
    def data(self) -> str:
        """ctxd's data folder (``$XDG_DATA_HOME/ctxd``)."""
        return os.path.join(self.xdg("XDG_DATA_HOME", os.path.join(".local", "share")), "ctxd")

    def copy_dir(self, name: str) -> str:
        """Where ctxd keeps the built copy of integration ``name`` (what the agent or editor loads)."""
        return os.path.join(self.data, "integrations", name)

    def which(self, *names: str) -> str | None:
        for name in names:
            found = shutil.which(name, path=self.environ.get("PATH", os.defpath))
            if found:
                return os.path.abspath(found)
        return None

    def did(self, action: str, done: str) -> str:
        """``would ACTION`` in a dry run, else ``DONE`` (the lines setup prints)."""
        return f"would {action}" if self.dry_run else done

    def run(self, argv: Sequence[str], *, check: bool = True, timeout: float = COMMAND_TIMEOUT) -> str:
        """Run a command of the agent or editor (never in a dry run); its stdout. A failure raises SetupError
        with its output."""
        try:
            done = subprocess.run(
                list(argv),
                env=dict(self.environ),
                cwd=self.home if os.path.isdir(self.home) else None,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=timeout,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise SetupError(f"`{shell_line(argv)}` could not run: {exc}") from None
        if check and done.returncode != 0:
            output = (done.stderr.strip() or done.stdout.strip())[-2000:]
            raise SetupError(f"`{shell_line(argv)}` failed (exit {done.returncode}): {output}")
        return done.stdout


def shell_line(argv: Sequence[str]) -> str:
    import shlex

    return " ".join(shlex.quote(a) for a in argv)


# --- the record of an installation ----------------------------------------------------------------------------


@attrs.define
class Record:
    """What ``ctxd setup NAME`` installed: the ctxd it points at, the copy it made, the settings files it
    changed with their bytes from before (base64, or None when the file did not exist)."""

    integration: str
    ctxd: str = ""
    version: str = __version__
    copy: str = ""
    settings_before: dict[str, str | None] = attrs.field(factory=dict)
    extra: dict[str, Any] = attrs.field(factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "integration": self.integration,
            "ctxd": self.ctxd,
            "version": self.version,
            "copy": self.copy,
            "settingsBefore": self.settings_before,
            "extra": self.extra,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Record:
        return cls(
            integration=str(data.get("integration", "")),
            ctxd=str(data.get("ctxd", "")),
            version=str(data.get("version", "")),
            copy=str(data.get("copy", "")),
            settings_before=dict(data.get("settingsBefore") or {}),
            extra=dict(data.get("extra") or {}),
        )


def record_path(ctx: Context, name: str) -> str:
    return os.path.join(ctx.data, "installed", f"{name}.json")


def load_record(ctx: Context, name: str) -> Record | None:
    try:
        with open(record_path(ctx, name), encoding="utf-8") as f:
            return Record.from_json(json.load(f))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, AttributeError) as exc:
        raise SetupError(f"{record_path(ctx, name)} is unreadable ({exc}): remove it and run setup again") from None


def save_record(ctx: Context, record: Record) -> None:
    path = record_path(ctx, record.integration)
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    atomic_write(path, (json.dumps(record.to_json(), indent=2, sort_keys=True) + "\n").encode())


def drop_record(ctx: Context, name: str) -> None:
    try:
        os.unlink(record_path(ctx, name))
    except FileNotFoundError:
        pass


def installed_names(ctx: Context) -> list[str]:
    folder = os.path.join(ctx.data, "installed")
    try:
        return sorted(n.removesuffix(".json") for n in os.listdir(folder) if n.endswith(".json"))
    except FileNotFoundError:
        return []


# --- copies ---------------------------------------------------------------------------------------------------


def same_tree(a: str, b: str) -> bool:
    """Whether folders ``a`` and ``b`` hold the same files with the same bytes and executable bits."""
    if not (os.path.isdir(a) and os.path.isdir(b)):
        return False
    cmp = filecmp.dircmp(a, b, ignore=[])
    if cmp.left_only or cmp.right_only or cmp.funny_files:
        return False
    for name in cmp.common_files:
        pa, pb = os.path.join(a, name), os.path.join(b, name)
        if not filecmp.cmp(pa, pb, shallow=False) or os.access(pa, os.X_OK) != os.access(pb, os.X_OK):
            return False
    return all(same_tree(os.path.join(a, d), os.path.join(b, d)) for d in cmp.common_dirs)


def place_tree(staged: str, target: str) -> None:
    """Replace folder ``target`` by ``staged`` (a sibling built beside it), keeping the old one until the new one
    is in place."""
    old = target + ".old"
    shutil.rmtree(old, ignore_errors=True)
    if os.path.exists(target):
        os.replace(target, old)
    os.replace(staged, target)
    shutil.rmtree(old, ignore_errors=True)


def update_tree(ctx: Context, target: str, build: Callable[[str], None]) -> bool:
    """Build folder ``target``'s next version with ``build(folder)`` and put it in place if it differs (in a dry
    run it is built in a temporary folder and nothing is written); whether it differed."""
    if ctx.dry_run:
        with tempfile.TemporaryDirectory(prefix="ctxd-setup-") as scratch:
            build(scratch)
            return not same_tree(scratch, target)
    staged = target + ".new"
    shutil.rmtree(staged, ignore_errors=True)
    os.makedirs(staged, mode=0o755)
    try:
        build(staged)
        if same_tree(staged, target):
            return False
        place_tree(staged, target)
        return True
    finally:
        shutil.rmtree(staged, ignore_errors=True)


def copy_files(files: Mapping[str, str], into: str) -> None:
    """Copy ``{relative: source}`` into a folder; files keep their executable bit (0755), others are 0644."""
    for rel, src in files.items():
        dst = os.path.join(into, rel)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        shutil.copyfile(src, dst)
        os.chmod(dst, 0o755 if os.access(src, os.X_OK) else 0o644)


def write_text(path: str, text: str, mode: int = 0o644) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    os.chmod(path, mode)


def remove_tree(path: str) -> bool:
    if not os.path.lexists(path):
        return False
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    else:
        os.unlink(path)
    return True
