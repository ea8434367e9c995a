"""The package's import rules: every module is in a layer or is a leaf, layers import one way, leaves import
only leaves; no module reaches into another module's private names; only ctxd/server touches pygls; one
module imports litellm, lazily; nothing but the CLI prints."""

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
# Modules beside the layers, which any layer may import: each imports only other leaves.
LEAF_MODULES = {"__init__", "errors", "redact", "llm", "client", "jsonrpc", "malloc", "options"}
ENTRY = "__main__"
"""``python -m ctxd``: it starts the CLI, the top."""


def _imports(path: Path, package: str | None = None) -> list[tuple[str, int, bool]]:
    """(module, line, at top level) for each import in a file; a relative import (``from ..store import x``) is
    named absolutely, from ``package`` (by default the file's own, e.g. ``ctxd.context``), so that it is placed in
    its layer like any other."""
    if package is None:
        package = ".".join(path.parent.relative_to(REPO).parts)
    tree = ast.parse(path.read_text())
    top = {id(n) for n in tree.body}
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name, node.lineno, id(node) in top) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level:
            parts = package.split(".")
            base = parts[: len(parts) - node.level + 1]
            out.append((".".join([*base, node.module] if node.module else base), node.lineno, id(node) in top))
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.append((node.module, node.lineno, id(node) in top))
    return out


def test_relative_imports_are_placed_in_their_layer_like_absolute_ones(tmp_path: Path) -> None:
    source = tmp_path / "m.py"
    source.write_text("from ..store import reader\nfrom . import rules\nfrom .live import LiveContext\nimport json\n")
    assert [m for m, _, _ in _imports(source, "ctxd.context")] == [
        "ctxd.store",
        "ctxd.context",
        "ctxd.context.live",
        "json",
    ]


def _layer(path: Path) -> str:
    rel = path.relative_to(PKG).parts
    return rel[0] if len(rel) > 1 else rel[0].removesuffix(".py")


def test_every_module_is_in_a_layer_or_a_leaf() -> None:
    placed = set(RANK) | LEAF_MODULES | {ENTRY}
    unplaced = sorted(str(p.relative_to(REPO)) for p in PKG.rglob("*.py") if _layer(p) not in placed)
    assert not unplaced, f"put these in a layer (LAYERS) or among the leaves (LEAF_MODULES): {unplaced}"


def test_layers_import_one_way_and_leaves_only_leaves() -> None:
    bad = []
    for path in PKG.rglob("*.py"):
        mine = _layer(path)
        if mine == ENTRY:
            continue
        for module, line, _ in _imports(path):
            parts = module.split(".")
            if parts[0] != "ctxd" or len(parts) < 2:
                continue
            theirs = parts[1]
            if theirs.startswith("_") and theirs != "__init__":
                continue  # the compiled scanner (ctxd._native), wrapped by ctxd.store.native
            if theirs in LEAF_MODULES:
                continue
            if mine in LEAF_MODULES or theirs not in RANK or RANK[theirs] > RANK[mine]:
                bad.append(f"{path.relative_to(REPO)}:{line} imports {module}")
    assert not bad, "\n".join(bad)


WAITING_CIRCLES = [{"ctxd.store.listing", "ctxd.store.listing_cache"}]
"""Circles known and not cut yet: the listing's rows and its cache (the listing moves with ``ctxd sessions``)."""


def _module_graph() -> dict[str, set[str]]:
    """Each ctxd module and the ctxd modules it imports anywhere (lazily, or for type checking only, too); ``from
    a.b import c`` of a submodule ``c`` imports ``a.b.c``."""
    paths: dict[str, Path] = {}
    for path in PKG.rglob("*.py"):
        parts = path.relative_to(REPO).with_suffix("").parts
        paths[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph: dict[str, set[str]] = {}
    for name, path in paths.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
                module = ".".join([*base, node.module] if node.module else base)
                subs = [f"{module}.{a.name}" for a in node.names if f"{module}.{a.name}" in paths]
                targets = subs + ([module] if len(subs) < len(node.names) else [])
            for target in targets:
                while target and target not in paths:
                    target = target.rpartition(".")[0]
                if target and target != name:
                    found.add(target)
        graph[name] = found
    return graph


def test_no_import_circles() -> None:
    graph = _module_graph()
    reach = {name: _reach(graph, name) for name in graph}
    circles: list[set[str]] = []
    for name in sorted(graph):
        if name in reach[name]:  # in a circle: with every module it reaches that reaches it back
            circle = {m for m in reach[name] if name in reach[m]}
            if circle not in circles and circle not in WAITING_CIRCLES:
                circles.append(circle)
    assert not circles, [sorted(c) for c in circles]


def _reach(graph: dict[str, set[str]], start: str) -> set[str]:
    seen: set[str] = set()
    todo = [start]
    while todo:
        for nxt in graph[todo.pop()]:
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def _defined_private_names(tree: ast.Module) -> set[str]:
    """Private names a module defines: its functions, classes and their members, and what its classes assign
    to ``self``."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
                names.add(node.attr)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return {n for n in names if n.startswith("_") and not n.startswith("__")}


def test_no_module_reaches_into_another_modules_private_names() -> None:
    """``from ctxd.x import _name`` and ``thing._name`` for a name this module does not define itself (its
    own classes' members and what a class inherits are its own; another module's, or a library's, are not)."""
    bad = []
    for path in PKG.rglob("*.py"):
        tree = ast.parse(path.read_text())
        own = _defined_private_names(tree)
        where = path.relative_to(REPO)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("ctxd"):
                for alias in node.names:
                    if alias.name.startswith("_") and not alias.name.startswith("__") and alias.name != "_native":
                        bad.append(f"{where}:{node.lineno} imports {node.module}.{alias.name}")
            elif isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
                if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
                    continue  # a class's own members, or those it inherits
                if node.attr in own or node.attr in ("_replace", "_asdict", "_fields", "_exit"):
                    continue  # namedtuple's public API (its names start with "_" to avoid fields'); os._exit
                bad.append(f"{where}:{node.lineno} reads {ast.unparse(node)}")
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
