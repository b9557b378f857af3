# `make run` and `make test` each create .venv when missing and install the project.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.polyc-installed
# the simulator's runtime library, built once into the installation (polyc
# prebuild) so that no compile pays for it; again when its C changes
RUNTIME := $(VENV)/.polyc-runtime
# torch is pinned: the 2.13.0 CPU build is on this machine's disk; an unpinned torch
# would pull a several-GB CUDA build.
TORCH := torch==2.13.0

# LLVM 19's MLIR tools and clang (polyc.to_mlir's verification and runs,
# polyc.from_mlir), installed when missing (Debian bookworm: run as root)
MLIR_TOOLS := mlir-opt-19 mlir-translate-19 clang-19

.PHONY: run test test-slow lint format bench clean mlir-tools chromium

$(STAMP): setup.cfg pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --disable-pip-version-check $(TORCH)
	$(BIN)/python -m pip install -q --disable-pip-version-check -e '.[test,sweep,bench]' $(TORCH)
	touch $(STAMP)

$(RUNTIME): $(STAMP) $(wildcard accelerator/sim/runtime/*) accelerator/sim/abi.py
	$(BIN)/polyc prebuild
	touch $(RUNTIME)

run: $(RUNTIME)
	$(BIN)/polyc demo

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

mlir-tools:
	@for t in $(MLIR_TOOLS); do command -v $$t >/dev/null || missing=1; done; \
	if [ -n "$$missing" ]; then apt-get update && apt-get install -y \
	  --no-install-recommends mlir-19-tools clang-19; fi

# headless Chromium for the report's browser tests (Debian: run as root)
chromium:
	@command -v chromium >/dev/null || { apt-get update && apt-get install -y \
	  --no-install-recommends chromium; }

test: $(RUNTIME) lint mlir-tools chromium
	$(BIN)/python -m pytest -q -n 2 --durations=15

test-slow: $(STAMP) mlir-tools chromium
	$(BIN)/python -m pytest -q -n 2 -m slow

bench: $(STAMP) chromium
	$(BIN)/python -m bench.run_all

clean:
	rm -rf $(VENV) build *.egg-info codegen/installed
