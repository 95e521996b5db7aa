"""The command line, run in-process through main([...]) (plus one real subprocess)."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib

import pandas as pd
import pytest

from sim.cli.main import main, parse_assignments
from sim.model.events import COLUMNS
from sim.scenario.settings import loads, preset, preset_names

SMALL = ["--set", "workload.jobs=50", "--set", "horizon=120"]


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("error: ")
    assert "Traceback" not in err
    return lines[0]


def test_list_shows_every_preset_with_a_description(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in out] == preset_names()
    assert all(len(line.split()) > 3 for line in out)


@pytest.mark.parametrize("name", preset_names())
def test_show_prints_toml_that_loads_back(capsys, name):
    assert main(["show", name]) == 0
    text = capsys.readouterr().out
    assert loads(text) == preset(name)


def test_show_applies_overrides(capsys):
    assert (
        main(
            [
                "show",
                "baseline",
                "--set",
                "policy.lease_ttl=20",
                "--set",
                "policy.claim=skip_locked",
            ]
        )
        == 0
    )
    scenario = loads(capsys.readouterr().out)
    assert scenario.policy.lease_ttl == 20.0
    assert scenario.policy.claim == "skip_locked"


def test_run_prints_summary_and_writes_files(capsys, tmp_path):
    out = tmp_path / "runs" / "one"
    code = main(
        [
            "run",
            "baseline",
            *SMALL,
            "--set",
            "policy.lease_ttl=20",
            "--seed",
            "3",
            "--out",
            str(out),
        ]
    )
    printed = capsys.readouterr()
    assert code == 0, printed.err
    assert "double claims" in printed.out and "recovery latency" in printed.out
    assert "invariants: all hold" in printed.out
    assert sorted(p.name for p in out.iterdir()) == sorted(
        ["events.csv", "leases.csv", "jobs.csv", "summary.json", "scenario.toml", "timeline.png"]
    )

    summary = json.loads((out / "summary.json").read_text())
    metrics = summary["metrics"]
    events = pd.read_csv(out / "events.csv")
    leases = pd.read_csv(out / "leases.csv")
    jobs = pd.read_csv(out / "jobs.csv")
    assert list(events.columns) == COLUMNS
    assert {"job", "worker", "attempt", "start", "end", "end_reason", "until"} <= set(
        leases.columns
    )
    assert {"job", "status", "attempts", "latency"} <= set(jobs.columns)
    assert len(leases) == metrics["leases"] == summary["rows"]["leases"]
    assert (
        len(jobs) == metrics["jobs"] == summary["rows"]["jobs"] == (events.kind == "enqueue").sum()
    )
    assert len(events) == summary["rows"]["events"]
    assert (events.kind == "claim").sum() == metrics["leases"]
    assert (jobs.status == "Completed").sum() == metrics["completed"]
    assert isinstance(metrics["leases"], int)
    assert summary["invariants"]["ok"] is True

    scenario = loads((out / "scenario.toml").read_text())
    assert (scenario.policy.lease_ttl, scenario.seed, scenario.workload.jobs, scenario.horizon) == (
        20.0,
        3,
        50,
        120.0,
    )
    assert (out / "timeline.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_run_parquet_without_heartbeat_records(capsys, tmp_path):
    out = tmp_path / "pq"
    assert (
        main(
            [
                "run",
                "crash-recovery",
                "--set",
                "horizon=600",
                "--out",
                str(out),
                "--format",
                "parquet",
                "--no-heartbeat-records",
            ]
        )
        == 0
    )
    summary = json.loads((out / "summary.json").read_text())
    events = pd.read_parquet(out / "events.parquet")
    assert len(events) == summary["rows"]["events"]
    assert "heartbeat" not in set(events.kind)
    assert len(pd.read_parquet(out / "leases.parquet")) == summary["metrics"]["leases"]


def test_unexpected_violations_exit_1(capsys):
    code = main(["run", "read-then-write-race", *SMALL, "--set", "expect=[]"])
    out = capsys.readouterr().out
    assert code == 1
    assert "double_claim" in out and "UNEXPECTED" in out


def test_expected_violations_exit_0(capsys):
    assert main(["run", "read-then-write-race", *SMALL]) == 0
    assert "(expected)" in capsys.readouterr().out


def test_lease_warning_is_one_line(capsys):
    assert main(["run", "baseline", *SMALL, "--set", "policy.heartbeat_interval=40"]) == 0
    warnings = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(warnings) == 1
    assert warnings[0].startswith("warning: policy.heartbeat_interval 40 s >= policy.lease_ttl")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["run", "crash-recovry"], "did you mean crash-recovery?"),
        (["show", "gc-pause-zombi"], "did you mean gc-pause-zombie?"),
        (["run", "baseline", "--set", "policy.leese_ttl=3"], "did you mean policy.lease_ttl?"),
        (["run", "baseline", "--set", "polcy.lease_ttl=3"], "did you mean policy?"),
        (
            ["run", "baseline", "--set", "policy.workers=abc"],
            "policy.workers: expected a whole number",
        ),
        (
            ["run", "baseline", "--set", "policy.workers=0"],
            "policy.workers: must be from 1 to 10,000",
        ),
        (["run", "baseline", "--set", "policy.lease_ttl=-5"], "policy.lease_ttl: must be > 0"),
        (["run", "baseline", "--set", "policy.lease_ttl"], "KEY=VALUE"),
        (["run", "baseline", "--set", "=3"], "KEY=VALUE"),
        (["run", "baseline", "--set", "policy.lease_ttl="], "missing value"),
        (["run", "baseline", "--set", "policy.lease_ttl=[1"], "not a TOML value"),
        (["run", "baseline", "--backend", "oracle"], "--backend"),
        (["run", "baseline", "--seed", "x"], "--seed"),
        (["run", "baseline", "--seed", "-1"], "seed: must be a whole number >= 0"),
        (
            ["review", "baseline", "--seeds", "1000000000"],
            "--seeds 1000000000: must be from 1 to 100,000",
        ),
        (["run", "baseline", "--format", "xml"], "--format"),
        (["run", "no/such/file.toml"], "cannot read"),
        (["frobnicate"], "invalid choice"),
        (["run"], "SCENARIO"),
    ],
)
def test_bad_input_is_one_error_line_and_exit_2(capsys, argv, message):
    assert main(argv) == 2
    assert message in one_error_line(capsys)


def test_broken_toml_file(capsys, tmp_path):
    path = tmp_path / "mine.toml"
    text = 'name = "mine"\n[policy\nworkers = 3\n'
    path.write_text(text)
    assert main(["run", str(path)]) == 2
    assert "not valid TOML" in one_error_line(capsys)
    assert path.read_text() == text


def test_postgres_unreachable_is_exit_2(capsys):
    code = main(
        [
            "run",
            "gc-pause-zombie",
            "--backend",
            "postgres",
            "--dsn",
            "postgresql://nobody:s3cret@127.0.0.1:1/none?connect_timeout=2",
        ]
    )
    assert code == 2
    line = one_error_line(capsys)
    assert "s3cret" not in line


def test_existing_out_dir_is_not_overwritten_without_force(capsys, tmp_path):
    out = tmp_path / "results"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    (out / "events.csv").write_text("precious")
    assert main(["run", "baseline", *SMALL, "--out", str(out)]) == 2
    assert "--force" in one_error_line(capsys)
    assert sorted(p.name for p in out.iterdir()) == ["events.csv", "notes.txt"]
    assert (out / "events.csv").read_text() == "precious"

    assert main(["run", "baseline", *SMALL, "--out", str(out), "--force"]) == 0
    assert (out / "notes.txt").read_text() == "mine"
    assert (out / "events.csv").read_text().startswith("t,kind,")


def test_out_path_that_is_a_file(capsys, tmp_path):
    path = tmp_path / "file"
    path.write_text("x")
    assert main(["run", "baseline", *SMALL, "--out", str(path)]) == 2
    one_error_line(capsys)
    assert path.read_text() == "x"


def test_demo_writes_figures_and_summary(capsys, tmp_path):
    out = tmp_path / "demo"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    assert (
        main(["demo", "--out", str(out)]) == 2
    )  # like run, advise and review: not into a non-empty DIR
    assert "--out" in one_error_line(capsys) and [p.name for p in out.iterdir()] == ["keep.txt"]
    assert main(["demo", "--out", str(out), "--force"]) == 0
    printed = capsys.readouterr().out
    names = {p.name for p in out.iterdir()}
    assert {
        "read-then-write-race.png",
        "read-then-write-race-conditional-update.png",
        "crash-recovery.png",
        "gc-pause-zombie.png",
        "summary.csv",
        "keep.txt",
    } == names
    assert (out / "keep.txt").read_text() == "mine"
    table = pd.read_csv(out / "summary.csv")
    assert len(table) == 4
    race, fixed = table.iloc[0], table.iloc[1]
    assert race["double_claims"] > 0 and fixed["double_claims"] == 0
    assert fixed["claim"] == "conditional_update"
    assert "double claims" in printed and "gc-pause-zombie" in printed
    # running it again needs --force too: the figures there may be the user's by now
    before = (out / "summary.csv").read_bytes()
    assert main(["demo", "--out", str(out)]) == 2
    assert "pass --force" in one_error_line(capsys) and (out / "summary.csv").read_bytes() == before


def test_parse_assignments_values():
    parsed = parse_assignments(
        [
            "policy.lease_ttl=20",
            "policy.claim=skip_locked",
            "policy.heartbeat=false",
            'workload.processing={kind="lognormal", median=1, p99=5}',
            "expect=[]",
            "policy.claim= select_for_update ",
        ]
    )
    assert parsed == {
        "policy.lease_ttl": 20,
        "policy.claim": "select_for_update",
        "policy.heartbeat": False,
        "workload.processing": {"kind": "lognormal", "median": 1, "p99": 5},
        "expect": [],
    }
    assert tomllib.loads("x = 1")  # the parser the CLI relies on


def test_module_entry_point_unknown_scenario():
    proc = subprocess.run(
        [sys.executable, "-m", "sim", "run", "nonexistent"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: scenario 'nonexistent'")
    assert "Traceback" not in proc.stderr
    assert proc.stdout == ""


def test_a_run_on_a_queue_prints_the_queue_toml_settings_it_applied():
    """Issue 31 item 4: `run --sql DIR` printed nothing of the queue's own settings (queue.toml);
    the summary names each, and the value an override replaced it with."""
    import dataclasses

    import sim
    from sim.cli.run_text import format_summary

    run = sim.run("baseline", **{"policy.lease_ttl": 60, "workload.jobs": 5, "horizon": 20})
    run = dataclasses.replace(
        run,
        queue="q/",
        queue_settings={
            "policy.claim": "conditional_update",
            "policy.heartbeat": True,
            "policy.lease_ttl": 30.0,
        },
    )
    lines = format_summary(run).splitlines()
    assert lines[0].startswith("baseline: seed 1, memory backend (queue q/), 20 s simulated")
    assert lines[1] == (
        "  queue.toml settings applied: claim = conditional_update, heartbeat = true, "
        "lease_ttl = 30.0 (60.0 by override)"
    )
    assert not any("queue.toml" in line for line in format_summary(sim.run("baseline")).split("\n"))
