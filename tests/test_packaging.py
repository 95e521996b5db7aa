"""Packaging: environment.yml mirrors pyproject's dependencies, and the built wheel works alone."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
NOT_DEPENDENCIES = {"python", "pip"}  # conda-side tooling, not runtime dependencies


def distribution_name(requirement: str) -> str:
    """The PEP 503 normalised name of a pip or conda requirement ('tomli_w>=1' -> 'tomli-w')."""
    name = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement.strip()).group()
    return re.sub(r"[-_.]+", "-", name).lower()


# from the [dev] extra, what running the suite (in parallel) needs: the rest is the maintainers'
TEST_RUNNER = {"pytest", "pytest-timeout", "pytest-xdist", "hypothesis", "pyyaml"}


def test_environment_yml_lists_pyproject_dependencies():
    """The conda environment is the whole course: the runtime dependencies, the notebooks', and
    what runs the test suite on every core."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    environment = yaml.safe_load((ROOT / "environment.yml").read_text())
    conda = [dep for dep in environment["dependencies"] if isinstance(dep, str)]
    (pip,) = [dep["pip"] for dep in environment["dependencies"] if isinstance(dep, dict)]
    assert "-e ." in pip, "environment.yml must install Lease Lab itself"
    listed = [distribution_name(req) for req in conda + pip if req != "-e ."]
    assert len(listed) == len(set(listed)), f"listed twice in environment.yml: {listed}"
    project = pyproject["project"]
    notebooks = project["optional-dependencies"]["notebooks"]
    expected = {distribution_name(req) for req in project["dependencies"] + notebooks}
    dev = {distribution_name(req) for req in project["optional-dependencies"]["dev"]}
    assert TEST_RUNNER <= dev, f"not in the [dev] extra: {TEST_RUNNER - dev}"
    assert set(listed) - NOT_DEPENDENCIES == expected | TEST_RUNNER


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """Build sdist then wheel (as pip does from an sdist) from a clean copy of the checkout."""
    work = tmp_path_factory.mktemp("build")
    source = work / "source"
    for name in _checkout_files():
        target = source / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, target, follow_symlinks=False)
    subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(work / "dist"), str(source)],
        check=True,
        capture_output=True,
    )
    (built,) = (work / "dist").glob("*.whl")
    return built


def _checkout_files() -> list[str]:
    """What a clean clone would hold, plus files not yet added: git's tracked and unignored files
    (never .venv, a server's data directory or other local state)."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return [name for name in listed.split("\0") if name and (ROOT / name).exists()]


def test_the_sql_lives_inside_the_package():
    """sim/sql holds the files (so a wheel ships them); the top-level sql/ is a link to them."""
    assert not (ROOT / "sim" / "sql").is_symlink()
    assert (ROOT / "sql").resolve() == (ROOT / "sim" / "sql").resolve()
    assert {p.name for p in (ROOT / "sim" / "sql").glob("*.sql")} >= {"queries.sql", "schema.sql"}


@pytest.mark.slow  # builds the sdist and wheel: make test only
def test_wheel_ships_the_sql_files(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    shipped = {Path(n).name for n in names if n.startswith("sim/sql/")}
    assert shipped == {p.name for p in (ROOT / "sql").glob("*.sql")}


@pytest.mark.slow  # builds the sdist and wheel: make test only
def test_wheel_is_typed_and_keeps_jupyter_in_the_notebooks_extra(wheel):
    archive = zipfile.ZipFile(wheel)
    assert "sim/py.typed" in archive.namelist()
    (metadata,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
    requires = [
        line.split(":", 1)[1].strip()
        for line in archive.read(metadata).decode().splitlines()
        if line.startswith("Requires-Dist:")
    ]
    jupyter = {"jupyterlab", "ipywidgets", "papermill"}
    required = {distribution_name(r) for r in requires if "extra ==" not in r}
    extra = {distribution_name(r) for r in requires if 'extra == "notebooks"' in r}
    assert extra == jupyter and not required & jupyter
    assert {"simpy", "pandas", "psycopg", "matplotlib"} <= required


@pytest.mark.slow  # builds the sdist and wheel: make test only
def test_installed_wheel_works_outside_the_checkout(wheel, tmp_path):
    target, elsewhere = tmp_path / "site", tmp_path / "elsewhere"
    elsewhere.mkdir()
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--no-index",
            "--target",
            str(target),
            str(wheel),
        ],
        check=True,
    )
    probe = (
        "import json, sim\n"
        "from sim.db.queries import load_queries, schema_sql\n"
        "print(json.dumps({'file': sim.__file__, 'queries': len(load_queries()),\n"
        "                  'schema': 'CREATE TABLE payment_jobs' in schema_sql()}))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(target)}  # dependencies still come from this venv
    out = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=elsewhere,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    found = json.loads(out)
    assert Path(found["file"]).is_relative_to(target), found["file"]
    assert found["queries"] >= 15
    assert found["schema"]
