# Shortcuts for dev.py, which holds the README's two commands (`python3 dev.py run`,
# `python3 dev.py test`) and needs nothing but Python 3.11+.
PYTHON ?= python3

.PHONY: install run test demo docs lint typecheck bench bench-smoke clean

install:
	$(PYTHON) -c 'import dev; dev.install()'

run:
	$(PYTHON) dev.py run

test:
	$(PYTHON) dev.py test $(PYTEST_ARGS)

docs:
	$(PYTHON) dev.py docs

demo:
	$(PYTHON) dev.py demo $(DEMO_ARGS)

lint:
	$(PYTHON) dev.py lint

typecheck:
	$(PYTHON) dev.py typecheck

bench:
	$(PYTHON) dev.py bench $(BENCH_ARGS)

bench-smoke:
	$(PYTHON) dev.py bench-smoke

clean:
	rm -rf .venv .venv-django42 .venv-wheel db.sqlite3 .pytest_cache .mypy_cache .ruff_cache dist build docs/_build
