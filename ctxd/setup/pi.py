"""``ctxd setup pi``: pi's extension as a self-contained package, installed with ``pi install``.

The package is assembled in ``$XDG_DATA_HOME/ctxd/integrations/pi``: the extension's TypeScript, with ctxd's
TypeScript client vendored under ``src/ctxd-client/`` (in the repository it is imported from
``clients/typescript``), so pi loads it without the clone. ``make dist`` packs the same folder with ``npm pack``
(:func:`assemble`). The daemon command (``ctxd.command`` in pi's ``settings.json``) is set to this ctxd's
absolute path; the settings file is put back as it was by ``--uninstall``.
"""

from __future__ import annotations

import os
from typing import Any

from ctxd.setup import bundle, jsonfiles
from ctxd.setup.base import (
    Context,
    Record,
    SetupError,
    copy_files,
    remove_tree,
    shell_line,
    update_tree,
)

NAME = "pi"
REPO_CLIENT = "'../../../clients/typescript/src/index'"
VENDORED_CLIENT = "'./ctxd-client/index'"
COMMAND_KEY = ("ctxd", "command")


def assemble(into: str) -> None:
    """Write the self-contained package into folder ``into``."""
    assemble_package(NAME, into)


def assemble_package(name: str, into: str) -> None:
    """Write integration ``name``'s TypeScript package into ``into`` with ctxd's client vendored under
    ``src/ctxd-client/`` (its ``src/client.ts`` imports it from the repository's clients/typescript)."""
    files = bundle.files(name)
    client = {rel.replace("src/", "src/ctxd-client/", 1): src for rel, src in bundle.files("client-ts").items()}
    if "src/index.ts" not in files or "src/ctxd-client/index.ts" not in client:
        raise SetupError(f"this ctxd has no {name} files (ctxd/bundled/{name}, client-ts): reinstall ctxd")
    copy_files(files, into)
    copy_files({k: v for k, v in client.items() if k.startswith("src/")}, into)
    path = os.path.join(into, "src", "client.ts")
    with open(path, encoding="utf-8") as f:
        text = f.read()
    if REPO_CLIENT not in text:
        raise SetupError(f"{files['src/client.ts']} no longer imports {REPO_CLIENT}: update ctxd/setup/pi.py")
    with open(path, "w", encoding="utf-8") as f:
        f.write(text.replace(REPO_CLIENT, VENDORED_CLIENT))


def agent_dir(ctx: Context) -> str:
    value = ctx.environ.get("PI_CODING_AGENT_DIR", "")
    return value if value else os.path.join(ctx.home, ".pi", "agent")


def settings_path(ctx: Context) -> str:
    return os.path.join(agent_dir(ctx), "settings.json")


def detect(ctx: Context) -> str | None:
    found = ctx.which("pi")
    if found:
        return found
    return agent_dir(ctx) if os.path.isdir(agent_dir(ctx)) else None


def _pi(ctx: Context) -> str:
    found = ctx.which("pi")
    if found is None:
        raise SetupError(
            "pi not found on PATH: install it (npm install -g @earendil-works/pi-coding-agent), "
            "then run `ctxd setup pi` again"
        )
    return found


def listed_sources(ctx: Context, settings: dict[str, Any]) -> list[tuple[str, str]]:
    """(source as written, the folder it names) for each local package in pi's settings."""
    out = []
    for pkg in settings.get("packages") or []:
        source = pkg if isinstance(pkg, str) else pkg.get("source") if isinstance(pkg, dict) else None
        if not isinstance(source, str) or source.startswith(("npm:", "git:", "http:", "https:")):
            continue
        path = os.path.expanduser(source) if source.startswith("~") else source
        out.append((source, os.path.realpath(os.path.join(agent_dir(ctx), path))))
    return out


def install(ctx: Context, record: Record) -> list[str]:
    binary = _pi(ctx)
    copy = ctx.copy_dir(NAME)
    lines: list[str] = []
    fresh = update_tree(ctx, copy, assemble)
    if fresh:
        lines.append(f"{ctx.did('write', 'wrote')} the extension package to {copy}")
    path = settings_path(ctx)
    before = jsonfiles.load(path)
    listed = [s for s, folder in listed_sources(ctx, before) if folder == os.path.realpath(copy)]
    command = [ctx.ctxd, "serve"]
    if (not listed or jsonfiles.get(before, COMMAND_KEY) != command) and not ctx.dry_run:
        jsonfiles.remember(record, path)
    if not listed:
        argv = [binary, "install", copy]
        if not ctx.dry_run:
            ctx.run(argv)
        lines.append(f"{ctx.did('run', 'ran')}: {shell_line(argv)}")
    if jsonfiles.get(before, COMMAND_KEY) != command:
        if not ctx.dry_run:
            settings = jsonfiles.load(path)
            jsonfiles.put(settings, COMMAND_KEY, command)
            jsonfiles.save(path, settings)
        else:
            lines.append(f"would set ctxd.command in {path} to {command}")
    if not ctx.dry_run:
        lines += [f"changed {path}: {c}" for c in jsonfiles.changes(before, jsonfiles.load(path))]
    lines += [
        f"note: pi also loads {source} ({folder}): if it is ctxd's extension too, remove it with `pi remove {source}`"
        for source, folder in listed_sources(ctx, before)
        if folder != os.path.realpath(copy) and os.path.basename(folder) == "pi" and "integrations" in folder
    ]
    record.copy = copy
    record.extra = {"agentDir": agent_dir(ctx), "pi": binary}
    return lines


def uninstall(ctx: Context, record: Record) -> list[str]:
    lines: list[str] = []
    path = settings_path(ctx)
    copy = record.copy or ctx.copy_dir(NAME)
    listed = [s for s, folder in listed_sources(ctx, jsonfiles.load(path)) if folder == os.path.realpath(copy)]
    binary = ctx.which("pi") or record.extra.get("pi")
    for source in listed:
        if binary is None:
            lines.append(f"pi not found: remove {source} from {path} by hand")
            continue
        argv = [binary, "remove", copy]  # as written it is relative to pi's folder; pi resolves the argument
        if not ctx.dry_run:
            ctx.run(argv)
        lines.append(f"{ctx.did('run', 'ran')}: {shell_line(argv)}")
    if os.path.exists(copy):
        if not ctx.dry_run:
            remove_tree(copy)
        lines.append(f"{ctx.did('remove', 'removed')} {copy}")
    restored = jsonfiles.restore(record, path, [COMMAND_KEY], ctx.dry_run)
    if restored:
        lines.append(restored)
    return lines
