# Lease Lab. Every target installs what it needs: the first run creates .venv from PyPI,
# and editing pyproject.toml makes the next run reinstall.
.POSIX:

PYTHON = python3
VENV = .venv
PY = $(VENV)/bin/python
STAMP = $(VENV)/.installed

# Byte-code is cached in __pycache__ (ignored by git) even where the environment turns that off
# (PYTHONDONTWRITEBYTECODE=1): otherwise every test worker, notebook kernel, live child and CLI run
# compiles the package anew, and pytest rewrites every test module's asserts again (5 s per worker).
unexport PYTHONDONTWRITEBYTECODE

# Tests run on every core (pytest-xdist: one process and one embedded PostgreSQL per worker; `auto`
# is a worker per core and one more, tests/conftest.py), and end with the ten slowest.
# PYTEST_WORKERS=0 runs them in this process.
PYTEST_WORKERS = auto
PYTEST_PARALLEL = -n $(PYTEST_WORKERS) --dist worksteal --durations=10
# make bench BENCH_ARGS=--quick (or make bench-quick): minutes instead of tens of minutes.
BENCH_ARGS =

.PHONY: demo test test-fast lab bench bench-quick html lint clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --upgrade pip
	$(PY) -m pip install -e '.[dev,notebooks]'
	$(PY) -m ipykernel install --sys-prefix --name python3
	touch $(STAMP)

demo: $(STAMP)
	$(PY) -m sim demo --force

test: $(STAMP)
	$(PY) -m pytest $(PYTEST_PARALLEL)

# The inner loop (under 90 s): no PostgreSQL, no notebook kernels, none of the tests marked slow.
test-fast: $(STAMP)
	$(PY) -m pytest $(PYTEST_PARALLEL) -m "not postgres and not notebooks and not slow"

lab: $(STAMP)
	$(VENV)/bin/jupyter lab --ServerApp.root_dir=notebooks --allow-root

# Each benchmark prints one JSON line (benchmarks/figures.py), kept in out/bench/; the table of
# every figure against its goal comes last.
bench: $(STAMP)
	rm -rf out/bench && mkdir -p out/bench
	for script in benchmarks/bench_*.py; do \
		name=$$(basename "$$script" .py); echo "# $$script $(BENCH_ARGS)"; \
		$(PY) "$$script" $(BENCH_ARGS) > "out/bench/$$name.json" || exit 1; \
		cat "out/bench/$$name.json"; \
	done
	$(PY) benchmarks/table.py out/bench/*.json

bench-quick:
	$(MAKE) bench BENCH_ARGS=--quick

html: $(STAMP)
	mkdir -p out/html
	unset LEASELAB_FAST; LEASELAB_HEADLESS=1 $(VENV)/bin/jupyter nbconvert --to html --execute --output-dir out/html notebooks/*.ipynb
	$(PY) tools/link_html.py out/html

# Lint: ruff's rules and formatting (100 columns), and mypy on sim/ (settings in pyproject.toml).
lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

clean:
	rm -rf $(VENV) out build dist *.egg-info .pytest_cache .ruff_cache .hypothesis .bench
