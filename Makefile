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

test: $(STAMP)
	bash scripts/ensure-prometheus.sh
	bash scripts/ensure-chromium.sh
	bash scripts/ensure-etcd.sh
	$(BIN)/ruff check kubesched tests examples
	$(BIN)/mypy
	$(BIN)/python -m pytest -q -p no:cacheprovider $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check kubesched tests examples
	$(BIN)/ruff format --check kubesched tests examples
	$(BIN)/mypy

# Re-pin dependencies after editing pyproject.toml (needs `pip install uv`).
lock:
	uv pip compile pyproject.toml --extra test -o requirements.lock

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache
