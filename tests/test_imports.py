"""The package's import rules: layers import one way; only ctxd/server touches pygls; one module
imports litellm, lazily; nothing but the CLI prints."""

from __future__ import annotations

import ast
from pathlib import Path

from conftest import REPO

PKG = REPO / "ctxd"
# history (the search index) sits above compaction: it reads sessions through store/formats (and the tree,
# to tell what a summary stands for), and only the service calls it. team (publishing the index to PostgreSQL and
# searching it there) sits on history: it reads the index and its spool; the service, the CLI and mcp call it.
# mcp is a front door like server.
LAYERS = [
    "formats",
    "store",
    "tree",
    "context",
    "compaction",
    "history",
    "team",
    "service",
    "server",
    "mcp",
    "setup",
    "cli",
]
# A layer may import itself and anything before it; the CLI sits on top (it starts the server).
RANK = {name: i for i, name in enumerate(LAYERS)}
LEAF_MODULES = {"errors", "llm", "__init__", "__main__", "client"}


def _imports(path: Path) -> list[tuple[str, int, bool]]:
    """(module, line, at top level) for each import in a file."""
    tree = ast.parse(path.read_text())
    top = {id(n) for n in tree.body}
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name, node.lineno, id(node) in top) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append((node.module, node.lineno, id(node) in top))
    return out


def _layer(path: Path) -> str:
    rel = path.relative_to(PKG).parts
    return rel[0] if len(rel) > 1 else rel[0].removesuffix(".py")


def test_layers_import_one_way() -> None:
    bad = []
    for path in PKG.rglob("*.py"):
        mine = _layer(path)
        if mine not in RANK:
            continue
        for module, line, _ in _imports(path):
            parts = module.split(".")
            if parts[0] != "ctxd" or len(parts) < 2 or parts[1] not in RANK:
                continue
            if RANK[parts[1]] > RANK[mine]:
                bad.append(f"{path.relative_to(REPO)}:{line} imports {module}")
    assert not bad, "\n".join(bad)


def test_only_server_imports_pygls_and_one_module_imports_litellm_lazily() -> None:
    pygls, litellm = [], []
    for path in PKG.rglob("*.py"):
        for module, line, top in _imports(path):
            root = module.split(".")[0]
            if root in ("pygls", "lsprotocol") and "server" not in path.relative_to(PKG).parts:
                pygls.append(f"{path}:{line}")
            if root == "litellm":
                litellm.append((path, top))
    assert not pygls
    assert len({p for p, _ in litellm}) <= 1
    assert not [p for p, top in litellm if top], "litellm must be imported lazily"


def test_no_print_outside_the_cli() -> None:
    offenders = []
    for path in PKG.rglob("*.py"):
        if "cli" in path.relative_to(PKG).parts:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print":
                offenders.append(f"{path}:{node.lineno}")
    assert not offenders


def test_only_the_mcp_package_imports_the_mcp_sdk() -> None:
    found = []
    for path in PKG.rglob("*.py"):
        for module, line, _ in _imports(path):
            if module.split(".")[0] == "mcp":
                found.append((path.relative_to(PKG).parts[0], f"{path}:{line}"))
    assert found and {part for part, _ in found} == {"mcp"}, found


def test_psycopg_is_imported_only_by_the_team_package_and_only_when_used() -> None:
    """The team extra is optional: no module imports psycopg at its top (a TYPE_CHECKING block aside), and only
    ctxd/team imports it at all."""
    found = []
    for path in PKG.rglob("*.py"):
        for module, line, top in _imports(path):
            if module.split(".")[0] == "psycopg":
                found.append((path.relative_to(PKG).parts[0], top, f"{path}:{line}"))
    assert found and {part for part, _, _ in found} == {"team"}, found
    assert not [where for _, top, where in found if top], "psycopg must be imported lazily"
