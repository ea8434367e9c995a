"""``ctxd setup`` and ``ctxd doctor``: each agent's or editor's integration installed with one command.

One row per integration in :data:`INTEGRATIONS`.
Every installer writes the integration with the absolute path of the ctxd running it, from a copy in ctxd's
data folder (never the clone), records what it did (:mod:`ctxd.setup.base`) and returns the lines saying so;
``ctxd doctor`` (:mod:`ctxd.setup.doctor`) checks what the records say is installed.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs

from ctxd.setup import claude_code, codex, neovim, opencode, pi, vscode
from ctxd.setup.base import Context, Record, SetupError, drop_record, load_record, save_record


@attrs.frozen
class Integration:
    name: str
    title: str
    detect: Callable[[Context], str | None]
    install: Callable[[Context, Record], list[str]]
    uninstall: Callable[[Context, Record], list[str]]


INTEGRATIONS: dict[str, Integration] = {
    i.name: i
    for i in (
        Integration("claude-code", "Claude Code", claude_code.detect, claude_code.install, claude_code.uninstall),
        Integration("pi", "pi", pi.detect, pi.install, pi.uninstall),
        Integration("vscode", "VS Code", vscode.detect, vscode.install, vscode.uninstall),
        Integration("neovim", "Neovim", neovim.detect, neovim.install, neovim.uninstall),
        Integration("codex", "Codex", codex.detect, codex.install, codex.uninstall),
        Integration("opencode", "opencode", opencode.detect, opencode.install, opencode.uninstall),
    )
}


def setup(name: str, ctx: Context, *, uninstall: bool = False) -> list[str]:
    """Install (or remove) integration ``name``; the lines saying what changed (or would, in a dry run)."""
    integration = INTEGRATIONS[name]
    record = load_record(ctx, name)
    if uninstall:
        lines = integration.uninstall(ctx, record or Record(name))
        if record is not None and not ctx.dry_run:
            drop_record(ctx, name)
        return lines or [f"{integration.title}: nothing of ctxd's is installed"]
    if integration.detect(ctx) is None:
        raise SetupError(f"{integration.title} not found on this machine (see `ctxd setup --help`)")
    record = record or Record(name)
    record.ctxd = ctx.ctxd
    record.version = ctx.version
    lines = integration.install(ctx, record)
    if not ctx.dry_run:
        save_record(ctx, record)
    changed = [line for line in lines if not line.startswith(("note:", "with lazy.nvim"))]
    if not changed:
        lines.insert(0, f"{integration.title}: nothing to change (installed, running {ctx.ctxd})")
    return lines


__all__ = ["INTEGRATIONS", "Context", "Integration", "SetupError", "setup"]
