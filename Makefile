# The two commands of the README: `make run` and `make test`. Everything else is a helper.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
HOST   ?= 127.0.0.1:8000

.PHONY: install run test lint typecheck bench bench-smoke clean

$(STAMP): pyproject.toml
	$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "Python 3.11+ is required"'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

install: $(STAMP)

## Run the sample project: SQLite, demo data seeded, server on http://127.0.0.1:8000
run: install
	$(BIN)/python manage.py migrate --noinput
	$(BIN)/python manage.py seed_demo
	$(BIN)/python manage.py runserver $(HOST)

## Run the whole test suite (set DATABASE_URL / REDIS_URL to use PostgreSQL and Redis)
test: install
	$(BIN)/python -m pytest $(PYTEST_ARGS)

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: install
	$(BIN)/mypy idempotency

bench: install
	$(BIN)/python -m pip install --quiet -e ".[dev,bench]"
	$(BIN)/python -m bench $(BENCH_ARGS)

bench-smoke: install
	$(BIN)/python -m pip install --quiet -e ".[dev,bench]"
	$(BIN)/python -m bench --smoke

clean:
	rm -rf $(VENV) db.sqlite3 .pytest_cache .mypy_cache .ruff_cache dist build
