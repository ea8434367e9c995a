"""``ctxd setup claude-code``: the Claude Code plugin from a built copy, pointing at this ctxd.

The copy lives in ``$XDG_DATA_HOME/ctxd/integrations/claude-code`` (the plugin's files from the wheel, a
marketplace manifest named ``ctxd-setup`` and ``ctxd.path``, the absolute path of the ctxd command, which
``bin/ctxd-hook`` reads when ``CTXD_BIN`` is unset). Claude Code's own commands add that marketplace and install
the plugin (``claude plugin marketplace add`` / ``claude plugin install``), so a clone that moves or goes away
changes nothing. Claude Code's settings file is kept as it was before and put back by ``--uninstall``.
"""

from __future__ import annotations

import json
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
    write_text,
)

NAME = "claude-code"
MARKETPLACE = "ctxd-setup"
"""Distinct from the repository's marketplace (``ctxd``) and integrations/claude-code's own (``ctxd-dev``)."""
PLUGIN_ID = f"ctxd@{MARKETPLACE}"


def config_dir(ctx: Context) -> str:
    value = ctx.environ.get("CLAUDE_CONFIG_DIR", "")
    return value if os.path.isabs(value) else os.path.join(ctx.home, ".claude")


def settings_path(ctx: Context) -> str:
    return os.path.join(config_dir(ctx), "settings.json")


def claude(ctx: Context) -> str:
    found = ctx.which("claude")
    if found is None:
        where = "" if not os.path.isdir(config_dir(ctx)) else f" ({config_dir(ctx)} exists, but no `claude` command)"
        raise SetupError(
            f"Claude Code not found on PATH{where}: install it (npm install -g @anthropic-ai/claude-code) "
            "or put `claude` on PATH, then run `ctxd setup claude-code` again"
        )
    return found


def detect(ctx: Context) -> str | None:
    found = ctx.which("claude")
    if found:
        return found
    return config_dir(ctx) if os.path.isdir(config_dir(ctx)) else None


def build_copy(ctx: Context, into: str) -> None:
    """The plugin as Claude Code will load it: the shipped files, its marketplace and ``ctxd.path``."""
    files = {rel: src for rel, src in bundle.files(NAME).items() if rel != ".claude-plugin/marketplace.json"}
    if "bin/ctxd-hook" not in files:
        raise SetupError("this ctxd has no Claude Code plugin files (ctxd/bundled/claude-code): reinstall ctxd")
    copy_files(files, into)
    with open(os.path.join(into, ".claude-plugin", "plugin.json"), encoding="utf-8") as f:
        plugin = json.load(f)
    marketplace = {
        "name": MARKETPLACE,
        "owner": {"name": "ctxd"},
        "description": "ctxd's Claude Code plugin, installed by `ctxd setup claude-code`.",
        "plugins": [{"name": plugin["name"], "source": "./", "description": plugin.get("description", "")}],
    }
    write_text(os.path.join(into, ".claude-plugin", "marketplace.json"), json.dumps(marketplace, indent=2) + "\n")
    write_text(os.path.join(into, "ctxd.path"), ctx.ctxd + "\n")


def _json(ctx: Context, argv: list[str]) -> Any:
    out = ctx.run(argv)
    try:
        return json.loads(out)
    except ValueError:
        raise SetupError(f"`{shell_line(argv)}` printed no JSON: {out[:500]}") from None


def state(ctx: Context, binary: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(Claude Code's marketplaces by name, its installed plugins)."""
    markets = {m.get("name"): m for m in _json(ctx, [binary, "plugin", "marketplace", "list", "--json"])}
    plugins = list(_json(ctx, [binary, "plugin", "list", "--json"]))
    return markets, plugins


def install(ctx: Context, record: Record) -> list[str]:
    binary = claude(ctx)
    copy = ctx.copy_dir(NAME)
    lines: list[str] = []
    fresh = update_tree(ctx, copy, lambda folder: build_copy(ctx, folder))
    if fresh:
        lines.append(f"{ctx.did('write', 'wrote')} the plugin to {copy} (ctxd.path: {ctx.ctxd})")
    markets, plugins = state(ctx, binary)
    ours = [p for p in plugins if p.get("id") == PLUGIN_ID]
    settings = settings_path(ctx)
    before = jsonfiles.load(settings)
    commands: list[list[str]] = []
    market = markets.get(MARKETPLACE)
    if market is not None and os.path.realpath(str(market.get("path", ""))) != os.path.realpath(copy):
        if ours:
            commands.append([binary, "plugin", "uninstall", PLUGIN_ID])
            ours = []
        commands.append([binary, "plugin", "marketplace", "remove", MARKETPLACE])
        market = None
    if market is None:
        commands.append([binary, "plugin", "marketplace", "add", copy])
    if ours and fresh:  # Claude Code runs its own cached copy of the plugin: refresh it
        commands.append([binary, "plugin", "uninstall", PLUGIN_ID])
        ours = []
    if not ours:
        commands.append([binary, "plugin", "install", PLUGIN_ID, "--scope", "user"])
    elif not all(p.get("enabled") for p in ours):
        commands.append([binary, "plugin", "enable", PLUGIN_ID])
    if commands and not ctx.dry_run:
        jsonfiles.remember(record, settings)
    for argv in commands:
        if not ctx.dry_run:
            ctx.run(argv)
        lines.append(f"{ctx.did('run', 'ran')}: {shell_line(argv)}")
    if not ctx.dry_run:
        lines += [f"changed {settings}: {c}" for c in jsonfiles.changes(before, jsonfiles.load(settings))]
    record.copy = copy
    record.extra = {"configDir": config_dir(ctx), "plugin": PLUGIN_ID, "claude": binary}
    lines += _others(plugins)
    return lines


def _others(plugins: list[dict[str, Any]]) -> list[str]:
    """Warnings about other ctxd plugins (from a clone's marketplace): their hooks would run twice."""
    return [
        f"note: {p['id']} is installed too (from {p.get('readFromFolder') or p.get('installPath')}): each hook would "
        f"run twice; remove it with `claude plugin uninstall {p['id']}`"
        for p in plugins
        if str(p.get("id", "")).startswith("ctxd@") and p.get("id") != PLUGIN_ID
    ]


def uninstall(ctx: Context, record: Record) -> list[str]:
    lines: list[str] = []
    binary = ctx.which("claude") or record.extra.get("claude")
    if binary and os.access(binary, os.X_OK):
        markets, plugins = state(ctx, binary)
        commands = []
        if any(p.get("id") == PLUGIN_ID for p in plugins):
            commands.append([binary, "plugin", "uninstall", PLUGIN_ID])
        if MARKETPLACE in markets:
            commands.append([binary, "plugin", "marketplace", "remove", MARKETPLACE])
        for argv in commands:
            if not ctx.dry_run:
                ctx.run(argv)
            lines.append(f"{ctx.did('run', 'ran')}: {shell_line(argv)}")
    else:
        lines.append("Claude Code not found: its plugin list is left as it is")
    cache = os.path.join(config_dir(ctx), "plugins", "cache", MARKETPLACE)
    for folder in (cache, record.copy or ctx.copy_dir(NAME)):
        if os.path.exists(folder):
            if not ctx.dry_run:
                remove_tree(folder)
            lines.append(f"{ctx.did('remove', 'removed')} {folder}")
    ours = [("enabledPlugins", PLUGIN_ID), ("extraKnownMarketplaces", MARKETPLACE)]
    restored = jsonfiles.restore(record, settings_path(ctx), ours, ctx.dry_run)
    if restored:
        lines.append(restored)
    return lines
