"""`python -m sim sweep`: a grid from the command line, means with intervals;
bad grids get one line."""

from __future__ import annotations

import pandas as pd

from sim.cli.main import main


def test_sweep_prints_the_grid_and_writes_its_tables(tmp_path, capsys):
    out = tmp_path / "sw"
    code = main(
        [
            "sweep",
            "gc-pause-zombie",
            "--grid",
            "policy.lease_ttl=15,60",
            "--replications",
            "2",
            "--serial",
            "--out",
            str(out),
        ]
    )
    printed = capsys.readouterr().out
    assert code == 0
    assert printed.startswith("gc-pause-zombie: 4 runs in ")
    runs = pd.read_csv(out / "runs.csv")
    assert runs["policy.lease_ttl"].tolist() == [15, 15, 60, 60]
    table = pd.read_csv(out / "aggregate.csv")
    assert table["false_expiries_mean"].tolist() == [1.0, 0.0]
    assert "false_expiries_mean" in printed.splitlines()[1]


def test_a_bad_grid_is_one_line(capsys):
    assert main(["sweep", "baseline", "--grid", "policy.lease_ttl"]) == 2
    err = capsys.readouterr().err
    assert (
        err == "error: --grid expects KEY=V1,V2,... (e.g. policy.watcher_interval=5,30), got "
        "'policy.lease_ttl'\n"
    )
    assert main(["sweep", "baseline", "--replications", "0"]) == 2
    assert capsys.readouterr().err == "error: --replications 0: must be at least 1\n"
