"""One method table (ctxd/service/methods.py): the real daemon serves every method in it and nothing else, the
table is the documented protocol, ``ctxd mcp``'s tools answer through it, and the service is composed of jobs
(no mixins)."""

from __future__ import annotations

import ast
import asyncio
import inspect

import attrs
import pytest
from pytest_lsp import LanguageClient

from ctxd.mcp.tools import build
from ctxd.service import protocol as p
from ctxd.service.config import Config
from ctxd.service.methods import BY_NAME, METHODS, TOOLS, Request
from ctxd.service.service import ALIASES, Service

from .harness import REPO, call_error

ON_THE_DAEMONS_LOOP = pytest.mark.asyncio(loop_scope="module")
DOC = (REPO / "docs" / "protocol.md").read_text(encoding="utf-8")
SERVICE = REPO / "ctxd" / "service"


@ON_THE_DAEMONS_LOOP
async def test_the_daemon_serves_every_method_in_the_table(ctxd: LanguageClient) -> None:
    """Each method answers params that are not an object with -32602 (so it is registered and structures its
    params), and a method outside the table is not found (-32601)."""
    for method in METHODS:
        err = await call_error(ctxd, method.name, ["not", "an", "object"])
        assert err.code == -32602, (method.name, err)
    assert (await call_error(ctxd, "session/nothing", {})).code == -32601


@ON_THE_DAEMONS_LOOP
async def test_every_method_structures_its_own_params_class(ctxd: LanguageClient) -> None:
    """A required field of the table's params class, left out, is named in the daemon's -32602."""
    for method in METHODS:
        required = [f.name for f in attrs.fields(method.params) if f.default is attrs.NOTHING]
        if not required:
            continue
        err = await call_error(ctxd, method.name, {})
        assert err.code == -32602 and err.data == {"field": required[0]}, (method.name, err, err.data)


def test_the_table_is_the_documented_protocol() -> None:
    names = [m.name for m in METHODS]
    assert len(names) == len(set(names)), "a method is in the table twice"
    assert set(names) == set(p.METHODS), "the table and ctxd.service.names' METHODS differ"
    for method in METHODS:
        assert f"\n### {method.name}\n" in DOC, f"{method.name} is not documented in docs/protocol.md"
        assert attrs.has(method.params) and method.params.__module__ in (p.__name__, "ctxd.service.history_types")
        if method.progress is not None:
            assert "workDoneToken" in attrs.fields_dict(method.params), method.name
    documented = {line[4:].split()[0] for line in DOC.splitlines() if line.startswith("### ")}
    assert documented - set(p.NOTIFICATIONS) == set(names), "a documented method is not in the table"


@ON_THE_DAEMONS_LOOP
async def test_mcp_tools_answer_through_the_table() -> None:
    service = Service(Config(roots=["/nonexistent/ctxd-sessions"]))
    try:
        tools = {t.name for t in await build(service).list_tools()}
    finally:
        await service.close()
    assert tools == set(TOOLS)
    assert set(TOOLS.values()) <= set(BY_NAME)


def test_the_service_is_composed_of_jobs_without_mixins() -> None:
    """Every class of the service's jobs stands alone (no base class but what the standard library gives), and
    what a job needs of another is passed to its constructor: no job reads another's private attributes."""
    for path in sorted(SERVICE.glob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                bases = [ast.unparse(b) for b in node.bases]
                local = {n.name for n in tree.body if isinstance(n, ast.ClassDef)}
                imported_service = [b for b in bases if b in _service_names(tree) or b in local]
                assert not imported_service, f"{path.name}: {node.name} inherits {imported_service} (a mixin)"
    assert Service.__mro__ == (Service, object)
    service = Service(Config(roots=["/nonexistent/ctxd-sessions"]))
    for old, new in ALIASES.items():  # the old method names still answer, from their job
        target = service
        for part in new.split("."):
            target = getattr(target, part)
        assert getattr(service, old) == target, old
        assert callable(target), old
    asyncio.run(service.close())


def _service_names(tree: ast.Module) -> set[str]:
    """Names a module imports from ctxd.service."""
    return {
        alias.asname or alias.name
        for node in tree.body
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("ctxd.service")
        for alias in node.names
    }


def test_every_handler_calls_a_method_of_the_service_or_one_of_its_jobs() -> None:
    """The table names each handler (a job's method): nothing is answered by code written in the table."""
    service = Service(Config(roots=["/nonexistent/ctxd-sessions"]))
    jobs = {"sessions", "context", "compaction", "history", "team", "agents"}
    for method in METHODS:
        names = method.handler.__code__.co_names  # type: ignore[attr-defined]
        if names[0] in jobs:
            assert callable(getattr(getattr(service, names[0]), names[1])), (method.name, names)
        else:
            assert inspect.iscoroutinefunction(getattr(Service, names[0])), (method.name, names)
    asyncio.run(service.close())
    assert Request().given == frozenset() and Request().progress is None
