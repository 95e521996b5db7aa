"""Every command checks its output paths before anything runs (issue 35 item 14): a place that
cannot be written (under a regular file, on a read-only file system) is one `error:` line and exit
2 at once, not after an hour-long live run; and `advise --as ''` is refused like any unknown
queue (item 15)."""

from __future__ import annotations

import time

import pytest

from sim.cli.main import main
from tests.cli.test_hardening import one_error_line

UNWRITABLE = ["/proc/leaselab-out", "{file}/out"]
COMMANDS = [
    ["live", "baseline", "--duration", "3600", "--dsn", "postgresql://nobody@127.0.0.1:1/x"],
    ["run", "baseline"],
    ["review", "baseline", "--seeds", "1"],
    ["sweep", "baseline", "--grid", "policy.lease_ttl=20,30"],
    ["advise", "sample"],
    ["demo"],
]


@pytest.mark.parametrize("where", UNWRITABLE)
@pytest.mark.parametrize("command", COMMANDS, ids=[c[0] for c in COMMANDS])
def test_an_unwritable_out_is_refused_before_anything_runs(tmp_path, capsys, command, where):
    blocker = tmp_path / "a-file"
    blocker.write_text("mine")
    out = where.format(file=blocker)
    started = time.monotonic()
    assert main([*command, "--out", out]) == 2
    line = one_error_line(capsys)
    assert line.startswith(f"error: --out {out}: "), line
    assert "cannot" in line
    assert time.monotonic() - started < 20  # refused up front: no run, no server
    assert blocker.read_text() == "mine"


@pytest.mark.parametrize("command", [["advise", "sample"], ["review", "baseline"]])
def test_an_unwritable_report_is_refused_before_anything_runs(tmp_path, capsys, command):
    assert main([*command, "--report", "/proc/leaselab-report.html"]) == 2
    line = one_error_line(capsys)
    assert line.startswith("error: --report /proc/leaselab-report.html: cannot write"), line


@pytest.mark.parametrize("name", ["", " "])
def test_advise_as_an_empty_name_is_refused(capsys, name):
    assert main(["advise", "sample", "--no-verify", "--as", name]) == 2
    assert "unknown queue; one of" in one_error_line(capsys)
