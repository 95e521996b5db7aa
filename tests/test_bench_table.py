"""The benchmarks' output: one JSON line each (benchmarks/figures.py), and `make bench`'s table of
every figure against its goal (benchmarks/table.py). The benchmarks themselves run in `make
bench`, not here: no timed assertions in tests."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import figures  # noqa: E402
import table  # noqa: E402


def test_a_figure_is_judged_by_its_goal_on_the_side_it_names():
    assert figures.figure("ratio", 6.1, unit="x", goal=3.0)["met"] is False
    assert figures.figure("ratio", 2.9, unit="x", goal=3.0)["met"] is True
    assert figures.figure("speedup", 1.7, goal=1.6, better="higher")["met"] is True
    assert figures.figure("speedup", 1.5, goal=1.6, better="higher")["met"] is False
    assert figures.figure("calls", 9.0)["met"] is None  # no goal: reported, not judged
    assert figures.figure("rss", float("nan"), goal=1.0) == {
        "name": "rss",
        "value": None,
        "unit": "",
        "goal": 1.0,
        "better": "lower",
        "met": None,
    }
    with pytest.raises(ValueError, match="better"):
        figures.figure("x", 1.0, better="smaller")


def test_emit_prints_one_strict_json_line(capsys, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["bench_x.py", "--quick"])
    floor = {"floor": "bare SimPy loop", "floor_value": 0.5, "floor_unit": "s"}
    figures.emit("model", [figures.figure("ratio", 6.06, unit="x", goal=3.0, **floor)], jobs=10)
    out = capsys.readouterr().out
    assert out.count("\n") == 1
    record = json.loads(out)
    assert record["benchmark"] == "model" and record["quick"] is True and record["jobs"] == 10
    assert record["figures"][0]["floor_value"] == 0.5


def test_the_table_has_a_row_per_figure_with_its_verdict(tmp_path):
    lines = [
        "# benchmarks/bench_model.py",
        json.dumps(
            {
                "benchmark": "model",
                "quick": False,
                "figures": [
                    figures.figure(
                        "ratio_to_bare_simpy",
                        6.06,
                        unit="x",
                        goal=3.0,
                        floor="bare SimPy loop",
                        floor_value=0.52,
                        floor_unit="s",
                    ),
                    figures.figure("peak_rss_gb", 0.9, unit="GB", goal=1.0, note="extrapolated"),
                ],
            }
        ),
        "not json {",
        json.dumps({"benchmark": "other", "no": "figures"}),  # not in the format: skipped
        json.dumps(
            {
                "benchmark": "hunt",
                "quick": True,
                "figures": [
                    figures.figure("schedules_per_second", 1200, goal=1000, better="higher"),
                    figures.figure("events_per_schedule", 40),
                ],
            }
        ),
    ]
    found = table.records(lines)
    assert [r["benchmark"] for r in found] == ["model", "hunt"]
    rows = table.rows(found)
    assert rows == [
        (
            "model",
            "ratio_to_bare_simpy",
            "6.06 x",
            "<= 3 x",
            "MISSED",
            "floor: bare SimPy loop = 0.52 s",
        ),
        ("model", "peak_rss_gb", "0.9 GB", "<= 1 GB", "met", "extrapolated"),
        ("hunt (quick)", "schedules_per_second", "1,200", ">= 1,000", "met", ""),
        ("hunt (quick)", "events_per_schedule", "40", "-", "-", ""),
    ]
    path = tmp_path / "bench.json"
    path.write_text("\n".join(lines) + "\n")
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / "table.py"), str(path)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0].split() == ["benchmark", "figure", "value", "goal"] + [
        "verdict",
        "floor",
        "/",
        "note",
    ]
    assert done.stdout.rstrip().endswith("4 figures from 2 benchmarks: 2 met, 1 missed")


def test_the_table_without_figures_says_so_and_fails(tmp_path):
    path = tmp_path / "empty.json"
    path.write_text("# nothing\n")
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / "table.py"), str(path)], capture_output=True, text=True
    )
    assert done.returncode == 1 and done.stderr.strip() == "no benchmark figures found"


def test_every_benchmark_prints_through_figures_and_takes_quick():
    """So that `make bench` can collect each one's line and `make bench-quick` shortens each."""
    scripts = sorted(BENCHMARKS.glob("bench_*.py"))
    assert len(scripts) >= 8
    for script in scripts:
        text = script.read_text()
        assert "from figures import" in text and "emit(" in text, script.name
        assert "quick" in text, script.name
