"""The package face: `import sim` loads nothing until a name is used; every result saves itself into
a directory it never overwrites unasked; the command line turns every error into one scrubbed
line."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import pytest

import sim
from sim.cli.main import main
from sim.errors import ConfigError
from sim.support.output_paths import check_directory, check_report

HEAVY = ("numpy", "pandas", "scipy", "matplotlib", "simpy", "psycopg", "pyarrow")
SMALL = {"workload.jobs": 20, "horizon": 60}
DSN = "postgresql://bob:sekret123@127.0.0.1:1/db"


def loaded_after(code: str) -> dict:
    """Which modules a fresh interpreter holds after running `code` (it prints its own JSON)."""
    probe = f"import json, sys\n{code}\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout
    modules = set(json.loads(out.splitlines()[-1]))
    return {
        "heavy": sorted(m for m in HEAVY if m in modules),
        "sim": sorted(m for m in modules if m.split(".")[0] == "sim"),
    }


def test_import_sim_loads_no_library_module():
    assert loaded_after("import sim") == {"heavy": [], "sim": ["sim"]}


def test_a_run_needs_neither_matplotlib_nor_psycopg():
    found = loaded_after("import sim\nsim.run('baseline', **{'workload.jobs': 5}).check()")
    assert "matplotlib" not in found["heavy"] and "psycopg" not in found["heavy"]
    assert {"numpy", "pandas", "simpy"} <= set(found["heavy"])


def test_the_command_line_starts_without_pandas_or_matplotlib():
    found = loaded_after("import sim.__main__")
    assert found["heavy"] == ["numpy"]  # sim.scenario's; the commands import the rest when run


def test_a_live_child_imports_no_pandas():
    """A live child (and above all a worker's replacement) starts in a third of a second, not
    two thirds: its role's modules, with a queue directory's loader, leave pandas and pyarrow out
    (the event log builds its DataFrame on demand, in the runner)."""
    found = loaded_after(
        "from sim.live_mode import connection, roles, worker, watcher, producer\n"
        "from sim.db.queue.directory import load_queue"
    )
    assert found["heavy"] == ["numpy", "psycopg", "simpy"]


def test_every_public_name_resolves_and_is_listed_by_dir():
    before = {  # the names `from sim import *` gave before the package face went lazy
        *("Advice", "Comparison", "Dist", "Faults", "LiveRun", "Policy", "Review", "Scenario"),
        *("SweepResult", "Workload", "advise", "check", "compare", "compare_peers", "live"),
        *("make_backend", "preset", "preset_names", "review", "run", "sweep"),
    }
    assert before <= set(sim.__all__)
    assert set(sim.__all__) | {"__version__"} <= set(dir(sim))
    for name in sim.__all__:
        assert getattr(sim, name).__name__ == name, name
    namespace: dict = {}
    exec("from sim import *", namespace)
    assert set(sim.__all__) <= set(namespace)
    assert sim.plots.lease_timeline.__module__ == "sim.plots.timeline"  # a submodule, on first use
    with pytest.raises(AttributeError, match="has no attribute 'nonesuch'"):
        sim.nonesuch  # noqa: B018


def test_no_module_or_folder_is_named_like_a_public_name():
    """Importing a submodule binds it on its package: a module named like a public function would
    replace that function, so no name is both (the folders say what is inside, the verbs stay
    functions)."""
    package = pathlib.Path(sim.__file__).parent
    names = {p.stem for p in package.glob("*.py")} | {
        p.name for p in package.iterdir() if (p / "__init__.py").exists()
    }
    assert names & set(sim.__all__) == set()
    code = (
        "import sim.checklist.design_review, sim.sweeps, sim.live_mode.runner, sim.hunting\n"
        "import sim.live_mode as L\n"
        "import sim, types\n"
        "assert isinstance(L, types.ModuleType)\n"
        "assert all(callable(f) and f.__name__ == n for n, f in "
        "[('review', sim.review), ('sweep', sim.sweep), ('live', sim.live), ('hunt', sim.hunt)])\n"
    )
    assert "sim.checklist.design_review" in loaded_after(code)["sim"]


# ---- save(directory) -----------------------------------------------------------------------------


def test_a_directory_holding_files_is_refused_unless_overwrite(tmp_path):
    run = sim.run("baseline", **SMALL)
    out = tmp_path / "run"
    written = run.save(out)
    assert [p.name for p in written] == [
        "events.csv",
        "leases.csv",
        "jobs.csv",
        "summary.json",
        "scenario.toml",
        "timeline.png",
    ]
    (out / "notes.txt").write_text("mine")
    before = (out / "events.csv").read_bytes()
    with pytest.raises(ConfigError, match=r": directory is not empty; .* pass overwrite=True"):
        run.save(out)
    assert (out / "events.csv").read_bytes() == before
    assert run.save(out, overwrite=True) == written
    assert (out / "notes.txt").read_text() == "mine"  # only its own files are replaced
    with pytest.raises(ConfigError, match="exists and is not a directory"):
        run.save(out / "notes.txt")


def test_review_and_comparison_save_the_files_the_command_line_wrote(tmp_path):
    review = sim.review("baseline", seeds=[1], variants=False, **SMALL)
    assert [p.name for p in review.save(tmp_path / "r")] == [
        "review.csv",
        "review.txt",
        "review.png",
    ]
    assert (tmp_path / "r" / "review.txt").read_text() == f"{review}\n"
    comparison = sim.compare(sim.run("crash-recovery"), 2)  # a simulated run stands in for live
    assert [p.name for p in comparison.save(tmp_path / "c")] == [
        "comparison.csv",
        "comparison.png",
    ]
    with pytest.raises(ConfigError, match="directory is not empty"):
        comparison.save(tmp_path / "c")


def test_the_checks_name_the_option_the_user_typed(tmp_path):
    (tmp_path / "x.txt").write_text("x")
    with pytest.raises(ConfigError, match=r"^--out .*: directory is not empty; .* --force"):
        check_directory(tmp_path, False, option="--out", force="--force")
    assert check_directory(tmp_path, True) == tmp_path
    page = tmp_path / "r.html"
    page.write_text("old")
    with pytest.raises(ConfigError, match=r"r.html: exists; choose another name or pass overw"):
        check_report(page)
    with pytest.raises(ConfigError, match="expected a file name ending in .html"):
        check_report(tmp_path / "r.pdf")


def test_sweep_takes_overrides_like_run_and_review():
    result = sim.sweep("baseline", {}, 2, executor="serial", **{"policy.workers": 2, **SMALL})
    assert result.scenario.policy.workers == 2 and result.scenario.horizon == 60
    assert str(result).startswith("baseline: 2 runs in ")


# ---- errors leave main() as one line, passwords scrubbed -----------------------------------------


def test_a_live_error_is_one_scrubbed_line(capsys, monkeypatch):
    from sim.live_mode import runner as live_runner

    def fail(*args, **kwargs):
        raise live_runner.LiveError(f"live w0 process failed to start: cannot reach {DSN}")

    monkeypatch.setattr(live_runner, "live", fail)
    assert main(["live", "baseline", "--duration", "1", "--dsn", DSN]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: live w0 process failed") and err.count("\n") == 1
    assert "sekret123" not in err


def test_a_fault_of_lease_labs_own_is_its_traceback_scrubbed_exit_3(capsys, monkeypatch):
    import sim.runner

    def fail(*args, **kwargs):
        raise RuntimeError(f"a bug that prints {DSN}")

    monkeypatch.setattr(sim.runner, "run", fail)
    assert main(["run", "baseline", "--dsn", DSN]) == 3
    err = capsys.readouterr().err
    assert "Traceback" in err and "RuntimeError: a bug that prints" in err
    assert "sekret123" not in err
