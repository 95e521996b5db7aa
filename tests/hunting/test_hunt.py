"""sim.hunt on the project's own material (issue 33's acceptance, on the simulated database), the
hand-back it writes, its certificates, and how it behaves as a search: reproducible, parallel,
cut off at any time, refusing bad input in one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import sim
from sim.errors import ConfigError
from sim.hunting.space import Fault

ROOT = Path(__file__).resolve().parents[2]
RIVER = ROOT / "examples/queues/river-like"
UNFENCED = {"policy.fencing": False}


def river_on_memory(**policy) -> dict:
    """River's settings (queue.toml: a rescuer that reads, then writes by id 50 ms later) as
    overrides on the simulated database, whose rescue_job has River's bug (it re-checks
    nothing)."""
    settings = tomllib.loads((RIVER / "queue.toml").read_text())["policy"]
    return {f"policy.{k}": v for k, v in {**settings, **policy}.items()}


def python(*args, cwd=None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "LEASELAB_HEADLESS": "1"}
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=300
    )


@pytest.fixture(scope="module")
def race():
    """The seed's read-then-write claim: a double claim with two workers, one job, no fault."""
    return sim.hunt(
        "read-then-write-race", time=30, schedules=50, invariant="double_claim", postgres=False
    )


@pytest.fixture(scope="module")
def zombie():
    """The unfenced baseline: a completion by a worker that lost the job."""
    return sim.hunt(
        "baseline",
        time=60,
        schedules=400,
        invariant="non_owner_completion",
        postgres=False,
        **UNFENCED,
    )


def test_the_read_then_write_race_is_a_double_claim_of_two_workers_one_job_no_fault(race):
    finding = race.findings["double_claim"]
    assert finding.found.strategy == "grid" and finding.found.number < 8  # a fault-free root
    s = finding.schedule
    assert (s.workers, s.jobs, s.faults) == (2, 1, ())
    assert [v.invariant for v in finding.violations] == ["double_claim"]
    assert finding.account.endswith("two workers held the job at once.")
    assert race.exit_code == 1


def test_the_unfenced_baseline_shrinks_to_one_pause_and_tells_it(zombie):
    finding = zombie.findings["non_owner_completion"]
    assert [f.kind for f in finding.schedule.faults] == ["pause"]
    (pause,) = finding.schedule.faults
    paused, other = f"w{pause.worker}", f"w{1 - pause.worker}"
    kinds = [step.kind for step in finding.steps]
    # the paused worker claims, pauses, its lease expires, the other takes the job, it wakes and
    # completes
    assert kinds.index("claim") < kinds.index("pause_start") < kinds.index("expiry")
    assert kinds.index("expiry") < kinds.index("pause_end") < len(kinds) - 1
    assert [s.kind for s in finding.steps if s.breaks] == ["complete"]
    assert finding.steps[-1].worker == paused and finding.steps[-1].kind == "complete"
    assert f"{paused} pauses" in finding.account and f"{other} claims job 1" in finding.account
    assert finding.account.endswith("a completion by a worker that lost the job.")


@pytest.mark.slow  # an exhaustive search to its certificate: make test only
def test_the_river_like_rescuer_overwrites_a_finished_job_and_its_fix_is_certified():
    """River's settings with its 50 ms read-to-write rescuer: a finished job overwritten with at
    most 2 workers, 1 job and 2 faults. The same queue rescuing in one statement (watcher_gap 0,
    re-checked as it writes) gets the certificate for the same scope."""
    scope = dict(workers=2, jobs=1, max_faults=2, invariant="terminal_overwritten")
    buggy = sim.hunt(RIVER / "scenario.toml", time=30, postgres=False, **scope, **river_on_memory())
    found = buggy.findings["terminal_overwritten"].schedule
    assert found.workers <= 2 and found.jobs == 1 and len(found.faults) <= 2
    fixed = sim.hunt(
        RIVER / "scenario.toml",
        time=600,
        exhaustive=True,
        postgres=False,
        **scope,
        **river_on_memory(watcher_gap=0.0),
    )
    certificate = fixed.certificate
    assert not fixed.findings and fixed.exit_code == 0
    assert certificate is not None and certificate.complete
    assert certificate.checked == certificate.total == fixed.coverage.grid_total
    assert fixed.coverage.stopped == "exhausted"
    assert certificate.headline().startswith(f"all {certificate.total:,} schedules within")
    text = "\n".join(certificate.lines())
    assert "up to 2 worker(s) and 1 job(s)" in text and "up to 2 fault(s)" in text


def test_a_search_cut_off_claims_no_certificate():
    result = sim.hunt(
        "baseline", exhaustive=True, schedules=30, max_faults=2, postgres=False, time=60
    )
    assert result.coverage.stopped == "schedules" and result.coverage.checked == 30
    assert not result.certificate.complete and result.certificate.total is None
    assert result.certificate.headline().startswith("no certificate: the search was cut off")
    assert "no certificate" in str(result)


@pytest.mark.slow  # a replay and two pytest runs in subprocesses: make test only
def test_the_hand_back_replays_and_its_test_fails_until_the_queue_is_fixed(race, tmp_path):
    written = race.save(tmp_path / "out")
    names = sorted(p.name for p in written)
    assert names == [
        "double_claim.png",
        "double_claim.toml",
        "double_claim.txt",
        "hunt.json",
        "hunt.txt",
        "test_double_claim.py",
    ]
    out = tmp_path / "out"
    replayed = python("-m", "sim", "run", str(out / "double_claim.toml"))
    assert replayed.returncode == 1 and "double_claim: 1 (UNEXPECTED)" in replayed.stdout
    failing = python("-m", "pytest", "-q", "-p", "no:cacheprovider", str(out), cwd=tmp_path)
    assert failing.returncode == 1 and "two workers held the job at once" in failing.stdout
    toml = out / "double_claim.toml"
    toml.write_text(toml.read_text().replace('"read_then_write"', '"conditional_update"'))
    fixed = python("-m", "pytest", "-q", "-p", "no:cacheprovider", str(out), cwd=tmp_path)
    assert fixed.returncode == 0, fixed.stdout
    summary = json.loads((out / "hunt.json").read_text())
    assert summary["findings"]["double_claim"]["schedule"][0].startswith("2 worker(s), 1 job(s)")
    with pytest.raises(ConfigError, match="not empty"):
        race.save(out)


def test_the_same_seed_checks_the_same_schedules_in_order_anywhere():
    options = dict(schedules=120, postgres=False, time=120, **UNFENCED)
    serial = sim.hunt("baseline", seed=3, **options)
    again = sim.hunt("baseline", seed=3, **options)
    parallel = sim.hunt("baseline", seed=3, parallel=2, **options)
    for other in (again, parallel):
        assert other.coverage.checked == serial.coverage.checked == 120
        assert other.coverage.by_strategy == serial.coverage.by_strategy
        assert {k: (f.found.number, f.schedule) for k, f in other.findings.items()} == {
            k: (f.found.number, f.schedule) for k, f in serial.findings.items()
        }


def test_a_dask_client_searches_like_this_process():
    distributed = pytest.importorskip("distributed")
    options = dict(schedules=40, postgres=False, time=120, invariant="double_claim")
    serial = sim.hunt("read-then-write-race", **options)
    with distributed.Client(processes=False, n_workers=1, dashboard_address=None) as client:
        on_dask = sim.hunt("read-then-write-race", executor=client.get_executor(), **options)
    assert on_dask.coverage.checked == serial.coverage.checked
    assert on_dask.findings["double_claim"].schedule == serial.findings["double_claim"].schedule


def test_ctrl_c_stops_the_search_and_it_reports_what_it_covered():
    seen = []

    def progress():
        seen.append(1)
        if len(seen) == 25:
            raise KeyboardInterrupt

    result = sim.hunt("baseline", postgres=False, time=600, progress=progress)
    assert result.coverage.stopped == "interrupted" and result.coverage.checked == 25
    assert "stopped: interrupted" in str(result) and result.exit_code == 0


@pytest.mark.parametrize(
    "options, message",
    [
        ({"time": -1}, "time: expected seconds"),
        ({"parallel": 0}, "parallel: expected a number of processes"),
        ({"seed": -1}, "seed: expected a whole number"),
        ({"schedules": 0}, "schedules: expected a number of schedules"),
        ({"invariant": "nope"}, "invariant: 'nope' is not one of"),
        ({"kinds": ["heartbeat_loss"], "policy.heartbeat": False}, "kinds: heartbeat_loss cannot"),
        ({"workers": 9}, "workers: expected a whole number from 1 to 8"),
        ({"executor": "dask"}, "executor: expected a concurrent.futures.Executor"),
        ({"policy.nope": 1}, "policy.nope: unknown key"),
    ],
)
def test_bad_input_is_refused_in_one_line(options, message):
    with pytest.raises(ConfigError) as error:
        sim.hunt("baseline", postgres=False, **options)
    assert str(error.value).startswith(message) and "\n" not in str(error.value)


def test_the_scope_says_what_a_schedule_is_made_of():
    result = sim.hunt("baseline", schedules=5, postgres=False)
    lines = result.scope.lines()
    assert (
        lines[0]
        == "up to 2 worker(s) and 2 job(s) (all enqueued at 0, 1 s of work each), horizon 69 s"
    )
    assert lines[2] == "statement latency 2 ms constant; epsilon 1 ms"
    assert Fault("pause", 0, 1.0, 2.0).label() == "pause w0 2 s at 1 s"
