"""Batch output stays clean: no progress bar frozen in a notebook executed headless (issue 26,
defect 2), and a Figure a cell returns shows as an image, not as its repr (defect 3)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import sim
from sim.support import progress


@pytest.fixture
def instant_bars(monkeypatch):
    """progress=None would draw a bar at once (no 2 s wait),
    so a short run shows what it decides."""
    monkeypatch.setattr(progress, "SHOW_AFTER", -1.0)


def _fake_kernel(monkeypatch, parent: str) -> None:
    class Shell:
        kernel = object()

    monkeypatch.setattr("IPython.get_ipython", lambda: Shell())
    monkeypatch.setattr(progress, "_parent_cmdline", lambda: parent)


def _run_and_sweep() -> None:
    small = {"workload.jobs": 20, "horizon": 60.0}
    sim.run("baseline", seed=1, **small)
    sim.sweep(
        sim.preset("baseline").with_overrides(small),
        {"policy.lease_ttl": [20.0, 30.0]},
        replications=10,  # 20 runs: the serial sweep ticks twice, so its bar opens at the first
        executor="serial",
        metrics=["leases"],
    )


def test_headless_environment_switches_off_the_automatic_bars_of_run_and_sweep(
    monkeypatch, capsys, instant_bars
):
    """The defect: sim.run and sim.sweep drew their automatic bar whatever $LEASELAB_HEADLESS
    said, so make html (which sets it) saved their last frames in the pages."""
    monkeypatch.setenv("LEASELAB_HEADLESS", "1")
    _run_and_sweep()
    assert "%|" not in capsys.readouterr().err
    monkeypatch.setenv("LEASELAB_HEADLESS", "0")  # someone watches: the same calls draw bars
    _run_and_sweep()
    err = capsys.readouterr().err
    assert "baseline:" in err and "sweep baseline:" in err and "%|" in err


def test_an_explicit_request_still_draws_a_bar(monkeypatch, capsys):
    monkeypatch.setenv("LEASELAB_HEADLESS", "1")
    sim.run("baseline", seed=1, progress=True, **{"workload.jobs": 20, "horizon": 60.0})
    assert "%|" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("parent", "allowed"),
    [
        ("/venv/bin/python /venv/bin/papermill 07.ipynb out.ipynb -p fast True", False),
        ("/venv/bin/python /venv/bin/jupyter-nbconvert --to html --execute 07.ipynb", False),
        ("/venv/bin/python -m pytest tests/teaching/test_notebooks.py", False),
        ("/venv/bin/python /venv/bin/jupyter-lab", True),
    ],
)
def test_a_kernel_started_by_a_batch_runner_draws_no_automatic_bar(monkeypatch, parent, allowed):
    monkeypatch.delenv("LEASELAB_HEADLESS", raising=False)
    _fake_kernel(monkeypatch, parent)
    assert progress.bars_allowed() is allowed
    bar = progress.Progress(10, None, "sweep", unit="run")
    bar.start -= 10 * progress.SHOW_AFTER + 1  # it has been running long enough
    bar.tick(1)
    assert (bar.bar is not None) is allowed
    bar.close()


def test_a_terminal_keeps_its_bars_and_the_flag_wins(monkeypatch):
    monkeypatch.delenv("LEASELAB_HEADLESS", raising=False)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    assert progress.bars_allowed() is True  # plain Python: the command line's sweep shows one
    monkeypatch.setenv("LEASELAB_HEADLESS", "yes")
    assert progress.bars_allowed() is False
    _fake_kernel(monkeypatch, "/venv/bin/python /venv/bin/jupyter-lab")
    assert progress.bars_allowed() is False


def test_a_pipe_or_a_log_gets_no_automatic_bar(tmp_path):
    """`python -m sim advise ... 2>log` (or CI capturing stderr): no bar frames in the log."""
    env = {k: v for k, v in os.environ.items() if k != "LEASELAB_HEADLESS"}
    code = "from sim.support import progress; print(progress.bars_allowed())"
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "False"


def test_the_parent_command_line_is_read_from_the_process(monkeypatch):
    """JPY_PARENT_PID names the process that started the kernel: its /proc command line is what
    tells papermill from JupyterLab."""
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import time; print(1, flush=True); time.sleep(30)",
            "papermill",
            "x.ipynb",
        ],
        stdout=subprocess.PIPE,
    )
    try:
        child.stdout.readline()  # it runs: its command line is in /proc
        monkeypatch.setenv("JPY_PARENT_PID", str(child.pid))
        assert "papermill x.ipynb" in progress._parent_cmdline()
        monkeypatch.setattr("IPython.get_ipython", lambda: type("S", (), {"kernel": 1})())
        monkeypatch.delenv("LEASELAB_HEADLESS", raising=False)
        assert progress.batch_kernel() is True and progress.bars_allowed() is False
    finally:
        child.kill()
        child.wait()
    monkeypatch.setenv("JPY_PARENT_PID", "not a pid")
    assert progress._parent_cmdline() == ""


def test_a_kernel_started_by_a_process_under_pytest_is_batch(monkeypatch):
    """A pytest-xdist worker (`python -c "import sys;exec(...)"`) starts the kernels of the tests
    it runs: its command line names no runner, its parent's does. The parent and two ancestors
    are read, the parent first."""
    child = subprocess.Popen(
        [sys.executable, "-c", "import time; print(1, flush=True); time.sleep(30)"],
        stdout=subprocess.PIPE,
    )
    try:
        child.stdout.readline()
        monkeypatch.setenv("JPY_PARENT_PID", str(child.pid))
        lines = progress._parent_cmdline()
        assert lines.startswith(f"{sys.executable} -c import time;")
        assert "pytest" in lines  # this process, or (under xdist) the one that started it
        monkeypatch.setattr("IPython.get_ipython", lambda: type("S", (), {"kernel": 1})())
        monkeypatch.delenv("LEASELAB_HEADLESS", raising=False)
        assert progress.batch_kernel() is True
    finally:
        child.kill()
        child.wait()


# ---- in a real kernel ---------------------------------------------------------------------------


@pytest.mark.notebooks
@pytest.mark.timeout(120)
def test_in_a_kernel_a_returned_figure_is_an_image_and_no_bar_is_saved(monkeypatch):
    """09's `review.figure()` showed `<Figure size 1285.9x909.7 with 2 Axes>`: a Figure built
    without pyplot has no image formatter until the inline backend is loaded; teaching.setup()
    loads it. And a slow run in a kernel nbclient started saves no bar."""
    import nbformat
    from nbclient import NotebookClient

    monkeypatch.delenv("LEASELAB_HEADLESS", raising=False)  # the kernel's parent must say it
    monkeypatch.setenv("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    cells = [
        "from sim import teaching\nfrom sim.support import progress\nteaching.setup(True)",
        "from matplotlib.figure import Figure\nfig = Figure()\nfig.add_subplot().plot([1, 2])\nfig",
        "import sim\nprogress.SHOW_AFTER = -1.0\n"
        "sim.run('baseline', seed=1, **{'workload.jobs': 20, 'horizon': 60.0}).summary['jobs']",
    ]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    NotebookClient(nb, kernel_name="python3", timeout=100).execute()
    shown = nb.cells[1].outputs[0]["data"]
    assert "image/png" in shown and shown["text/plain"].startswith("<Figure size")
    outputs = nb.cells[2].outputs
    assert [o["output_type"] for o in outputs] == ["execute_result"]
    assert outputs[0]["data"]["text/plain"] == "20"


# ---- issue 34: no local path in a page make html publishes ---------------------------------------


def test_the_server_is_said_without_its_socket_folder():
    from sim.teaching import server_words

    said = server_words("postgresql://postgres:s3cret@/postgres?host=/home/me/.cache/leaselab/pg")
    assert said == "host (a local socket) database postgres user postgres"
    assert server_words("host=db.example port=5433 dbname=q user=u password=pw") == (
        "host db.example port 5433 database q user u"
    )


def test_a_review_of_a_queue_names_its_folder_not_its_path(tmp_path):
    from sim.teaching import queue_lab

    folder = tmp_path / "myqueue"
    text = f"Design review on the queue in {folder} (PostgreSQL): {folder}/queries.sql:4 ..."
    assert queue_lab.shareable(text, folder) == (
        "Design review on the queue in myqueue (PostgreSQL): queries.sql:4 ..."
    )
    hyphened = tmp_path / "unfenced-completion"  # a review wraps its lines after a hyphen
    wrapped = f"SQL: complete_fenced ({str(hyphened).replace('-', '-' + chr(10) + '       ')}"
    assert queue_lab.shareable(wrapped + "/queries.sql:7)", hyphened) == (
        "SQL: complete_fenced (queries.sql:7)"
    )
    definition = sim.db.queue.directory.load_queue(queue_lab.example("unfenced-completion"))
    where = queue_lab.overrides_frame(definition)["where"]
    assert where.tolist() == ["queries.sql:7"] and str(tmp_path) not in where.iloc[0]
