"""``ctxd setup neovim``: the plugin in Neovim's own package folder, pointing at this ctxd.

The plugin (``lua/``, ``plugin/``, ``doc/``) is copied to ``$XDG_DATA_HOME/nvim/site/pack/ctxd/start/ctxd``,
which Neovim loads at start without any configuration, with ``lua/ctxd/installed.lua`` naming this ctxd's
absolute path (the plugin's default ``cmd``). With a plugin manager that resets the package path (lazy.nvim),
the spec setup prints loads the same folder.
"""

from __future__ import annotations

import os

from ctxd.setup import bundle
from ctxd.setup.base import Context, Record, SetupError, copy_files, remove_tree, update_tree

NAME = "neovim"


def pack_dir(ctx: Context) -> str:
    return os.path.join(ctx.xdg("XDG_DATA_HOME", ".local/share"), "nvim", "site", "pack", "ctxd", "start", "ctxd")


def detect(ctx: Context) -> str | None:
    found = ctx.which("nvim")
    if found:
        return found
    config = os.path.join(ctx.xdg("XDG_CONFIG_HOME", ".config"), "nvim")
    return config if os.path.isdir(config) else None


def _lua_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def spec(folder: str) -> str:
    """The lazy.nvim spec loading the installed plugin."""
    return f"{{ dir = {_lua_string(folder)}, name = 'ctxd', opts = {{}} }}"


def install(ctx: Context, record: Record) -> list[str]:
    if detect(ctx) is None:
        raise SetupError("Neovim not found: no `nvim` on PATH and no ~/.config/nvim")
    files = bundle.files(NAME)
    if "plugin/ctxd.lua" not in files:
        raise SetupError("this ctxd has no Neovim plugin files (ctxd/bundled/neovim): reinstall ctxd")
    target = pack_dir(ctx)
    lines: list[str] = []

    def build(folder: str) -> None:
        copy_files(files, folder)
        with open(os.path.join(folder, "lua", "ctxd", "installed.lua"), "w", encoding="utf-8") as f:
            f.write(
                f"-- Written by `ctxd setup neovim`: the ctxd this plugin starts.\nreturn {{ cmd = {{ "
                f"{_lua_string(ctx.ctxd)}, 'serve' }} }}\n"
            )

    if update_tree(ctx, target, build):
        done = ctx.did("write", "wrote")
        lines.append(f"{done} the plugin to {target} (Neovim loads it at start; cmd: {ctx.ctxd} serve)")
    record.copy = target
    lines.append(f"with lazy.nvim, add this spec instead: {spec(target)}")
    return lines


def uninstall(ctx: Context, record: Record) -> list[str]:
    target = record.copy or pack_dir(ctx)
    lines = []
    if os.path.exists(target):
        if not ctx.dry_run:
            remove_tree(target)
            for parent in (os.path.dirname(target), os.path.dirname(os.path.dirname(target))):
                if os.path.isdir(parent) and not os.listdir(parent):
                    os.rmdir(parent)
        lines.append(f"{ctx.did('remove', 'removed')} {target}")
    return lines
