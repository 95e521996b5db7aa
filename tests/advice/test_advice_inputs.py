"""Issue 36, items 1 and 3: measured pauses instead of the assumed pause model (a CSV read as the
durations file is, with the same one-line errors), and a unit mistake that ends in its remedy:
the one error names --unit when the column's name or the values' scale says another unit."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from sim.advice.advisor import advise
from sim.cli.main import main
from sim.errors import ConfigError
from sim.scenario.dists import Dist
from sim.scenario.durations import PAUSES, read_durations
from sim.scenario.settings import LeaseWarning


def write(tmp_path, text: str, name: str = "gc.csv"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def gc_log(n: int = 400, median_ms: float = 40.0, seed: int = 1) -> str:
    """A GC log export: a timestamp and each stop-the-world pause in ms (lognormal)."""
    rng = np.random.default_rng(seed)
    ms = np.round(rng.lognormal(np.log(median_ms), 1.0, n))
    return "pause_ms\n" + "".join(f"{v:.0f}\n" for v in ms)


@pytest.mark.slow  # advices with their evidence: make test only
def test_measured_pauses_replace_the_assumed_tail_and_can_measure_the_rate(tmp_path):
    path = write(tmp_path, gc_log())
    measured = read_durations(path, "pause_ms", "ms", kind=PAUSES)
    advice = advise(
        "sample",
        arrival_rate=1.0,
        pauses=path,
        pause_unit="ms",
        pause_hours=50,
        verify=False,
    )
    a = advice.assumptions
    assert a.pause_duration.kind == "empirical"
    np.testing.assert_allclose(sorted(a.pause_duration.samples), sorted(measured.seconds))
    assert a.pause_rate == pytest.approx(400 / 50)  # measured: 400 pauses in 50 worker-hours
    read = advice.inputs["pauses_read"]
    assert read["echo"] == f"{measured.echo()}; 400 in 50 worker-hours"
    assert read["echo"].startswith("read 400 pauses from gc.csv, column pause_ms (unit ms")
    # the answer follows the measured tail: GC pauses of tens of ms lapse no 3 s lease, so the
    # heartbeat delays decide, and the sentence says so and names the measured pauses when they do
    assert not advice.rests_on().startswith("rests on the measured pauses")
    long = write(tmp_path, gc_log(median_ms=2000.0, seed=2), "long.csv")
    slow = advise("sample", arrival_rate=1.0, pauses=long, pause_unit="ms", verify=False)
    assert slow.rests_on().startswith("rests on the measured pauses (2 per worker-hour, median ")
    assert slow.ttl > advice.ttl  # the answer moves with the measured pauses
    text = str(slow)
    assert "  assumptions: pauses: 2 stop-the-world pauses per worker-hour (median " in text
    assert f"{slow.inputs['pauses_read']['echo']}" in slow.save_report(
        tmp_path / "slow.html"
    ).read_text(encoding="utf-8")


def test_the_command_line_takes_a_pauses_file(tmp_path, capsys):
    path = write(tmp_path, "at,pause_ms\n" + "".join(f"{i}.5,{40 + i % 7}\n" for i in range(60)))
    argv = ["advise", "sample", "--arrival-rate", "1", "--no-verify", "--pauses", str(path)]
    assert main([*argv, "--pause-column", "pause_ms", "--pause-unit", "ms"]) == 0
    out = capsys.readouterr().out
    assert "A: TTL " in out.splitlines()[0] and "pauses: 2 stop-the-world pauses" in out
    assert main([*argv, "--pause-column", "pause_ms", "--pause-hours", "10"]) == 0
    out = capsys.readouterr()
    # read as seconds, pauses of 40-46 "s": the column's name says ms, in one warning line
    assert out.err.count("warning: ") == 1 and "use unit ms" in out.err
    assert "pauses: 6 stop-the-world pauses per worker-hour" in out.out


@pytest.mark.parametrize(
    "text, column, message",
    [
        ("pause_ms\n", None, "column 'pause_ms' has no pauses"),
        ("", None, "empty file, expected a header row with a pause column"),
        (
            "id,pause_ms\n1,5\n2,7\n",
            None,
            "columns id, pause_ms could all be pauses; name one (--pause-column / pause_column=)",
        ),
        (
            "seq\n1\n2\n3\n4\n5\n",
            None,
            "column 'seq' holds strictly increasing whole numbers "
            "(1, 2, ... 5): that looks like an id, not pauses; name the pauses column "
            "(--pause-column / pause_column=)",
        ),
        ("pause_ms\n5\nslow\n", None, ":3: pause_ms='slow' is not a number of seconds"),
        ("pause_ms\n5\n-2\n", None, ":3: pause_ms=-2 must be a finite duration >= 0 seconds"),
        ("pause\n0\n0\n", None, "pauses: every value is 0; expected pause durations in seconds"),
        ("a;b\n1,5;2\n1.5;3\n", "a", "column 'a' mixes '.' ('1.5') and ',' ('1,5')"),
        ("pause_ms\n5\n", "gc", "no column 'gc'; columns are pause_ms"),
    ],
)
def test_a_bad_pauses_file_is_the_durations_files_one_line_error(tmp_path, text, column, message):
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as caught:
        advise("sample", pauses=path, pause_column=column, verify=False)
    said = str(caught.value)
    assert message in said and "\n" not in said, said
    argv = ["advise", "sample", "--no-verify", "--pauses", str(path)]
    assert main(argv + (["--pause-column", column] if column else [])) == 2


def test_a_pauses_file_that_is_not_utf8_or_not_a_file_is_refused(tmp_path, capsys):
    latin = tmp_path / "latin.csv"
    latin.write_bytes("pause\n1,5\u00e9\n".encode("latin-1"))
    assert main(["advise", "sample", "--no-verify", "--pauses", str(latin)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not UTF-8 text" in err[0]
    assert main(["advise", "sample", "--no-verify", "--pauses", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(tmp_path) in err[0]


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (
            {"pause_duration": Dist.lognormal(0.5, 5.0)},
            "pauses: give measured pauses or pause_duration, not both",
        ),
        ({"pause_rate": 3, "pause_hours": 10}, "pause_hours: give it (the rate is then measured)"),
    ],
)
def test_measured_and_assumed_pauses_are_one_or_the_other(tmp_path, kwargs, message):
    path = write(tmp_path, gc_log())
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        advise("sample", pauses=path, pause_unit="ms", verify=False, **kwargs)
    with pytest.raises(ConfigError, match="pause_hours: needs pauses"):
        advise("sample", pause_hours=10, verify=False)
    with pytest.raises(ConfigError, match="pause_column: applies to a file of measured pauses"):
        advise("sample", pause_column="x", verify=False)


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--pause-p99", "3"], "--pauses: give it or --pause-p99, not both"),
        (["--pause-hours", "5", "--pause-rate", "2"], "--pause-hours: give it or --pause-rate"),
    ],
)
def test_the_command_line_refuses_a_measured_and_an_assumed_pause_tail(
    tmp_path, capsys, extra, message
):
    path = write(tmp_path, gc_log())
    assert main(["advise", "sample", "--pauses", str(path), *extra]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: {message}"), err
    assert main(["advise", "sample", "--pause-hours", "5"]) == 2
    assert "--pause-hours: applies to a file of measured pauses" in capsys.readouterr().err


# ---- item 3: the unit mistake -------------------------------------------------------------------


def test_milliseconds_read_as_seconds_end_in_one_error_naming_the_unit(bimodal_csv, capsys):
    """The issue's case: the bimodal export's duration_ms read as seconds at 0.3 jobs/s. One
    error line, no warnings before it, naming --unit ms and what the workers carry then."""
    argv = ["advise", str(bimodal_csv), "--column", "duration_ms", "--arrival-rate", "0.3"]
    assert main(argv) == 2
    printed = capsys.readouterr()
    err = printed.err.strip().splitlines()
    assert printed.out == "" and len(err) == 1, err
    assert err[0].startswith(
        "error: unit: column 'duration_ms' is named like milliseconds and its median read as "
        "seconds is 2,105 s: if these are milliseconds, use unit ms (median 2.1 s); read as "
        "seconds, 4 workers carry 0.000104 jobs/s against the 0.3 given, while read as "
        "milliseconds they carry "
    ), err[0]
    assert err[0].endswith("% busy): give --unit ms (unit='ms')")
    # and that is true: in ms the same command runs
    assert main([*argv, "--unit", "ms", "--no-verify"]) == 0
    assert "50% of the" in capsys.readouterr().out


def test_the_unit_error_says_when_even_the_right_unit_needs_more_workers(bimodal_csv):
    with pytest.raises(ConfigError) as caught, warnings.catch_warnings():
        warnings.simplefilter("error", LeaseWarning)  # no warning before the error
        advise(bimodal_csv, column="duration_ms", arrival_rate=30, verify=False)
    said = str(caught.value)
    assert said.startswith("unit: column 'duration_ms' is named like milliseconds")
    assert "(still short: add --workers " in said and said.endswith("give --unit ms (unit='ms')")


def test_an_overload_in_the_right_unit_is_still_the_workers_error(bimodal_csv):
    """Read as ms (nothing says otherwise), 30 jobs/s is simply too much for 4 workers."""
    with pytest.raises(ConfigError) as caught:
        advise(bimodal_csv, column="duration_ms", unit="ms", arrival_rate=30, verify=False)
    assert str(caught.value).startswith("workers: 4 workers carry ")
    scale_only = np.full(300, 1500.0)  # a median of 25 min read as seconds, no column name
    with pytest.raises(ConfigError, match=r"^unit: median 1,500 s read as seconds: .*--unit ms"):
        advise(scale_only, arrival_rate=1, verify=False)
