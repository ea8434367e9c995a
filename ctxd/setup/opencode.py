"""``ctxd setup opencode``: the opencode plugin from a built copy, and ctxd's MCP server, in opencode.json.

The plugin is assembled in ``$XDG_DATA_HOME/ctxd/integrations/opencode`` (its TypeScript with ctxd's client
vendored, as for pi: :func:`ctxd.setup.pi.assemble_package`); in that copy the plugin's default daemon command
is this ctxd's absolute path (``CTXD_OPENCODE_COMMAND`` still overrides it). opencode's global config
(``$XDG_CONFIG_HOME/opencode/opencode.json``) gets the copy's ``file://`` URL in ``plugin`` and
``mcp.ctxd`` = ``{"type": "local", "command": [ctxd, "mcp"]}``; ``--uninstall`` puts the file back as it was.
opencode reads its config as JSON with comments: comments, trailing commas and layout are kept, and a user who
keeps it in ``opencode.jsonc`` (with no ``opencode.json`` beside it) has that file changed.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ctxd.setup import jsonfiles
from ctxd.setup.base import Context, Record, SetupError, remove_tree, update_tree
from ctxd.setup.pi import assemble_package

NAME = "opencode"
DEFAULT_COMMAND = "splitCommand(env.CTXD_OPENCODE_COMMAND || 'ctxd serve')"
MCP_KEY = ("mcp", "ctxd")


def config_dir(ctx: Context) -> str:
    return os.path.join(ctx.xdg("XDG_CONFIG_HOME", ".config"), "opencode")


def config_path(ctx: Context) -> str:
    """``opencode.json``, or ``opencode.jsonc`` when that is the one there."""
    plain, commented = (os.path.join(config_dir(ctx), name) for name in ("opencode.json", "opencode.jsonc"))
    return commented if os.path.exists(commented) and not os.path.exists(plain) else plain


def detect(ctx: Context) -> str | None:
    return ctx.which("opencode") or (config_dir(ctx) if os.path.isdir(config_dir(ctx)) else None)


def plugin_url(copy: str) -> str:
    return Path(copy, "src", "index.ts").as_uri()


def assemble(ctxd: str, into: str) -> None:
    """The plugin's package in ``into``, its default daemon command ``[ctxd, "serve"]``."""
    assemble_package(NAME, into)
    path = os.path.join(into, "src", "index.ts")
    with open(path, encoding="utf-8") as f:
        text = f.read()
    if DEFAULT_COMMAND not in text:
        raise SetupError(f"the opencode plugin no longer reads {DEFAULT_COMMAND}: update ctxd/setup/opencode.py")
    command = json.dumps([ctxd, "serve"])
    replacement = f"(env.CTXD_OPENCODE_COMMAND ? splitCommand(env.CTXD_OPENCODE_COMMAND) : {command})"
    with open(path, "w", encoding="utf-8") as f:
        f.write(text.replace(DEFAULT_COMMAND, replacement))


def _strip(copy: str) -> Any:
    def strip(settings: dict[str, Any]) -> None:
        plugins = settings.get("plugin")
        if isinstance(plugins, list) and plugin_url(copy) in plugins:
            settings["plugin"] = [p for p in plugins if p != plugin_url(copy)]

    return strip


def install(ctx: Context, record: Record) -> list[str]:
    copy = ctx.copy_dir(NAME)
    lines: list[str] = []
    if update_tree(ctx, copy, lambda into: assemble(ctx.ctxd, into)):
        lines.append(f"{ctx.did('write', 'wrote')} the plugin package to {copy} (daemon: {ctx.ctxd} serve)")
    path = config_path(ctx)
    before = jsonfiles.load(path, comments=True)
    after = json.loads(json.dumps(before))
    plugins = after.setdefault("plugin", [])
    if not isinstance(plugins, list):
        raise SetupError(f"{path}: `plugin` is not a list; ctxd setup leaves it alone")
    if plugin_url(copy) not in plugins:
        plugins.append(plugin_url(copy))
    mcp = {"type": "local", "command": [ctx.ctxd, "mcp"]}
    if jsonfiles.get(after, MCP_KEY) not in (None, mcp) and not record.settings_before:
        lines.append(f"note: {path} already has mcp.ctxd: left as it is")
    else:
        jsonfiles.put(after, MCP_KEY, mcp)
    if after != before:
        if ctx.dry_run:
            jsonfiles.changed_text(path, after, comments=True)  # refuses now what it would refuse then
        else:
            jsonfiles.remember(record, path)
            jsonfiles.save(path, after, comments=True)
        lines += [f"{ctx.did('change', 'changed')} {path}: {c}" for c in jsonfiles.changes(before, after)]
    others = [p for p in plugins if isinstance(p, str) and "ctxd" in p and "opencode" in p and p != plugin_url(copy)]
    lines += [f"note: opencode also loads {p}: if it is ctxd's plugin too, remove it from {path}" for p in others]
    record.copy = copy
    record.extra = {"config": path, "opencode": ctx.which("opencode") or ""}
    return lines


def uninstall(ctx: Context, record: Record) -> list[str]:
    lines: list[str] = []
    copy = record.copy or ctx.copy_dir(NAME)
    path = str(record.extra.get("config") or config_path(ctx))
    restored = jsonfiles.restore(record, path, [MCP_KEY], ctx.dry_run, strip=_strip(copy), comments=True)
    if restored:
        lines.append(restored)
    if os.path.exists(copy):
        if not ctx.dry_run:
            remove_tree(copy)
        lines.append(f"{ctx.did('remove', 'removed')} {copy}")
    return lines
