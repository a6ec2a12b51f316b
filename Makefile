# One command for the main job (`make demo`) and one for the tests (`make test`).
# Both create .venv and install the pinned dependencies (requirements.lock) first.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: venv demo test lint lock clean

$(STAMP): requirements.lock pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -r requirements.lock
	$(BIN)/pip install -q --no-deps -e .
	touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m kubesched.demo

# Two xdist workers on CI's 2 cores, a test module whole on one, slow modules first (tests/conftest.py).
# `make test PYTEST_XDIST=` runs the suite in one process.
PYTEST_XDIST ?= -n 2 --dist loadfile --no-loadscope-reorder

test: $(STAMP)
	bash scripts/ensure-prometheus.sh
	bash scripts/ensure-chromium.sh
	bash scripts/ensure-etcd.sh
	$(BIN)/ruff check kubesched tests examples
	$(BIN)/mypy
	$(BIN)/python -m compileall -q kubesched  # every test process imports it: compile once, not per process
	$(BIN)/python -m pytest -q -p no:cacheprovider $(PYTEST_XDIST) $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check kubesched tests examples
	$(BIN)/ruff format --check kubesched tests examples
	$(BIN)/mypy

# Re-pin dependencies after editing pyproject.toml (needs `pip install uv`).
lock:
	uv pip compile pyproject.toml --extra test -o requirements.lock

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache
