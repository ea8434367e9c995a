from __future__ import annotations

import importlib.util
import os
import sys
import tempfile
from pathlib import Path
from types import ModuleType

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
# The persistent index lives in the user's cache: during tests, a private one (daemons inherit it).
os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="ctxd-test-cache-")
# The history index (and the hooks' archive) live in the user's data folder: a private one too.
os.environ["XDG_DATA_HOME"] = tempfile.mkdtemp(prefix="ctxd-test-data-")

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared" / "reference" / "sessions"
LOCAL = Path(__file__).resolve().parent / "data"


def reference(kind: str, name: str) -> Path:
    """A reference session file: the shared copy if present, else the one vendored in tests/data."""
    shared = SHARED / kind / name
    if shared.exists():
        return shared
    local = LOCAL / kind / name
    if not local.exists():
        pytest.skip(f"reference file {kind}/{name} is in ../shared only, which is not beside this checkout")
    return local


# Side by side (pytest-xdist, `make unit`: -n WORKERS --dist loadgroup) a worker runs whole groups: one module (its
# module-scoped fixtures, a daemon or a real agent's run, are made once), or a whole folder where a session-scoped
# fixture is dear (the wheel built and pipx-installed once; one PostgreSQL). The groups are made here, from the
# test's path, not by xdist's own loadgroup: its xdist_group marks do nothing under pytest 9 (xdist renames
# ``item._nodeid``, which pytest 9 no longer reads). The folders known to take longest go first
# (--no-loadscope-reorder), so that no worker starts a long group when the others are nearly done.
SHARED_GROUPS = ("installing", "team")
FIRST = ("installing", "opencode", "claude_code", "codex", "team", "server")


def xdist_group(nodeid: str) -> str:
    """The group a test runs in: its folder under tests/ for SHARED_GROUPS, else its module."""
    path = nodeid.split("::", 1)[0]
    parts = path.split("/")
    return parts[1] if len(parts) > 2 and parts[0] == "tests" and parts[1] in SHARED_GROUPS else path


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class Groups(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return xdist_group(nodeid)

    return Groups(config, log)  # type: ignore[arg-type]


def _folder(item: pytest.Item) -> str:
    parts = Path(str(item.path)).relative_to(Path(__file__).parent).parts
    return parts[0] if len(parts) > 1 else ""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if getattr(config.option, "loadgroup", False):  # in xdist's workers under --dist loadgroup
        rank = {name: i for i, name in enumerate(FIRST)}
        items.sort(key=lambda item: rank.get(_folder(item), len(FIRST)))  # stable: each module's order is kept


@pytest.fixture
def pi_fixture():  # type: ignore[no-untyped-def]
    return lambda name: reference("pi", name)


@pytest.fixture(scope="session")
def gen() -> ModuleType:
    """bench/gen.py, the session generator the benchmarks use, loaded as a module."""
    spec = importlib.util.spec_from_file_location("ctxd_bench_gen", REPO / "bench" / "gen.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses need the module registered
    spec.loader.exec_module(mod)
    return mod
