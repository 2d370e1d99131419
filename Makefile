# Two commands work on a fresh machine with Python 3.11: `make demo` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)

.PHONY: demo test lint bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	rm -f $(VENV)/.installed-*
	touch $@

demo: $(STAMP)
	$(BIN)/sdclab demo --out demo-out

test: $(STAMP)
	$(BIN)/python -m pytest -n 2 --dist loadfile

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/mypy

bench: $(STAMP)
	for script in benchmarks/*.py; do $(BIN)/python $$script || exit 1; done

clean:
	rm -rf $(VENV) demo-out .pytest_cache .mypy_cache .ruff_cache
