"""Issue 27, items 5-11, case by case: passwords in every piece, file text that would mislead,
unbounded reads, live limits named up front, --help everywhere, limits named instead of a
RecursionError or an OverflowError, and the last tracebacks as one line or a ConfigError."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import sim
from sim.cli.main import _build_parser, main
from sim.db.queue.directory import QueueDefinitionError, load_queue
from sim.db.server import redact_dsn, scrub
from sim.errors import ConfigError
from sim.scenario import limits
from sim.support.input_files import read_capped
from tests.cli.test_hardening import one_error_line

ROOT = Path(__file__).resolve().parents[2]
DEEP = "[" * 500 + "]" * 500
SHALLOW_BUT_TOO_DEEP = "[" * (limits.MAX_TOML_DEPTH + 1) + "]" * (limits.MAX_TOML_DEPTH + 1)
HEARTBEAT = (
    "-- name: heartbeat\n-- renew\n-- params: id int, owner text, attempt int, lease_until time\n"
    "UPDATE payment_jobs SET lease_until = %(lease_until)s WHERE id = %(id)s "
    "AND lease_owner = %(owner)s AND attempts = %(attempt)s RETURNING id, lease_until\n"
)


# ---- 5. passwords --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("dsn", "pieces"),
    [
        ("postgresql://bob:Se/cret78@127.0.0.1/db", ["Se/cret78", "cret78", "Se"]),
        ("postgresql://bob@corp:pass12word@127.0.0.1:1/db", ["pass12word"]),
        ("postgresql://bob:a@b/c?d=e&f@127.0.0.1:1/db", ["a@b/c?d=e&f", "d=e", "b/c"]),
        ("postgresql://bob:pa:ss:wordy@127.0.0.1:1/db", ["pa:ss:wordy", "wordy"]),
        ("postgresql://bob:x#fragmentpw@127.0.0.1:1/db", ["x#fragmentpw", "fragmentpw"]),
    ],
)
def test_every_piece_of_a_uri_password_is_scrubbed(capsys, dsn, pieces):
    assert main(["run", "baseline", "--backend", "postgres", "--dsn", dsn]) == 2
    line = one_error_line(capsys)
    for piece in pieces:
        assert not re.search(rf"(?<![A-Za-z0-9]){re.escape(piece)}(?![A-Za-z0-9])", line), line
        assert piece not in redact_dsn(dsn)
    assert line.startswith("error: PostgreSQL at ")


def test_short_pieces_are_scrubbed_where_they_stand_alone_only():
    dsn = "postgresql://bob:Se/cret78@h/db"
    assert scrub('port "Se" (Server: Set up)', dsn) == 'port "***" (Server: Set up)'


# ---- 6. file text that would mislead -------------------------------------------------------------


def test_a_byte_order_mark_does_not_hide_the_first_block(tmp_path):
    (tmp_path / "queries.sql").write_bytes(b"\xef\xbb\xbf" + HEARTBEAT.encode())
    q = load_queue(tmp_path)
    assert list(q.overrides) == ["heartbeat"] and q.overrides["heartbeat"].line == 1


@pytest.mark.parametrize("name", ["queries.sql", "schema.sql"])
def test_a_nul_byte_is_refused_naming_its_line(tmp_path, name):
    (tmp_path / "queries.sql").write_text(HEARTBEAT)
    text = (tmp_path / name).read_text() if name == "queries.sql" else "CREATE TABLE x (id int);\n"
    first, rest = text.split("\n", 1)
    (tmp_path / name).write_text(f"{first}\n\0{rest}")  # a NUL at the start of line 2
    with pytest.raises(QueueDefinitionError) as info:
        load_queue(tmp_path)
    assert str(info.value) == (
        f"{tmp_path / name}:2: contains a NUL byte, which PostgreSQL cannot take in a statement; "
        "remove it"
    )


# ---- 7. unbounded reads --------------------------------------------------------------------------


@pytest.fixture
def fifo(tmp_path):
    path = tmp_path / "pipe"
    os.mkfifo(path)
    return path


def test_non_regular_files_are_refused_without_reading(capsys, tmp_path, fifo):
    assert main(["run", str(fifo)]) == 2
    assert one_error_line(capsys) == (
        f"error: {fifo}: is a named pipe (FIFO); the scenario TOML must be a regular file"
    )
    assert main(["advise", "/dev/zero"]) == 2
    assert one_error_line(capsys) == (
        "error: /dev/zero: is a character device; the durations CSV must be a regular file"
    )
    assert main(["run", "baseline", "--set", 'workload.processing={csv="/dev/zero"}']) == 2
    assert "workload.processing.csv: /dev/zero: is a character device" in one_error_line(capsys)
    (tmp_path / "q").mkdir()
    os.mkfifo(tmp_path / "q" / "queries.sql")
    with pytest.raises(QueueDefinitionError, match="is a named pipe"):
        load_queue(tmp_path / "q")


@pytest.mark.parametrize(
    ("what", "limit"),
    [
        ("scenario TOML", limits.MAX_TOML_BYTES),
        ("durations CSV", limits.MAX_CSV_BYTES),
        ("queue SQL", limits.MAX_SQL_BYTES),
    ],
)
def test_files_over_the_cap_are_refused_naming_it(tmp_path, what, limit):
    big = tmp_path / "big"
    with open(big, "wb") as f:
        f.truncate(limit + 1)  # sparse: nothing is written, nothing is read
    with pytest.raises(ConfigError) as info:
        read_capped(big, what, limit)
    assert str(info.value) == f"{big}: larger than {limit >> 20:g} MiB, the limit for a {what} file"
    small = tmp_path / "small"
    small.write_bytes(b"x" * 100)
    assert read_capped(small, what, limit) == b"x" * 100


def test_caps_reach_every_file_input(capsys, tmp_path):
    toml = tmp_path / "big.toml"
    with open(toml, "wb") as f:
        f.truncate(limits.MAX_TOML_BYTES + 1)
    assert main(["run", str(toml)]) == 2
    assert "larger than 1 MiB, the limit for a scenario TOML file" in one_error_line(capsys)
    csv = tmp_path / "big.csv"
    with open(csv, "wb") as f:
        f.truncate(limits.MAX_CSV_BYTES + 1)
    assert main(["advise", str(csv)]) == 2
    assert "larger than 256 MiB, the limit for a durations CSV file" in one_error_line(capsys)
    (tmp_path / "q").mkdir()
    with open(tmp_path / "q" / "queries.sql", "wb") as f:
        f.truncate(limits.MAX_SQL_BYTES + 1)
    with pytest.raises(QueueDefinitionError, match="larger than 1 MiB, the limit for a queue SQL"):
        load_queue(tmp_path / "q")


# ---- 8. live limits up front ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (
            ["--duration", "5", "--compare-seeds", "1000000000"],
            "error: --compare-seeds: must be a whole number from 0 to 1,000, got 1000000000",
        ),
        (
            ["--duration", "5", "--time-scale", "1e300"],
            "error: --time-scale: must be a number of wall seconds per scenario second from "
            "0.0001 to 10000, got 1e+300",
        ),
        (
            ["--duration", "5", "--time-scale", "1e-9"],
            "error: --time-scale: must be a number of wall seconds per scenario second from "
            "0.0001 to 10000, got 1e-09",
        ),
        (
            ["--duration", "1e300"],
            "error: --duration: must be a number of wall seconds > 0 and at most 604800 (a week), "
            "got 1e+300",
        ),
        (
            ["--duration", "600000", "--time-scale", "0.0001"],
            "error: --duration 600000 / --time-scale 0.0001 = 6e+09 scenario seconds; a horizon "
            "is at most 1e+09 s",
        ),
    ],
)
def test_live_fields_are_checked_before_anything_starts(capsys, argv, expected):
    assert main(["live", "crash-recovery", *argv]) == 2
    assert one_error_line(capsys) == expected


def test_the_api_checks_the_same(monkeypatch):
    with pytest.raises(ConfigError, match="--time-scale"):
        sim.live("crash-recovery", duration=5, time_scale=1e300)
    with pytest.raises(ConfigError, match="--duration"):
        sim.live("crash-recovery", duration="5")


@pytest.mark.postgres
def test_live_workers_beyond_the_servers_connections_name_the_setting(capsys, pg_dsn):
    argv = ["live", "crash-recovery", "--duration", "5", "--dsn", pg_dsn]
    assert main([*argv, "--set", "policy.workers=60"]) == 2
    line = one_error_line(capsys)
    assert line.startswith("error: policy.workers = 60: live mode opens about 244 connections")
    assert "(max_connections " in line and "raise max_connections" in line


# ---- 9. --help -----------------------------------------------------------------------------------


def _commands() -> list[str]:
    parser = _build_parser()
    action = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    return sorted(action.choices)


@pytest.mark.parametrize("flag", ["--help", "-h"])
@pytest.mark.parametrize("command", ["", *_commands()])
def test_help_works_for_every_command(capsys, command, flag):
    assert main([*([command] if command else []), flag]) == 0
    captured = capsys.readouterr()
    assert captured.out.startswith("usage: python -m sim") and captured.err == ""


def test_help_in_a_real_process():
    out = subprocess.run(
        [sys.executable, "-m", "sim", "--help"], capture_output=True, text=True, cwd=ROOT
    )
    assert out.returncode == 0 and "95%" in out.stdout and out.stderr == ""


# ---- 10. limits named up front -------------------------------------------------------------------


def test_deep_toml_is_one_line_naming_the_limit(capsys, tmp_path):
    toml = tmp_path / "deep.toml"
    toml.write_text(f"x = {DEEP}\n")
    expected = f"nested more than {limits.MAX_TOML_DEPTH} deep"
    for argv in (
        ["run", str(toml)],
        ["run", "baseline", "--set", f"policy.lease_ttl={DEEP}"],
        ["run", "baseline", "--set", f"policy.lease_ttl={SHALLOW_BUT_TOO_DEEP}"],
        ["sweep", "baseline", "--grid", f"policy.lease_ttl={DEEP}"],
    ):
        assert main(argv) == 2
        assert expected in one_error_line(capsys)
    nested: list = []
    for _ in range(5000):
        nested = [nested]
    with pytest.raises(ConfigError):
        sim.run("baseline", **{"policy.lease_ttl": nested})


def test_a_huge_pause_rate_is_named_as_itself(capsys):
    assert main(["run", "baseline", "--set", "faults.pause_rate=1e9"]) == 2
    assert one_error_line(capsys).startswith("error: faults.pause_rate: this run would schedule")
    assert main(["run", "baseline", "--set", "faults.partition_rate=1e9"]) == 2
    assert one_error_line(capsys).startswith("error: faults.partition_rate: this run would")


def test_an_empty_distribution_table_is_refused(capsys):
    assert main(["run", "baseline", "--set", "workload.processing={}"]) == 2
    assert one_error_line(capsys).startswith("error: workload.processing: an empty table")
    with pytest.raises(ConfigError, match="workload.psp_call: an empty table"):
        sim.run("baseline", **{"workload.psp_call": {}})


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs Linux's /dev/full")
def test_an_io_error_names_the_output(capsys, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "events.csv").symlink_to("/dev/full")
    assert main(["run", "baseline", "--set", "horizon=20", "--out", str(out), "--force"]) == 2
    assert one_error_line(capsys) == f"error: --out {out}: cannot write (No space left on device)"


def test_a_failed_embedded_start_is_one_line(tmp_path):
    pgdata = tmp_path / "pg"
    pgdata.mkdir()
    (pgdata / "PG_VERSION").write_text("18\n")  # initialised in name only: pg_ctl cannot start it
    env = {k: v for k, v in os.environ.items() if k not in ("LEASELAB_DSN", "DATABASE_URL")}
    out = subprocess.run(
        [sys.executable, "-m", "sim", "run", "baseline", "--backend", "postgres"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**env, "LEASELAB_PGDATA": str(pgdata)},
        timeout=120,
    )
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    assert lines[0].startswith(f"error: cannot start the embedded PostgreSQL in {pgdata}: pg_ctl")
    assert lines[0].endswith(f"see {pgdata / 'log'}, or set LEASELAB_DSN to an existing server")


# ---- 11. the last tracebacks ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: sim.run("baseline", sql=3), "sql: expected a queue directory"),
        (lambda: sim.compare("x", 3), "live_run: expected the LiveRun"),
        (lambda: sim.preset(3), "preset: expected a preset name"),
        (lambda: sim.live(3, duration=1), "scenario"),
    ],
)
def test_wrong_types_in_the_api_are_config_errors(call, message):
    with pytest.raises(ConfigError) as info:
        call()
    assert message in str(info.value) and "\n" not in str(info.value)


@pytest.mark.postgres
def test_a_sweep_over_a_queue_with_its_own_functions_runs_every_point(tmp_path, pg_dsn):
    """Each run has a schema (and role) of its own: the second never meets the first's function."""
    (tmp_path / "queries.sql").write_text(HEARTBEAT)
    schema = (ROOT / "sim" / "sql" / "schema.sql").read_text() + (
        "\nCREATE FUNCTION touch() RETURNS trigger LANGUAGE plpgsql AS $$ "
        "BEGIN NEW.heartbeat_at := NEW.lease_until; RETURN NEW; END $$;\n"
        "CREATE TRIGGER touch BEFORE UPDATE ON payment_jobs "
        "FOR EACH ROW EXECUTE FUNCTION touch();\n"
    )
    (tmp_path / "schema.sql").write_text(schema)
    scenario = sim.preset("baseline").with_overrides({"workload.jobs": 5, "horizon": 20})
    s = sim.sweep(
        scenario,
        {"policy.lease_ttl": [20, 30]},
        replications=1,
        sql=tmp_path,
        dsn=pg_dsn,
        executor="serial",
    )
    assert len(s.runs) == 2 and (s.runs["jobs"] == 5).all()
