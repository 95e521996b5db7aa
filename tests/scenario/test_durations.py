"""sim.scenario.durations: a user's CSV becomes seconds only when column, unit, delimiter and
decimal mark are unambiguous; refusals are one line; what was read is echoed (CLI, API and the
advisor)."""

from __future__ import annotations

import re

import numpy as np
import pytest

import sim
from sim.advice.advisor import advise, read
from sim.cli.main import main
from sim.errors import ConfigError
from sim.scenario.durations import from_values, read_durations
from sim.scenario.settings import LeaseWarning


def write(tmp_path, text: str | bytes, name: str = "export.csv"):
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def ms_export(n: int = 200) -> str:
    """An export with a job id and durations in milliseconds (median about 1256 ms)."""
    rng = np.random.default_rng(7)
    ms = np.round(rng.lognormal(np.log(1256.0), 0.8, n))
    return "job_id,duration_ms\n" + "".join(f"{i},{v:.0f}\n" for i, v in enumerate(ms))


def test_an_id_column_is_never_taken_for_durations(tmp_path):
    path = write(tmp_path, ms_export())
    d = read_durations(path)  # job_id is an id, so duration_ms is the only candidate
    assert d.column == "duration_ms" and d.unit == "s"
    median = float(np.median(d.seconds))
    assert 1000 < median < 1600
    # the column's name and the median's scale both say milliseconds: said once, not twice
    assert d.warnings == (
        f"column 'duration_ms' is named like milliseconds and its median read as seconds is "
        f"{median:,.0f} s: if these are milliseconds, use unit ms (median {median / 1000:.3g} s)",
    )
    assert d.suspected_unit == "ms"
    scale_only = from_values(d.seconds)  # no column name: the scale alone says it
    assert scale_only.warnings == (
        f"median {median:,.0f} s read as seconds: if these are milliseconds, use unit ms "
        f"(median {median / 1000:.3g} s)",
    )
    in_seconds = from_values(d.seconds / 1000)  # the same values in the unit they look like
    assert in_seconds.warnings == () and in_seconds.suspected_unit is None
    with pytest.raises(ConfigError) as caught:
        read_durations(path, "job_id")
    assert str(caught.value) == (
        f"{path}: column 'job_id' holds strictly increasing whole numbers (0, 1, ... 199): "
        "that looks like an id, not durations; name the durations column (--column / column=)"
    )


def test_milliseconds_read_as_milliseconds_and_echoed(tmp_path):
    path = write(tmp_path, ms_export())
    d = read_durations(path, "duration_ms", unit="ms")
    assert d.warnings == ()
    assert np.median(d.seconds) == pytest.approx(np.median(read_durations(path).seconds) / 1000)
    assert re.fullmatch(
        r"read 200 durations from export\.csv, column duration_ms \(unit ms, delimiter ',', "
        r"decimal '\.'\): median 1\.\d+ s, p99 [\d.]+ s, max [\d.]+ s",
        d.echo(),
    ), d.echo()


def test_the_column_must_be_named_when_several_could_be_durations(tmp_path):
    path = write(
        tmp_path, "queue_seconds,run_seconds,method\n0.5,1.5,card\n0.2,2.5,sepa\n0.9,0.5,card\n"
    )
    with pytest.raises(ConfigError) as caught:
        read_durations(path)
    assert str(caught.value) == (
        f"{path}: columns queue_seconds, run_seconds could all be durations; name one "
        "(--column / column=)"
    )
    assert read_durations(path, "run_seconds").seconds.tolist() == [1.5, 2.5, 0.5]


def test_semicolons_and_decimal_commas_are_detected(tmp_path):
    path = write(tmp_path, "seconds;method\n1,5;card\n2,25;sepa\n0,75;card\n")
    d = read_durations(path)
    assert d.seconds.tolist() == [1.5, 2.25, 0.75] and (d.delimiter, d.decimal) == (";", ",")
    assert "delimiter ';', decimal ','" in d.echo()
    tab = write(tmp_path, "id\tseconds\n1\t1.5\n2\t2.5\n3\t0.5\n4\t3.0\n5\t1.0\n", "tab.csv")
    assert read_durations(tab).seconds.tolist() == [1.5, 2.5, 0.5, 3.0, 1.0]
    one = write(tmp_path, "seconds\n1,5\n2,5\n", "one.csv")  # one column with decimal commas
    assert read_durations(one).seconds.tolist() == [1.5, 2.5]


@pytest.mark.parametrize(
    "text, message",
    [
        (
            "seconds,method\n1,5,card\n2,5,sepa\n",
            "the rows do not all have as many fields as the header",
        ),
        (
            "seconds;method\n1,5;card\n2.5;sepa\n",
            "column 'seconds' mixes '.' ('2.5') and ',' ('1,5') as decimal marks",
        ),
        (
            "a;b|c\n1;2|3\n4;5|6\n",
            "cannot tell the delimiter: ';' and '|' both split every line evenly",
        ),
        (
            "method,country\ncard,FR\nsepa,DE\n",
            "no column holds only numbers; columns are method, country",
        ),
    ],
)
def test_ambiguous_files_are_refused_with_one_line(tmp_path, text, message):
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as caught:
        read_durations(path)
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_a_byte_order_mark_is_skipped_and_other_encodings_refused(tmp_path):
    path = write(tmp_path, "\ufeffseconds,method\n1.5,card\n2.5,sepa\n".encode())
    assert read_durations(path, "seconds").seconds.tolist() == [1.5, 2.5]
    assert read_durations(path).column == "seconds"
    latin = write(tmp_path, "seconds,méthode\n1.5,carte\n".encode("latin-1"), "latin.csv")
    with pytest.raises(ConfigError) as caught:
        read_durations(latin)
    assert str(caught.value) == f"{latin}:1: not UTF-8 text (byte 0xe9); save the CSV file as UTF-8"


def test_units_apply_to_arrays_too():
    d = from_values([1500.0, 2500.0, 900.0], unit="ms")
    assert d.seconds.tolist() == [1.5, 2.5, 0.9] and d.warnings == ()
    assert (
        "use unit s" in from_values([0.5, 1.5, 2.0], unit="ms").warnings[0]
    )  # 1 ms jobs? probably seconds
    with pytest.raises(ConfigError) as caught:
        from_values([1.0], unit="sec")
    assert (
        str(caught.value)
        == "unit: 'sec' is not one of s, ms, us (seconds, milliseconds, microseconds)"
    )
    assert read([1500.0, 2500.0], unit="ms").seconds.tolist() == [1.5, 2.5]


@pytest.mark.slow  # advice on jobs of 20 minutes: make test only
def test_the_advice_echoes_what_it_read_and_warns(tmp_path):
    path = write(tmp_path, ms_export())
    with pytest.warns(LeaseWarning) as caught:
        advice = advise(path, verify=False)
    said = [str(w.message) for w in caught]
    assert len(said) == 1 and said[0].startswith("column 'duration_ms' is named like milliseconds")
    assert "if these are milliseconds, use unit ms" in said[0]
    text = str(advice)
    assert "  durations: read 200 durations from export.csv, column duration_ms (unit s" in text
    assert f"  warning: {said[0]}" in text
    right = advise(path, column="duration_ms", unit="ms", verify=False)
    assert "warning" not in str(right) and right.inputs["durations_read"]["unit"] == "ms"
    assert right.inputs["durations_median"] == pytest.approx(
        advice.inputs["durations_median"] / 1000
    )


@pytest.mark.slow  # advice on jobs of 20 minutes: make test only
def test_cli_unit_and_warning_lines(tmp_path, capsys):
    path = write(tmp_path, ms_export())
    assert main(["advise", str(path), "--no-verify"]) == 0
    printed = capsys.readouterr()
    warned = [line for line in printed.err.splitlines() if line.startswith("warning: ")]
    assert len(warned) == 1 and "use unit ms" in warned[0]
    assert f"  {warned[0]}" in printed.out
    assert (
        main(["advise", str(path), "--no-verify", "--unit", "ms", "--column", "duration_ms"]) == 0
    )
    printed = capsys.readouterr()
    assert "warning" not in printed.err + printed.out and "(unit ms, delimiter ','" in printed.out
    assert main(["advise", str(path), "--unit", "minutes"]) == 2
    assert "argument --unit: invalid choice: 'minutes'" in capsys.readouterr().err
    assert main(["advise", str(path), "--column", "job_id", "--no-verify"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "looks like an id, not durations" in err[0]


def test_a_scenario_distribution_reads_its_csv_the_same_way(tmp_path):
    path = write(tmp_path, ms_export())
    scenario = sim.scenario.settings.from_dict(
        {"workload": {"processing": {"csv": str(path), "column": "duration_ms", "unit": "ms"}}}
    )
    samples = np.asarray(scenario.workload.processing.samples)
    assert scenario.workload.processing.kind == "empirical" and len(samples) == 200
    assert np.median(samples) == pytest.approx(
        np.median(read_durations(path, "duration_ms", "ms").seconds)
    )
    with pytest.warns(
        LeaseWarning
    ) as caught:  # read as seconds: the median and the name both say ms
        sim.scenario.settings.from_dict(
            {"workload": {"processing": {"csv": str(path), "column": "duration_ms"}}}
        )
    said = [str(w.message) for w in caught]
    assert (
        len(said) == 1
        and said[0].startswith("workload.processing: column 'duration_ms' is named like ")
        and "use unit ms" in said[0]
    )
    with pytest.raises(ConfigError, match="looks like an id"):
        sim.scenario.settings.from_dict(
            {"workload": {"processing": {"csv": str(path), "column": "job_id"}}}
        )
