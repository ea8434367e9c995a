"""Where the integrations' files come from: the wheel's ``ctxd/bundled/`` or, in a checkout, the repository.

Standard library only and free of package imports: setup.py reads :data:`BUNDLE` from this file to copy the
files into the wheel, and ``ctxd setup`` copies them on from there into ctxd's data folder.
"""

from __future__ import annotations

import os

BUNDLE = {
    # name under ctxd/bundled: (folder in the repository, the paths it ships, relative to that folder)
    "claude-code": ("integrations/claude-code", ["README.md", ".mcp.json", "bin", "hooks", ".claude-plugin"]),
    "pi": ("integrations/pi", ["README.md", "package.json", "src"]),
    "client-ts": ("clients/typescript", ["package.json", "src"]),
    "neovim": ("editors/neovim", ["README.md", "lua", "plugin", "doc"]),
    "vscode": ("editors/vscode/dist", ["ctxd.vsix"]),  # present when `make dist` built it first
    "codex": ("integrations/codex", ["README.md", "hooks.json"]),
    "opencode": ("integrations/opencode", ["README.md", "package.json", "src"]),
}

_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def bundled(name: str) -> str | None:
    """The folder holding ``name``'s files (the wheel's copy, else the checkout's), or None if neither has it."""
    folder, paths = BUNDLE[name]
    for base in (os.path.join(_PACKAGE, "bundled", name), os.path.join(os.path.dirname(_PACKAGE), folder)):
        if any(os.path.exists(os.path.join(base, p)) for p in paths):
            return base
    return None


def files(name: str) -> dict[str, str]:
    """``{relative path: absolute path}`` of every file ``name`` ships (empty when it is not there)."""
    base = bundled(name)
    out: dict[str, str] = {}
    if base is None:
        return out
    for rel in BUNDLE[name][1]:
        top = os.path.join(base, rel)
        if os.path.isfile(top):
            out[rel] = top
        for root, dirs, names in os.walk(top):
            dirs[:] = sorted(d for d in dirs if d not in ("__pycache__", "node_modules"))
            for n in sorted(names):
                path = os.path.join(root, n)
                out[os.path.relpath(path, base)] = path
    return out
