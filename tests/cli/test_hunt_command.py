"""python -m sim hunt: exit 1 when an invariant broke, 0 when none did within the scope and the
time, 2 on bad input (one line, no traceback); --out and --report; Ctrl-C reports the coverage."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from html.parser import HTMLParser
from pathlib import Path

import pytest

from sim.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
QUICK = ["--no-postgres", "--time", "60"]


def test_a_broken_invariant_exits_1_and_writes_the_hand_back(tmp_path, capsys):
    out, report = tmp_path / "out", tmp_path / "hunt.html"
    code = main(
        ["hunt", "read-then-write-race", "--invariant", "double_claim", "--schedules", "20"]
        + [*QUICK, "--out", str(out), "--report", str(report)]
    )
    printed = capsys.readouterr()
    assert code == 1
    assert "double_claim: two workers held the job at once" in printed.out
    assert "hunting read-then-write-race for up to 60 s" in printed.err
    assert {p.name for p in out.iterdir()} >= {"double_claim.toml", "test_double_claim.py"}
    headings = _Headings()
    headings.feed(report.read_text())
    assert headings.found == [
        "Hunt: read-then-write-race",
        "The shortest bad timeline",
        "double_claim: two workers held the job at once",
    ]


def test_nothing_broken_within_the_scope_exits_0_with_the_certificate(capsys):
    code = main(
        ["hunt", "baseline", "--exhaustive", "--workers", "1", "--jobs", "1", "--max-faults", "1"]
        + ["--invariant", "non_owner_completion", *QUICK]
    )
    printed = capsys.readouterr().out
    assert code == 0
    assert "schedules within this scope checked on the simulated database: no violation" in printed
    assert "up to 1 worker(s) and 1 job(s)" in printed  # the scope beside it


@pytest.mark.parametrize(
    "args, message",
    [
        (["--workers", "0"], "error: workers: expected a whole number from 1 to 8, got 0"),
        (["--invariant", "nope"], "error: invariant: 'nope' is not one of"),
        (["--time", "-1"], "error: time: expected seconds"),
        (["--fault", "gremlins"], "error: kinds: 'gremlins' is not one of"),
        (["--set", "policy.lease_ttl=-1"], "error: policy.lease_ttl: must be > 0 seconds"),
        (["--parallel", "x"], "error: argument --parallel: invalid int value: 'x'"),
    ],
)
def test_bad_input_exits_2_in_one_line(args, message, capsys):
    code = main(["hunt", "baseline", *QUICK, *args])
    err = capsys.readouterr().err
    assert code == 2
    lines = [line for line in err.splitlines() if not line.startswith("hunting ")]
    assert len(lines) == 1 and lines[0].startswith(message) and "Traceback" not in err


def test_a_non_empty_out_is_refused_before_anything_runs(tmp_path, capsys):
    (tmp_path / "keep.txt").write_text("mine")
    code = main(["hunt", "baseline", *QUICK, "--out", str(tmp_path)])
    assert code == 2 and "directory is not empty" in capsys.readouterr().err
    assert [p.name for p in tmp_path.iterdir()] == ["keep.txt"]


@pytest.mark.slow  # a hunt in a subprocess, interrupted after seconds: make test only
def test_ctrl_c_cuts_the_hunt_off_and_it_reports_what_it_covered():
    env = {**os.environ, "PYTHONPATH": str(ROOT), "LEASELAB_HEADLESS": "1"}
    hunt = subprocess.Popen(
        [sys.executable, "-m", "sim", "hunt", "baseline", "--no-postgres", "--time", "600"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert hunt.stderr is not None and hunt.stderr.readline().startswith("hunting baseline")
    time.sleep(3)  # well into the search
    hunt.send_signal(signal.SIGINT)
    out, _ = hunt.communicate(timeout=120)
    assert hunt.returncode in (0, 1)  # a finding or not, by the usual rule
    assert "stopped: interrupted" in out and "checked " in out


class _Headings(HTMLParser):
    def __init__(self):
        super().__init__()
        self.found: list[str] = []
        self._in = False

    def handle_starttag(self, tag, attrs):
        self._in = tag in ("h1", "h2", "h3")
        if self._in:
            self.found.append("")

    def handle_endtag(self, tag):
        self._in = False

    def handle_data(self, data):
        if self._in:
            self.found[-1] += data
