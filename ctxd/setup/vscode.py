"""``ctxd setup vscode``: the extension's ``.vsix`` with ``code --install-extension``, and the daemon command.

The ``.vsix`` is the one ``make dist`` built (shipped in the wheel when it was built first) or ``--vsix FILE``
(``CTXD_VSIX``). ``code``, ``codium`` or ``code-server`` is used, whichever is on PATH first; the user settings
file (JSON with comments: its comments and layout are kept) gets ``ctxd.server.command`` = this ctxd's absolute
path and ``serve``, and is put back by ``--uninstall``.
"""

from __future__ import annotations

import os

from ctxd.setup import bundle, jsonfiles
from ctxd.setup.base import Context, Record, SetupError, shell_line

NAME = "vscode"
EXTENSION_ID = "ctxd.ctxd"
COMMAND_KEY = ("ctxd.server.command",)
EDITORS = ("code", "codium", "code-server")


def detect(ctx: Context) -> str | None:
    return ctx.which(*EDITORS)


def settings_path(ctx: Context, binary: str) -> str:
    if os.path.basename(binary) == "code-server":
        return os.path.join(ctx.xdg("XDG_DATA_HOME", ".local/share"), "code-server", "User", "settings.json")
    folder = "VSCodium" if os.path.basename(binary) == "codium" else "Code"
    return os.path.join(ctx.xdg("XDG_CONFIG_HOME", ".config"), folder, "User", "settings.json")


def vsix(ctx: Context) -> str:
    explicit = ctx.environ.get("CTXD_VSIX")
    if explicit:
        return os.path.abspath(explicit)
    shipped = bundle.files(NAME).get("ctxd.vsix")
    if shipped is None:
        raise SetupError("no ctxd.vsix here: build it (`make dist`) and pass it as CTXD_VSIX=path/to/ctxd.vsix")
    return shipped


def _editor(ctx: Context) -> str:
    found = detect(ctx)
    if found is None:
        raise SetupError("VS Code not found: none of `code`, `codium`, `code-server` is on PATH")
    return found


def installed_extensions(ctx: Context, binary: str) -> list[str]:
    out = ctx.run([binary, "--list-extensions", "--show-versions"])
    return [line.strip() for line in out.splitlines() if line.strip().lower().startswith(EXTENSION_ID + "@")]


def install(ctx: Context, record: Record) -> list[str]:
    binary = _editor(ctx)
    lines: list[str] = []
    if f"{EXTENSION_ID}@{ctx.version}" not in installed_extensions(ctx, binary):
        argv = [binary, "--install-extension", vsix(ctx), "--force"]
        if not ctx.dry_run:
            ctx.run(argv)
        lines.append(f"{ctx.did('run', 'ran')}: {shell_line(argv)}")
    path = settings_path(ctx, binary)
    before = jsonfiles.load(path, comments=True)
    command = shell_line([ctx.ctxd, "serve"]) if " " not in ctx.ctxd else f'"{ctx.ctxd}" serve'
    if jsonfiles.get(before, COMMAND_KEY) != command:
        if ctx.dry_run:
            wanted = jsonfiles.load(path, comments=True)
            jsonfiles.put(wanted, COMMAND_KEY, command)
            jsonfiles.changed_text(path, wanted, indent=4, comments=True)  # refuses now what it would refuse then
            lines.append(f"would set ctxd.server.command in {path} to {command}")
        else:
            jsonfiles.remember(record, path)
            jsonfiles.put(before, COMMAND_KEY, command)
            jsonfiles.save(path, before, indent=4, comments=True)
            lines.append(f"changed {path}: ctxd.server.command = {command}")
    record.extra = {"editor": binary, "settings": path}
    return lines


def uninstall(ctx: Context, record: Record) -> list[str]:
    lines: list[str] = []
    binary = ctx.which(*EDITORS) or record.extra.get("editor")
    if binary and installed_extensions(ctx, binary):
        argv = [binary, "--uninstall-extension", EXTENSION_ID]
        if not ctx.dry_run:
            ctx.run(argv)
        lines.append(f"{ctx.did('run', 'ran')}: {shell_line(argv)}")
    path = record.extra.get("settings") or (settings_path(ctx, binary) if binary else "")
    restored = None
    if path:
        restored = jsonfiles.restore(record, str(path), [COMMAND_KEY], ctx.dry_run, comments=True, indent=4)
    if restored:
        lines.append(restored)
    return lines
