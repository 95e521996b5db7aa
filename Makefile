# Lease Lab. Every target installs what it needs: the first run creates .venv from PyPI,
# and editing pyproject.toml makes the next run reinstall.
.POSIX:

PYTHON = python3
VENV = .venv
PY = $(VENV)/bin/python
STAMP = $(VENV)/.installed

.PHONY: demo test test-fast lab bench html lint clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --upgrade pip
	$(PY) -m pip install -e '.[dev,notebooks]'
	$(PY) -m ipykernel install --sys-prefix --name python3
	touch $(STAMP)

demo: $(STAMP)
	$(PY) -m sim demo --force

test: $(STAMP)
	$(PY) -m pytest

# The inner loop: no PostgreSQL, no notebook kernels (about a minute or two).
test-fast: $(STAMP)
	$(PY) -m pytest -m "not postgres and not notebooks"

lab: $(STAMP)
	$(VENV)/bin/jupyter lab --ServerApp.root_dir=notebooks --allow-root

bench: $(STAMP)
	for script in benchmarks/*.py; do echo "# $$script"; $(PY) "$$script" || exit 1; done

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
