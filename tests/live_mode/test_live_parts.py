"""The live machinery piece by piece, without a server: clock, records that survive SIGKILL,
slots, the job plan and fault schedule (same as the model's), the time-scale check, repairs,
comparisons."""

import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from sim import run
from sim.comparisons.live_vs_simulated import quantile_ci, recovery_parts
from sim.db.memory import MemoryBackend
from sim.live_mode.clock import LiveClock
from sim.live_mode.faults import FaultSchedule
from sim.live_mode.plan import job_plan
from sim.live_mode.recorder import Recorder, event_log, read_records
from sim.live_mode.repair import repair
from sim.live_mode.slots import Slots
from sim.live_mode.worker import SharedCrashPoints
from sim.model.faults import clock_offset
from sim.model.world import build
from sim.scenario.dists import Dist
from sim.scenario.settings import CrashPoint, Faults, ScriptedCrash, ScriptedOutage, preset
from sim.support.rng import Streams
from tests.model.scripts import scripted


def test_clock_counts_scenario_seconds_at_the_time_scale():
    clock = LiveClock(time.monotonic(), scale=0.01)  # 1 scenario second = 10 ms
    time.sleep(0.05)
    assert 4.9 <= clock.now() < 50  # >= 5 s of scenario time after 50 ms; far less than 50 s
    assert clock.wall(3.0) == pytest.approx(0.03)
    assert clock.monotonic_at(2.0) == pytest.approx(clock.t0 + 0.02)


def test_records_survive_sigkill(tmp_path):
    """A child appends a record, says so, and is killed at once: the record is there, whole."""
    code = textwrap.dedent(f"""
        import sys, time
        from sim.live_mode.clock import LiveClock
        from sim.live_mode.recorder import Recorder
        r = Recorder({str(tmp_path / "w0-0.jsonl")!r}, LiveClock(time.monotonic()))
        r.add(1.25, "claim", "w0", 7, 1, 2.5)
        r.statement("claim_conditional", 0.001)
        print("written", flush=True)
        time.sleep(60)
    """)
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    assert child.stdout.readline().strip() == b"written"
    child.send_signal(signal.SIGKILL)
    assert child.wait() == -signal.SIGKILL
    child.stdout.close()
    events, statements = read_records(tmp_path)
    assert events == [[1.25, "claim", "w0", 7, 1, 2.5]]
    [(t, name, seconds)] = statements  # its scenario time: the clock's, when it was written
    assert 0 < t < 60 and (name, seconds) == ("claim_conditional", 0.001)
    assert list(event_log(events)) == [(1.25, "claim", "w0", 7, 1, 2.5)]


def test_records_are_merged_in_time_order_and_a_torn_line_is_skipped(tmp_path):
    clock = LiveClock(0.0)
    a, b = Recorder(tmp_path / "a.jsonl", clock), Recorder(tmp_path / "b.jsonl", clock)
    a.add(2.0, "idle", "w0")
    b.add(1.0, "idle", "w1")
    a.add(3.0, "idle", "w0")
    with open(tmp_path / "b.jsonl", "a") as f:
        f.write('[4.0, "idle", "w')  # a write cut short
    events, _ = read_records(tmp_path)
    assert [(e[0], e[2]) for e in events] == [(1.0, "w1"), (2.0, "w0"), (3.0, "w0")]


def test_slots_are_shared_between_mappings(tmp_path):
    writer = Slots(tmp_path / "slots", 3, create=True)
    reader = Slots(tmp_path / "slots", 3)
    writer.hold(1, 42, 3, 10.5)
    writer.partition(2, 99.0)
    assert reader.held(1) == (42, 3, 10.5) and reader.held(0) is None
    writer.renew(1, 42, 11.5)
    writer.renew(1, 41, 99.0)  # a late renewal of another job changes nothing
    assert reader.held(1) == (42, 3, 11.5)
    writer.release(1)
    assert (
        reader.held(1) is None
        and reader.partitioned_until(2) == 99.0
        and reader.partitioned_until(1) == 0.0
    )


def test_job_plan_is_the_model_producers_catalog():
    scenario = preset("duplicate-delivery").replace(horizon=300.0)
    world = build(scenario, MemoryBackend())
    world.env.run(until=scenario.horizon)
    arrivals, catalog = job_plan(scenario)
    assert len(catalog) == len(world.catalog) > 0
    assert [catalog[j] for j in range(1, len(catalog) + 1)] == [
        world.catalog[j] for j in range(1, len(catalog) + 1)
    ]
    enqueued = [(e.t, e.job) for e in world.log if e.kind == "enqueue"]
    assert [job for _, job, _ in arrivals] == [job for _, job in enqueued]
    # the model logs an enqueue after its INSERT's sampled latency (the t = 0 batch at once)
    delays = np.array([t_log - t for (t, _, _), (t_log, _) in zip(arrivals, enqueued, strict=True)])
    assert delays.min() >= 0 and delays.max() <= scenario.workload.statement_latency.quantile(
        0.9999
    )


def _drain(schedule):
    out = []
    while schedule.next_time() < float("inf"):
        a = schedule.pop()
        out.append((round(a.t, 6), a.kind, a.worker, a.job))
    return out


def test_fault_schedule_plays_the_models_fault_times():
    """The holder clock of the exact-timeline test (19.377, 28.584, 51.724 s), scripted outages and
    crashes."""
    faults = Faults(
        crash_rate=90.0,
        crash_target="holder",
        crashes=(ScriptedCrash(at=5.0, worker=1), ScriptedCrash(at=7.0, job=3)),
        pauses=(ScriptedOutage(worker=0, at=2.0, duration=1.5),),
        partitions=(ScriptedOutage(worker=1, at=3.0, duration=2.0),),
    )
    schedule = FaultSchedule(scripted(workers=2, horizon=60, faults=faults))
    assert _drain(schedule) == [
        (2.0, "pause", 0, None),
        (3.0, "partition", 1, None),
        (3.5, "unpause", 0, None),
        (5.0, "crash", 1, None),
        (5.0, "heal", 1, None),
        (7.0, "crash_job", None, 3),
        (19.377451, "crash_holder", None, None),
        (28.583819, "crash_holder", None, None),
        (51.724327, "crash_holder", None, None),
    ]


def test_crash_points_share_one_run_wide_limit_between_processes(tmp_path):
    """Two worker processes' crash points on one run folder: after_psp fires at most twice in
    all (limit 2), whichever process reaches it; after_marker has a limit of its own; each draws
    its probability from its own stream."""
    configs = (CrashPoint("after_psp", 1.0, 2), CrashPoint("after_marker", 0.5, 1))
    a = SharedCrashPoints(configs, np.random.default_rng(1), str(tmp_path))
    b = SharedCrashPoints(configs, np.random.default_rng(2), str(tmp_path))
    assert [a.fires("after_psp"), b.fires("after_psp"), a.fires("after_psp")] == [True, True, False]
    assert b.spent("after_psp") == 2 and not b.fires("after_psp")
    fired = [p.fires("after_marker") for p in (a, b, a, b, a, b)]
    assert sum(fired) == 1 and a.fires("unknown_point") is False


def test_a_live_worker_binds_the_models_clock_offset():
    """policy.clock = worker: each worker's offset is the simulation's draw (faults.clock_offset),
    bound into every statement's `now` and what the protocol reads as the worker's clock."""
    from sim.live_mode.connection import LiveConnection

    scenario = scripted(workers=3, clock="worker", faults=Faults(clock_skew=2.0))
    world = build(scenario, MemoryBackend())
    skews = [w.db.clock.offset for w in world.workers]  # the constant part of each WorkerClock
    assert len(set(skews)) == 3 and all(skew != 0 for skew in skews)
    streams = Streams(scenario.seed)
    assert [clock_offset(scenario, i, streams) for i in range(3)] == skews
    clock = LiveClock(time.monotonic())
    db = LiveConnection("", "s", "w1", {}, clock, None, skew=skews[1])
    assert db.now() - clock.now() == pytest.approx(skews[1], abs=1e-3)
    assert clock_offset(scripted(workers=3, faults=Faults(clock_skew=2.0)), 1, streams) == 0.0


def test_repair_restores_a_completion_a_kill_cut_off():
    """w0 committed job 5 at 3.2 s and was killed before writing its records; its crash at 3.3 s
    named the job. The ledger and jobs table witness the commit: the records come back, the crash
    names nothing (w0 held nothing then), and a logged completion is left alone."""
    records = [
        [1.0, "claim", "w0", 5, 1, 3.0],
        [1.1, "claim", "w1", 6, 1, 3.1],
        [2.0, "effect", "w1", 6, 1, "evt-6"],
        [2.0, "complete", "w1", 6, 1, 3.1],
        [3.3, "crash", "w0", 5, 1, 3.0],
    ]
    jobs = [
        (5, "evt-5", "{}", "Completed", "w0", 3.0, 1, 1.0, 0.0, 3.2, None),
        (6, "evt-6", "{}", "Completed", "w1", 3.1, 1, 1.1, 0.0, 2.0, None),
    ]
    ledger = [(1, 6, "evt-6", 100, "w1", 1, 2.0), (2, 5, "evt-5", 100, "w0", 1, 3.2)]
    fixed, notes = repair(records, {"jobs": jobs, "ledger": ledger})
    assert fixed == [
        [1.0, "claim", "w0", 5, 1, 3.0],
        [1.1, "claim", "w1", 6, 1, 3.1],
        [2.0, "effect", "w1", 6, 1, "evt-6"],
        [2.0, "complete", "w1", 6, 1, 3.1],
        [3.2, "effect", "w0", 5, 1, "evt-5"],
        [3.2, "complete", "w0", 5, 1, None],
        [3.3, "crash", "w0", None, None, None],
    ]
    assert len(notes) == 2


def test_recovery_parts_add_up_on_the_scripted_watcher_recovery():
    """The exact timeline of tests/model: crash at 25, lease renewed to 50.004, requeue at 60.003,
    claim at 60.064."""
    faults = Faults(crashes=(ScriptedCrash(at=25.0, worker=0),), restart_delay=Dist.constant(1000))
    r = run(
        scripted(
            workers=2, work=100, horizon=75, watcher=True, claim_takes_expired=False, faults=faults
        )
    )
    parts = recovery_parts(r).round(6)
    assert parts[["latency", "lease_remaining", "watcher_wait", "poll_wait"]].values.tolist() == [
        [35.064, 25.004, 9.999, 0.061]
    ]


def test_quantile_interval_covers_the_true_quantile_about_95_percent_of_the_time():
    rng = np.random.default_rng(18)
    true_p90 = stats.expon.ppf(0.9)
    covered = sum(
        lo <= true_p90 <= hi
        for _, lo, hi in (quantile_ci(rng.exponential(size=100), 0.9) for _ in range(400))
    )
    low, high = stats.binom.interval(0.999, 400, 0.95)
    assert low - 8 <= covered <= high  # the order-statistic interval is conservative (>= 95%)


def test_children_take_their_statements_from_the_query_loader(tmp_path):
    """--sql DIR: every live process runs the queue directory's statements in place of Lease
    Lab's."""
    from sim.db.queries import load_queries
    from sim.live_mode.roles import queries_for

    assert queries_for({"sql_dir": None}) == load_queries()
    river = queries_for({"sql_dir": "examples/queues/river-like"})
    assert river["claim_skip_locked"].sql != load_queries()["claim_skip_locked"].sql
    assert river["claim_skip_locked"].param_names == load_queries()["claim_skip_locked"].param_names


def test_cli_live_refuses_bad_input_in_one_line(capsys):
    from sim.cli.main import main

    assert main(["live", "crash-recovery", "--duration", "0"]) == 2
    assert (
        main(["live", "crash-recovery", "--duration", "3", "--sql", str(Path("/nonexistent"))]) == 2
    )
    assert main(["live", "crash-recovery", "--duration", "3", "--compare-seeds", "-1"]) == 2
    assert (
        main(["live", "crash-recovery", "--duration", "3", "--set", "faults.crash_target=owner"])
        == 2
    )
    err = capsys.readouterr().err.splitlines()
    assert err == [
        "error: --duration: must be a number of wall seconds > 0 and at most 604800 (a week), "
        "got 0.0",
        "error: --sql /nonexistent: not a directory "
        "(expected one holding queries.sql and optionally schema.sql)",
        "error: --compare-seeds: must be a whole number from 0 to 1,000, got -1",
        "error: faults.crash_target: must be one of any, holder",
    ]
