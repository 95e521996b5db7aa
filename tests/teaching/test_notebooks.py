"""The teaching notebooks: committed clean, structured as lessons, covering the articles, and
executable in fast mode within the CI budget.

Every notebook is executed with nbclient on this interpreter's kernel (LEASELAB_FAST=1,
LEASELAB_HEADLESS=1); 08 and 09 need PostgreSQL and are marked `postgres` (embedded by default, or
$LEASELAB_DSN). How long they take is measured by benchmarks/bench_notebooks.py, not asserted here.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import nbformat
import pytest

from sim.teaching import CHEAT_SHEET_TAGS, CLOCKS_TAGS, DEDUP_TAGS, REQUIRED_TAGS

ROOT = Path(__file__).resolve().parents[2]
FOLDER = ROOT / "notebooks"
NOTEBOOKS = sorted(FOLDER.glob("[0-9][0-9]-*.ipynb"))
LESSONS = [p for p in NOTEBOOKS if not p.name.startswith("00-")]
NEEDS_POSTGRES = {"08-on-real-postgres.ipynb", "09-your-own-queue.ipynb", "10-live.ipynb"}
LIVE = "10-live.ipynb"
CELL_TIMEOUT_S = 240
TAGS = {**REQUIRED_TAGS, **DEDUP_TAGS, **CHEAT_SHEET_TAGS, **CLOCKS_TAGS}
CHEAT_SHEET = "11-cheat-sheet.ipynb"


def read(path: Path):
    return nbformat.read(path, as_version=4)


def code_cells(nb):
    return [c for c in nb.cells if c.cell_type == "code"]


def test_the_notebooks_are_there():
    names = [p.name for p in NOTEBOOKS]
    assert names[0] == "00-index.ipynb"
    assert [n[:2] for n in names] == [f"{i:02d}" for i in range(len(names))]
    assert "09-your-own-queue.ipynb" in names and "10-live.ipynb" in names
    assert CHEAT_SHEET in names and "12-clocks-and-fencing.ipynb" in names


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_committed_without_outputs(path):
    """Outputs belong in out/html, not in git: clear them before committing (nbformat or
    `jupyter nbconvert --clear-output --inplace notebooks/*.ipynb`)."""
    nb = read(path)
    nbformat.validate(nb)
    dirty = [
        i
        for i, c in enumerate(nb.cells)
        if c.cell_type == "code" and (c.outputs or c.execution_count)
    ]
    assert not dirty, f"{path.name}: cells {dirty} have outputs or execution counts"
    assert "widgets" not in nb.metadata, f"{path.name}: saved widget state in the metadata"
    assert nb.metadata["kernelspec"]["name"] == "python3"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_each_notebook_has_one_parameters_cell_with_fast_mode(path):
    tagged = [c for c in read(path).cells if "parameters" in c.metadata.get("tags", [])]
    assert len(tagged) == 1, (
        f"{path.name}: expected one cell tagged 'parameters' (papermill), found {len(tagged)}"
    )
    assert tagged[0].cell_type == "code"
    assert re.search(r"^fast = None\b", tagged[0].source, re.M), (
        "the parameters cell must offer `fast = None`"
    )


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.stem)
def test_each_lesson_has_goals_exercises_and_a_takeaway(path):
    nb = read(path)
    headings = [
        line
        for c in nb.cells
        if c.cell_type == "markdown"
        for line in c.source.splitlines()
        if line.startswith("## ")
    ]
    assert headings[0] == "## Learning goals", f"{path.name}: learning goals must come first"
    assert headings[-1] == "## Takeaway", f"{path.name}: must end with the takeaway"
    exercises = [h for h in headings if h.startswith("## Exercise")]
    assert 1 <= len(exercises) <= 2, f"{path.name}: one or two exercises, found {exercises}"
    checks = [c for c in code_cells(nb) if re.search(r"teaching\.check_\w+\(answer", c.source)]
    assert len(checks) == len(exercises), (
        f"{path.name}: every exercise needs its teaching.check_...(answer) cell"
    )
    assert all(re.search(r"^answer = None", c.source, re.M) for c in checks)
    assert any("FAST = teaching.setup(fast)" in c.source for c in code_cells(nb))


# Numbers allowed in hand-written prose: labels, not claims (notebook and checklist item numbers,
# identifiers, list markers). Everything else must come from a computed cell (teaching.md/claim).
_LABELS = [
    r"`[^`]*`",  # inline code
    r"\]\([^)]*\)",  # link targets
    r"\b0\d\b",  # notebook numbers: 02, 04
    r"^# \d\d · |\[\d\d · ",  # a notebook's number in its title or a link: [11 · Cheat sheet](...)
    r"\b(notebooks?|items?|item) \d+(, \d+)*( and \d+)?",
    r"^\s*\d+\.\s",  # ordered-list markers
    r"^\| \d \|",  # the checklist table's item column
    r"\| (0\d(, 0\d)*) \|",  # ... and its notebook column
    r"Exercise \d",
    r"evt-\S*",
    r"3-D Secure",
    r"[hWPk]/\(?[k+\d]+\)?|P/\(k\+1\)|h/2|W/2",  # formulae
    r"\bs\*?\*",
]


def _prose_numbers(text: str) -> list[str]:
    found = []
    for line in text.splitlines():
        for pattern in _LABELS:
            line = re.sub(pattern, " ", line)
        found += re.findall(r"\d+(?:\.\d+)?", line)
    return found


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_prose_types_no_numbers_by_hand(path):
    """Every number in the text is computed by the notebook (teaching.md / teaching.claim), so it
    stays true when parameters, seeds or the model change."""
    nb = read(path)
    if path.name.startswith("00-"):
        nb.cells = [
            c for c in nb.cells if not c.source.startswith("**The lease article**")
        ]  # generated at build
    offending = {
        i: _prose_numbers(c.source) for i, c in enumerate(nb.cells) if c.cell_type == "markdown"
    }
    offending = {i: n for i, n in offending.items() if n}
    assert not offending, f"{path.name}: hand-typed numbers in markdown cells {offending}"


def test_every_idea_of_the_articles_has_a_demonstrating_code_cell():
    """The seed's four concepts, three 'often confused' distinctions and six checklist items, and
    the duplicate-delivery article's acceptance cases, each tagged on a code cell of a lesson."""
    found: dict[str, list[str]] = {}
    for path in LESSONS:
        for i, cell in enumerate(read(path).cells):
            for tag in cell.metadata.get("tags", []):
                if tag in TAGS:
                    assert cell.cell_type == "code", (
                        f"{path.name} cell {i}: tag {tag} must be on a code cell"
                    )
                    found.setdefault(tag, []).append(f"{path.name}#{i}")
    assert len([t for t in REQUIRED_TAGS if t.startswith("concept:")]) == 4
    assert len([t for t in REQUIRED_TAGS if t.startswith("confused:")]) == 3
    assert sorted(t for t in REQUIRED_TAGS if t.startswith("checklist:")) == [
        f"checklist:{i}" for i in range(1, 7)
    ]
    missing = sorted(set(TAGS) - set(found))
    assert not missing, f"no notebook cell demonstrates: {missing}"


def test_the_cheat_sheet_proves_every_item_of_the_lease_article_and_the_rules():
    """11 shows the six checklist items, the three confusions, the four takeaways, the measured
    rules of thumb and notebook 12's takeaways, each on a tagged code cell (the numbers are computed
    by sim.teaching.cheatsheet)."""
    tags = {
        t
        for c in read(FOLDER / CHEAT_SHEET).cells
        if c.cell_type == "code"
        for t in c.metadata.get("tags", [])
    }
    wanted = (
        {t for t in REQUIRED_TAGS if t.startswith(("checklist:", "confused:"))}
        | set(CHEAT_SHEET_TAGS)
        | set(CLOCKS_TAGS)  # notebook 12's takeaways
    )
    assert sorted(t for t in CHEAT_SHEET_TAGS if t.startswith("takeaway:")) == [
        f"takeaway:{i}" for i in range(1, 5)
    ]
    assert wanted <= tags, sorted(wanted - tags)


def test_the_index_links_every_lesson():
    index = read(FOLDER / "00-index.ipynb")
    text = "\n".join(c.source for c in index.cells if c.cell_type == "markdown")
    for path in LESSONS:
        assert f"]({path.name})" in text, f"00-index does not link {path.name}"


# ---- execution ---------------------------------------------------------------------------------

PROBE = "import sys, sim\nprint(sys.executable)\nprint(sim.__file__)"


def _params(notebooks=NOTEBOOKS):
    for path in notebooks:
        marks = [pytest.mark.notebooks]
        if path.name in NEEDS_POSTGRES:
            marks.append(pytest.mark.postgres)
        if path.name == LIVE:  # its lesson starts live runs: worker processes on the wall clock
            marks.append(pytest.mark.live)
        yield pytest.param(path, id=path.stem, marks=marks)


def _kernel_environment(monkeypatch, tmp_path: Path) -> None:
    """Headless, inline figures, this interpreter's kernel first on the PATH, and a temporary
    directory of the test's own (06 saves its report there; pytest-xdist runs notebooks at once)."""
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setenv("LEASELAB_HEADLESS", "1")
    monkeypatch.setenv("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    monkeypatch.setenv(
        "PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    )


def _check_executed(path: Path, nb) -> None:
    """The checks every executed notebook must pass (its last cell is PROBE)."""
    printed = "".join(o.get("text", "") for o in nb.cells[-1].outputs if o.output_type == "stream")
    executable, module = printed.split()
    assert Path(executable).resolve() == Path(sys.executable).resolve(), (
        "the kernel is not this interpreter"
    )
    assert Path(module).resolve().is_relative_to(ROOT / "sim")
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        assert not [o for o in cell.outputs if o.output_type == "error"], (
            f"{path.name} cell {i} failed"
        )
        if any(tag in TAGS for tag in cell.metadata.get("tags", [])):
            assert cell.outputs, (
                f"{path.name} cell {i} is tagged {cell.metadata['tags']} but shows nothing"
            )
        if "teaching.explore(" in cell.source:  # headless: the explorer's static figure
            assert any("image/png" in o.get("data", {}) for o in cell.outputs), (
                f"{path.name} cell {i}: no figure"
            )
        for out in cell.outputs:
            text = out.get("data", {}).get("text/markdown", "")
            assert "**Not quite.**" not in text, (
                f"{path.name} cell {i}: a committed answer is wrong"
            )
            _assert_clean_output(path, i, out)


_BAR = re.compile(r"\d+%\|")  # a tqdm frame: " 94%|█████████▍|"


def _assert_clean_output(path: Path, i: int, out) -> None:
    """What a headless run saves is what `make html` publishes: no progress bar frozen mid-way, and
    a figure as an image, never its repr `<Figure size ... with 2 Axes>`."""
    data = out.get("data", {})
    assert "application/vnd.jupyter.widget-view+json" not in data, (
        f"{path.name} cell {i}: a widget (a progress bar?) in batch output"
    )
    text = out.get("text", "") + data.get("text/plain", "")
    assert not _BAR.search(text), (
        f"{path.name} cell {i}: a progress bar in the output: {text!r:.120}"
    )
    if data.get("text/plain", "").startswith("<Figure size"):
        assert "image/png" in data, f"{path.name} cell {i}: the figure shows as text, not an image"


@pytest.mark.timeout(600)
@pytest.mark.parametrize("path", list(_params()))
def test_notebook_executes_in_fast_mode(path, monkeypatch, tmp_path):
    from nbclient import NotebookClient

    monkeypatch.setenv("LEASELAB_FAST", "1")
    _kernel_environment(monkeypatch, tmp_path)
    nb = read(path)
    nb.cells.append(nbformat.v4.new_code_cell(PROBE))
    client = NotebookClient(
        nb,
        kernel_name="python3",
        timeout=CELL_TIMEOUT_S,
        resources={"metadata": {"path": str(FOLDER)}},
    )
    client.execute()  # raises CellExecutionError, naming the cell, on any error
    _check_executed(path, nb)


# One changed parameter per notebook (besides `fast`), as a reader would pass with `papermill -p`.
# 02's is its exercise 2 instruction (gap = 0.005): following an instruction must not break the run.
PAPERMILL_PARAMETERS = {
    "00-index.ipynb": {"folder": str(FOLDER)},
    "01-what-is-a-lease.ipynb": {"crash_at": 20.0},
    "02-read-then-write-race.ipynb": {"gap": 0.005},
    "03-heartbeats-and-zombies.ipynb": {"seed": 2},
    "04-stuck-watcher-and-recovery.ipynb": {"seed": 7},
    "05-duplicate-delivery.ipynb": {"window": 30.0},
    "06-tune-your-ttl.ipynb": {
        "durations_csv": "<your.csv>",
        "column": "seconds",
    },  # its "try your own data"
    "07-how-popular-queues-recover.ipynb": {"seed": 2},
    "08-on-real-postgres.ipynb": {"seed": 2},
    "11-cheat-sheet.ipynb": {"seed": 2},
}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_papermill_reads_every_parameter(path):
    """`papermill --help-notebook` lists `fast` and the parameter the test changes: papermill parses
    every line of the parameters cell (it skips a line it cannot parse, e.g. an '=' in a
    comment)."""
    import papermill

    assert set(PAPERMILL_PARAMETERS) <= {p.name for p in NOTEBOOKS}
    (cell,) = [c for c in read(path).cells if "parameters" in c.metadata.get("tags", [])]
    assigned = re.findall(r"^(\w+) = ", cell.source, re.M)
    found = papermill.inspect_notebook(str(path))
    assert list(found) == assigned, (
        f"{path.name}: papermill reads {list(found)}, the cell assigns {assigned}"
    )
    assert {"fast", *PAPERMILL_PARAMETERS.get(path.name, {"seed": 2})} <= set(found)


# 10-live is left out: its live runs differ on every execution (real processes on the wall clock),
# so a second one with another seed takes no path the fast-mode run does not, and it would cost half
# a minute while no other live test runs. test_papermill_reads_every_parameter still checks its
# cell.
PAPERMILL_RUNS = [p for p in NOTEBOOKS if p.name != LIVE]


@pytest.mark.timeout(600)
@pytest.mark.parametrize("path", list(_params(PAPERMILL_RUNS)))
def test_notebook_runs_under_papermill_with_a_changed_parameter(path, monkeypatch, tmp_path):
    """`papermill NN-....ipynb out.ipynb -p fast True -p <name> <value>`, as 00 documents: the
    parameters are injected after the parameters cell and the notebook runs top to bottom."""
    import papermill

    monkeypatch.delenv(
        "LEASELAB_FAST", raising=False
    )  # fast mode comes from the injected parameter
    _kernel_environment(monkeypatch, tmp_path)
    changed = dict(PAPERMILL_PARAMETERS.get(path.name, {"seed": 2}))
    if (
        changed.get("durations_csv") == "<your.csv>"
    ):  # a reader's own processing times, not the sample's
        import numpy as np

        own = tmp_path / "your.csv"
        seconds = np.round(np.random.default_rng(7).lognormal(np.log(2.0), 0.8, 300), 3)
        own.write_text("job,seconds\n" + "".join(f"{i},{s}\n" for i, s in enumerate(seconds)))
        changed["durations_csv"] = str(own)
    source = tmp_path / path.name
    nb = read(path)
    nb.cells.append(nbformat.v4.new_code_cell(PROBE))
    nbformat.write(nb, source)
    output = tmp_path / f"out-{path.name}"
    papermill.execute_notebook(
        str(source),
        str(output),
        parameters={"fast": True, **changed},
        kernel_name="python3",
        cwd=str(FOLDER),
        progress_bar=False,
        execution_timeout=CELL_TIMEOUT_S,
    )  # raises PapermillExecutionError
    ran = read(output)
    injected = [c for c in ran.cells if "injected-parameters" in c.metadata.get("tags", [])]
    assert len(injected) == 1 and "fast = True" in injected[0].source
    for name in changed:
        assert re.search(rf"^{name} = ", injected[0].source, re.M), injected[0].source
    _check_executed(path, ran)
    if "durations_csv" in changed:
        printed = "".join(
            o.get("text", "") for c in ran.cells if c.cell_type == "code" for o in c.outputs
        )
        assert (
            f"read 300 durations from {Path(changed['durations_csv']).name}, column seconds"
            in printed
        )
