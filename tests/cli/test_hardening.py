"""Issue #13, case by case: each bad input a hostile user tried gets one clear line (exit 2 /
ConfigError naming the field), no password is ever printed and no user file is overwritten."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

import sim
import sim.cli.main as cli
from sim.cli.main import main
from sim.db.base import EPOCH, to_timestamp
from sim.db.errors import ServerUnavailableError
from sim.db.server import redact_dsn, scrub, secrets
from sim.errors import ConfigError
from sim.scenario import limits
from sim.scenario.dists import Dist
from sim.scenario.durations import read_durations
from sim.scenario.settings import (
    Faults,
    Policy,
    Scenario,
    ScriptedCrash,
    Workload,
    load,
    preset,
    validate,
)
from sim.support.interrupts import Terminated

SMALL = ["--set", "workload.jobs=20", "--set", "horizon=60"]


def one_error_line(capsys) -> str:
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), captured.err
    assert "Traceback" not in captured.err + captured.out
    return lines[0]


# ---- 1. a malformed DSN never shows its password -------------------------------------------------

MALFORMED = [
    "postgresql://bob:sekret123@[::1/db",  # the case: the redaction itself raised
    "postgresql://bob:sekret123@127.0.0.1:1/db?password=sekret123&foo",
    "postgresql://bob:sek%zzret123@127.0.0.1/db",
    "postgresql://bob:sekret123@127.0.0.1:notaport/db",
    "host=127.0.0.1 password=sekret123 port",
    "host=127.0.0.1 password='sekret123",
    "host=127.0.0.1 port=1 password=sekret123 nosuchoption=1",
]


@pytest.mark.parametrize("dsn", MALFORMED)
def test_malformed_dsn_is_one_line_without_the_password(capsys, tmp_path, dsn):
    out = tmp_path / "out"
    assert (
        main(["run", "baseline", *SMALL, "--backend", "postgres", "--dsn", dsn, "--out", str(out)])
        == 2
    )
    line = one_error_line(capsys)
    assert "DSN" in line and "sekret123" not in line and "zzret" not in line
    assert not out.exists()


@pytest.mark.parametrize("dsn", MALFORMED)
def test_malformed_dsn_through_the_api_and_redaction(dsn):
    with pytest.raises(ServerUnavailableError) as info:
        sim.run("baseline", backend="postgres", dsn=dsn, **{"workload.jobs": 5})
    assert "sekret123" not in str(info.value) and "zzret" not in str(info.value)
    assert "sekret" not in redact_dsn(dsn)


def test_redaction_of_malformed_uris():
    assert redact_dsn("postgresql://bob:sekret123@[::1/db") == "postgresql://bob@[::1/db"
    assert (
        redact_dsn("postgresql://bob:pw@[::1/db?password=pw2&x=1") == "postgresql://bob@[::1/db?x=1"
    )
    assert secrets("postgresql://bob:s%40cret@h/db") == ["s%40cret", "s@cret", "cret"]
    assert (
        scrub("tried s@cret and s%40cret", "postgresql://bob:s%40cret@h/db") == "tried *** and ***"
    )
    assert secrets(None) == [] and scrub("x", None) == "x"


def test_password_in_the_environment_is_scrubbed_from_errors(capsys, monkeypatch):
    monkeypatch.setenv("LEASELAB_DSN", "postgresql://bob:envsekret99@[::1/db")
    assert main(["run", "baseline", *SMALL, "--backend", "postgres"]) == 2
    assert "envsekret99" not in one_error_line(capsys)


# ---- 2. non-finite, absurd and huge values -------------------------------------------------------


@pytest.mark.parametrize(
    ("sets", "field"),
    [
        (["policy.lease_ttl=inf"], "policy.lease_ttl: must be a finite number, got inf"),
        (["policy.poll_interval=inf"], "policy.poll_interval: must be a finite number"),
        (["policy.watcher_interval=inf"], "policy.watcher_interval: must be a finite number"),
        (
            ["policy.heartbeat_interval=nan"],
            "policy.heartbeat_interval: must be a finite number, got nan",
        ),
        (
            ["policy.clock=worker", "faults.clock_skew=inf"],
            "faults.clock_skew: must be a finite number",
        ),
        (["faults.crash_rate=inf"], "faults.crash_rate: must be a finite number"),
        (["faults.pause_rate=inf"], "faults.pause_rate: must be a finite number"),
        (["faults.partition_rate=inf"], "faults.partition_rate: must be a finite number"),
        (["horizon=1e300"], "horizon: 1e+300 s is too long: time values are at most 1e+09 s"),
        (["policy.lease_ttl=1e12"], "policy.lease_ttl: 1e+12 s is too long"),
        (["faults.clock_skew=2e9"], "faults.clock_skew: 2e+09 s is too long"),
        (["workload.processing=1e10"], "workload.processing.value: 1e+10 s is too long"),
        (
            ["workload.processing={kind='lognormal', median=1, p99=inf}"],
            "workload.processing.p99: must be a finite",
        ),
        ([f"workload.jobs={10**9}"], "workload.jobs: must be from 0 to 2,000,000"),
        ([f"policy.workers={10**7}"], "policy.workers: must be from 1 to 10,000"),
        (
            ["faults.crash_rate=1e9"],
            "faults.crash_rate: this run would schedule about 2.7e+09 simulated events",
        ),
        (["faults.pause_rate=1e12"], "faults.pause_rate"),
        (["policy.poll_interval=1e-9"], "policy.poll_interval: this run would schedule"),
        (["horizon=1e9"], "horizon 1e+09 s x 4 policy.workers / policy.poll_interval 1 s"),
        (
            [
                "workload.jobs=2000000",
                "workload.duplicate_delivery=1",
                "policy.poll_interval=0.001",
            ],
            "workload.jobs: this run would schedule about 5e+07 simulated events, over the limit "
            "of 5e+07 (largest part: workload.jobs 2000000 x 12 events per job = 4.8e+07); lower "
            "workload.jobs",
        ),
    ],
)
def test_absurd_values_are_refused_before_running(capsys, sets, field):
    argv = ["run", "baseline"]
    for item in sets:
        argv += ["--set", item]
    assert main(argv) == 2
    assert field in one_error_line(capsys)


@pytest.mark.parametrize("backend", ["memory", "postgres"])
def test_too_long_ttl_is_refused_the_same_way_on_both_backends(capsys, backend):
    """Validation happens at scenario load, so no backend ever sees a value it cannot store."""
    assert main(["run", "baseline", "--backend", backend, "--set", "policy.lease_ttl=1e12"]) == 2
    assert one_error_line(capsys) == (
        "error: policy.lease_ttl: 1e+12 s is too long: time values are at most "
        "1e+09 s (about 31 years), so that every timestamp fits a timestamptz"
    )


def test_the_time_limit_leaves_room_for_every_timestamp_a_run_binds():
    # lease_until = now + TTL with now <= horizon, a worker clock skewed by 60 standard deviations
    latest = 2 * limits.MAX_SECONDS + 60 * limits.MAX_SECONDS
    assert to_timestamp(latest) < datetime.max.replace(tzinfo=UTC)
    assert to_timestamp(-60 * limits.MAX_SECONDS) > datetime.min.replace(tzinfo=UTC)
    assert EPOCH.year == 2026


def _at_the_limits() -> Scenario:
    """Every time value at its maximum, and a run short enough for a test."""
    big = limits.MAX_SECONDS
    return preset("baseline").with_overrides(
        {
            "horizon": big,
            "workload.jobs": 2,
            "workload.processing": 1e6,
            "policy.workers": 1,
            "policy.poll_interval": big / 100,
            "policy.lease_ttl": big,
            "policy.heartbeat": False,
            "policy.watcher_interval": big / 10,
            "policy.clock": "worker",
            "faults.clock_skew": big,
        }
    )


def test_a_scenario_at_the_limits_runs_on_memory():
    run = sim.run(_at_the_limits())
    assert run.summary["completed"] == 2 and run.summary["double_claims"] == 0


@pytest.mark.postgres
def test_a_scenario_at_the_limits_runs_on_postgres_like_on_memory(pg_dsn):
    memory = sim.run(_at_the_limits())
    postgres = sim.run(_at_the_limits(), backend="postgres", dsn=pg_dsn)
    pd.testing.assert_frame_equal(memory.events, postgres.events)
    assert memory.tables == postgres.tables
    skew = memory.worker_skews["w0"]  # about -0.68e9 s: the worker's clock reads 2004
    leases = memory.leases
    assert (leases["until"] - leases["start"] - skew).tolist() == pytest.approx(
        [limits.MAX_SECONDS] * 2
    )
    assert to_timestamp(leases["start"].min() + skew).year == 2004


def test_limits_are_a_one_line_estimate_naming_the_largest_part():
    base = preset("baseline")
    terms = limits.estimate_events(base.with_overrides({"policy.poll_interval": 0.01}))
    assert [t[0] for t in terms][:2] == ["policy.poll_interval", "workload.jobs"]
    assert terms[0][2] == base.horizon * base.policy.workers / 0.01
    assert terms[1][2] == base.workload.jobs * limits.EVENTS_PER_JOB
    assert limits.size_problem(preset("baseline")) is None


# ---- 3. files that are not UTF-8, CSV values that overflow -------------------------------------


def test_non_utf8_toml_is_one_line(capsys, tmp_path):
    path = tmp_path / "latin1.toml"
    path.write_bytes('name = "caf\u00e9"\n'.encode("latin-1"))
    assert main(["run", str(path)]) == 2
    assert (
        one_error_line(capsys)
        == f"error: {path}:1: not UTF-8 text (byte 0xe9); save the TOML file as UTF-8"
    )
    with pytest.raises(ConfigError, match="not UTF-8"):
        load(path)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"seconds\n1.5\n\xff\xfe\n", ":3: not UTF-8 text (byte 0xff); save the CSV file as UTF-8"),
        (b"seconds\n1e308\n", ":2: seconds=1e308 is too long: durations are at most 1e+09 s"),
        (b"seconds\n" + b"9" * 400 + b"\n", ":2: seconds=" + "9" * 37 + "... is too long"),
        (
            b'seconds\n1\n"' + b"9" * 200_000 + b'"\n',
            ":3: not a readable CSV file (field larger than field limit",
        ),
    ],
)
def test_bad_csv_bytes_are_one_line(capsys, tmp_path, content, message):
    path = tmp_path / "d.csv"
    path.write_bytes(content)
    with pytest.raises(ConfigError) as info:
        read_durations(path)
    assert str(info.value).startswith(f"{path}{message}")
    assert main(["advise", str(path), "--no-verify"]) == 2
    assert one_error_line(capsys).startswith(f"error: {path}{message}")


def test_csv_with_a_byte_order_mark_reads_its_header(tmp_path):
    path = tmp_path / "excel.csv"
    path.write_bytes(b"\xef\xbb\xbfseconds\n1.5\n")
    assert read_durations(path, "seconds").seconds.tolist() == [1.5]


def test_advisor_arrays_too_long_are_one_line():
    with pytest.raises(ConfigError, match=r"^durations\[1\]: 1e\+308 s is too long"):
        sim.advise([1.0, 1e308], verify=False)


# ---- 4. demo refuses a non-empty --out (see test_cli.test_demo_writes_figures_and_summary) -------


def test_demo_refuses_a_non_empty_out_without_force(capsys, tmp_path):
    (tmp_path / "summary.csv").write_text("mine")
    assert main(["demo", "--out", str(tmp_path)]) == 2
    assert "pass --force" in one_error_line(capsys)
    assert (tmp_path / "summary.csv").read_text() == "mine"


# ---- 5. --keep-schema says which schema it kept --------------------------------------------------


def test_memory_runs_write_kept_schema_null(capsys, tmp_path):
    assert main(["run", "baseline", *SMALL, "--out", str(tmp_path / "o")]) == 0
    assert json.loads((tmp_path / "o" / "summary.json").read_text())["kept_schema"] is None
    assert "kept schema" not in capsys.readouterr().out


@pytest.mark.postgres
def test_keep_schema_prints_and_records_the_schema(capsys, tmp_path, pg_dsn):
    import psycopg

    out = tmp_path / "o"
    assert (
        main(
            [
                "run",
                "baseline",
                *SMALL,
                "--backend",
                "postgres",
                "--dsn",
                pg_dsn,
                "--keep-schema",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out
    schema = json.loads((out / "summary.json").read_text())["kept_schema"]
    assert schema and schema.startswith("leaselab_")
    assert (
        f"kept schema {schema} at host " in printed and f"DROP SCHEMA {schema} CASCADE" in printed
    )
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        jobs = conn.execute(f"SELECT count(*) FROM {schema}.payment_jobs").fetchone()[0]  # noqa: S608
        conn.execute(f"DROP SCHEMA {schema} CASCADE")
    assert jobs == 20


# ---- 6. the Python API: wrong types name the field; numpy scalars work ---------------------------


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: sim.run("baseline", seed="x"), r"^seed: expected a whole number, got str 'x'$"),
        (lambda: sim.run("baseline", seed=1.5), r"^seed: expected a whole number, got float 1\.5$"),
        (lambda: sim.run("baseline", seed=True), r"^seed: expected a whole number, got bool True$"),
        (
            lambda: sim.run(None),
            r"^scenario: expected a Scenario, a preset name or a TOML path, got NoneType None$",
        ),
        (lambda: sim.run(42), r"^scenario: expected a Scenario"),
        (
            lambda: sim.run("baseline", backend=3),
            r"^backend: expected 'memory', 'postgres' or a Backend",
        ),
        (lambda: sim.run("baseline", keep_schema="yes"), r"^keep_schema: expected True or False"),
        (
            lambda: sim.check(None),
            r"^run: expected the result of sim\.run\(\.\.\.\), got NoneType None$",
        ),
        (
            lambda: sim.Policy(workers="3"),
            r"^policy\.workers: expected a whole number, got str '3'$",
        ),
        (
            lambda: sim.Policy(lease_ttl=float("nan")),
            r"^policy\.lease_ttl: must be a finite number, got nan$",
        ),
        (
            lambda: sim.Workload(processing="slow"),
            r"^workload\.processing: expected a number of seconds or a table",
        ),
        (
            lambda: sim.Faults(crashes=[{"at": "soon"}]),
            r"^faults\.crashes\[0\]\.at: expected a number",
        ),
        (lambda: sim.Faults(crashes=5), r"^faults\.crashes: expected a list"),
        (lambda: Scenario(seed=2.0), r"^seed: expected a whole number, got float 2\.0$"),
        (lambda: Scenario(policy="fast"), r"^policy: expected a table, got str 'fast'$"),
        (
            lambda: Scenario(horizon=10**400),
            r"^horizon: an integer of 1329 bits is too large for a number$",
        ),
        (lambda: validate(None), r"^scenario: expected a Scenario"),
        (lambda: sim.sweep(None), r"^scenario: expected a Scenario"),
        (
            lambda: sim.sweep("baseline", {"policy.workers": ["two"]}),
            r"^policy\.workers: expected a whole number",
        ),
        (
            lambda: sim.sweep("baseline", executor=5),
            r"^executor: 5 is not 'serial' or a concurrent\.futures\.Executor$",
        ),
        (
            lambda: sim.sweep("baseline", metrics=[3]),
            r"^metrics: expected summary metric names, got \[3\]$",
        ),
        (
            lambda: sim.sweep("baseline", max_workers="2"),
            r"^max_workers: must be at least 1, got '2'$",
        ),
        (lambda: sim.review(None), r"^scenario: expected a Scenario"),
        (
            lambda: sim.review("baseline", seeds=[1.5]),
            r"^seeds\[0\]: expected a whole number >= 0, got float 1\.5$",
        ),
        (lambda: sim.review("baseline", seeds=5), r"^seeds: expected a list of whole numbers"),
        (lambda: sim.advise(None), r"^durations: expected numbers of seconds"),
        (
            lambda: sim.review("baseline", seeds=itertools.count()),
            r"^seeds: more than 100,000, the limit of runs",
        ),
        (
            lambda: sim.sweep("baseline", {"policy.lease_ttl": [10, 20]}, replications=10**9),
            r"^replications: 2 grid points x 1,000,000,000 replications = 2,000,000,000 runs, "
            r"over the limit of 100,000",
        ),
    ],
)
def test_api_type_errors_are_config_errors_naming_the_field(call, message):
    with pytest.raises(ConfigError, match=message) as info:
        call()
    assert "\n" not in str(info.value)


def test_numpy_scalars_are_accepted_wherever_python_numbers_are():
    r = sim.run(
        "baseline",
        seed=np.int64(3),
        **{
            "policy.workers": np.int64(2),
            "policy.lease_ttl": np.float32(20),
            "workload.jobs": np.uint16(10),
            "horizon": np.float64(60),
            "policy.heartbeat": np.bool_(True),
        },
    )
    assert r.scenario.seed == 3 and type(r.scenario.seed) is int
    assert r.scenario.policy.workers == 2 and type(r.scenario.policy.workers) is int
    assert r.scenario.policy.lease_ttl == 20.0 and type(r.scenario.policy.lease_ttl) is float
    assert r.scenario.policy.heartbeat is True
    policy = Policy(workers=np.int32(3), poll_interval=np.float64(0.5))
    assert policy == Policy(workers=3, poll_interval=0.5)
    crash = ScriptedCrash(at=np.float16(2.0), worker=np.int8(0))
    assert Faults(crashes=(crash,)).crashes[0] == ScriptedCrash(at=2.0, worker=0)
    assert Workload(processing=np.float64(3)).processing == Dist.constant(3.0)
    assert sim.review(
        "baseline", seeds=np.arange(1, 2), variants=False, **{"workload.jobs": 5}
    ).seeds == (1,)


# ---- 7. a TOML file's {csv = ...} is relative to the TOML file -----------------------------------


def test_csv_distribution_is_relative_to_the_toml_file(capsys, tmp_path, monkeypatch):
    folder = tmp_path / "queue"
    folder.mkdir()
    (folder / "d.csv").write_text("seconds\n1.5\n2.5\n")
    (folder / "mine.toml").write_text('[workload]\njobs = 4\nprocessing = { csv = "d.csv" }\n')
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert load(folder / "mine.toml").workload.processing == Dist.empirical([1.5, 2.5])
    assert main(["show", str(folder / "mine.toml")]) == 0
    assert "samples = [\n    1.5,\n    2.5,\n]" in capsys.readouterr().out
    # on the command line, a relative path is the user's: from the current directory
    (elsewhere / "d.csv").write_text("seconds\n7\n")
    assert (
        main(["show", str(folder / "mine.toml"), "--set", 'workload.processing={csv="d.csv"}']) == 0
    )
    assert "samples = [\n    7.0,\n]" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--workers", "100000"], "error: --workers 100000: must be at most 10,000"),
        (["--pause-p99", "1e300"], "error: --pause-p99 1e+300: must be at most 1e+09 s"),
        (["--poll-interval", "2e9"], "error: --poll-interval 2e+09: must be at most 1e+09 s"),
    ],
)
def test_advise_flags_beyond_the_limits_name_the_flag(capsys, argv, expected):
    assert main(["advise", "sample", "--no-verify", *argv]) == 2
    assert one_error_line(capsys) == expected


# ---- the same, as a real process -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (
            [
                "run",
                "baseline",
                "--backend",
                "postgres",
                "--dsn",
                "postgresql://bob:sekret123@[::1/db",
            ],
            "invalid DSN",
        ),
        (
            ["run", "baseline", "--set", "faults.crash_rate=inf"],
            "faults.crash_rate: must be a finite number",
        ),
        (["run", "baseline", "--set", "horizon=1e300"], "horizon: 1e+300 s is too long"),
    ],
)
def test_a_real_process_exits_2_with_one_line(argv, expected):
    done = subprocess.run(
        [sys.executable, "-m", "sim", *argv],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert done.returncode == 2 and done.stdout == ""
    assert (
        done.stderr.count("\n") == 1
        and done.stderr.startswith("error: ")
        and expected in done.stderr
    )
    assert "sekret123" not in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("interrupt", "code", "last"),
    [(Terminated("terminated"), 143, "terminated"), (KeyboardInterrupt(), 130, "interrupted")],
)
def test_a_cleanup_that_fails_after_an_interrupt_still_ends_as_the_interrupt(
    monkeypatch, capsys, interrupt, code, last
):
    def command(args):
        try:
            raise interrupt
        finally:
            raise ServerUnavailableError("PostgreSQL at 127.0.0.1:5432: the connection is closed")

    parser = SimpleNamespace(parse_args=lambda argv: SimpleNamespace(command=command))
    monkeypatch.setattr(cli, "_build_parser", lambda: parser)
    assert main(["run", "baseline"]) == code
    assert capsys.readouterr().err.splitlines() == [
        "warning: PostgreSQL at 127.0.0.1:5432: the connection is closed",
        last,
    ]
