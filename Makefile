# Two commands do all the set-up: `make repro` and `make test`. Both create .venv on first use.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
PYTHON ?= $(shell command -v python3.11 || command -v python3)
export PATH := $(abspath $(VENV))/bin:$(PATH)
export DVC_NO_ANALYTICS := 1
export HF_HUB_OFFLINE := 1
export PREFECT_SERVER_ANALYTICS_ENABLED := false

.PHONY: repro test bench report lint clean-venv bytecode templates

# uv installs the locked set in ~20 s (pip: ~3 min). uv does not read pip's configuration, so it gets pip's
# find-links ($$PIP_FIND_LINKS, where an on-disk CPU torch wheel lies); without uv, plain pip does the same job.
# Bytecode is compiled at install, the project's too: where PYTHONDONTWRITEBYTECODE is set (or site-packages is
# read-only) every process would otherwise recompile every module it imports (an empty stage: 20 s -> 7 s).
$(VENV)/.installed: pyproject.toml requirements.lock
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@if $(PY) -m pip install -q uv==0.13.8 2>/dev/null; then \
	  $(VENV)/bin/uv pip install -q --compile-bytecode --python $(PY) $${PIP_FIND_LINKS:+--find-links $$PIP_FIND_LINKS} -r requirements.lock && \
	  $(VENV)/bin/uv pip install -q --python $(PY) --no-deps -e . ; \
	else \
	  $(PY) -m pip install -q -r requirements.lock && $(PY) -m pip install -q --no-deps -e . ; \
	fi
	@$(MAKE) -s bytecode
	@touch $@

# migrated databases, copied where a new one is needed (each a no-op once made, one per library version): Prefect's,
# into each new PREFECT_HOME (its temporary server then starts in ~7 s, not ~25), and MLflow's, as each project's
# first mlflow.db (no migrations on first open: ~1.5 s a new store)
templates: $(VENV)/.installed
	@$(PY) -m paperdag.engine.prefect_server >/dev/null || echo "no Prefect database template: the temporary server will migrate its own (slower)"
	@$(PY) -m paperdag.engine.tracking >/dev/null || echo "no MLflow store template: each new store migrates itself (slower)"

# the project's own modules (stale ones are recompiled; a changed file is otherwise compiled in memory per process)
bytecode:
	@$(PY) -m compileall -q -j 0 src stages benchmarks >/dev/null

repro: $(VENV)/.installed bytecode templates
	paperdag render --check
	dvc repro
	paperdag report

test: $(VENV)/.installed bytecode templates
	$(PY) -m pytest

# ruff and mypy over the engine (their rules: pyproject.toml); CI runs it before the tests. ~10 s cold.
lint: $(VENV)/.installed
	$(VENV)/bin/ruff check src/paperdag/engine
	$(VENV)/bin/mypy

bench: $(VENV)/.installed templates
	$(PY) benchmarks/bench_engine.py
	$(PY) benchmarks/bench_mfc.py

report: $(VENV)/.installed templates
	paperdag report

clean-venv:
	rm -rf $(VENV)
