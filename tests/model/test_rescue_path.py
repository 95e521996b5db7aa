"""The rescue path can fail. policy.rescue = job: the watcher's tick is a task of the queue that a
worker runs between jobs (procrastinate's retry_stalled_jobs, #1408): it waits while every worker
is busy and dies with a worker that crashes running it. faults.release_loss: a graceful release
that never reaches the database (kombu #1835) leaves the job to the watcher."""

import pytest

from sim import run
from sim.errors import ConfigError
from sim.scenario.settings import Faults, Policy, Scenario

from .scripts import mechanism_scenarios, timeline

MECHANISMS = mechanism_scenarios()
STORY = ("idle", "enqueue", "lock_wait", "heartbeat")


def test_the_tick_runs_as_a_job_of_whichever_worker_is_free():
    """A task is deferred every 5 s from 0 and run by the next worker that looks for work: w0 at 0,
    then w1 (back at 3 from its crash at 2) at its polls of 5.002 and 10.008; the tick of 10.009
    requeues job 1 (w1's lease ended at 10.002) and w1 claims it at 10.011."""
    r = run(MECHANISMS["rescue job"])
    assert timeline(r, skip=STORY)[:12] == [
        (0.0, "rescue_job", "w0", None, None),
        (0.001, "watcher_tick", "watcher", None, None),
        (0.002, "claim", "w1", 1, 1),
        (0.003, "claim_lost", "w0", 1, None),
        (2.0, "crash", "w1", 1, 1),
        (3.0, "restart", "w1", None, None),
        (5.002, "rescue_job", "w1", None, None),
        (5.003, "watcher_tick", "watcher", None, None),
        (10.008, "rescue_job", "w1", None, None),
        (10.009, "watcher_tick", "watcher", None, None),
        (10.009, "requeue", "watcher", 1, 1),
        (10.011, "claim", "w1", 1, 2),
    ]
    waited = r.events[r.events.kind == "rescue_job"].detail.astype(float).round(6).tolist()
    assert waited == [0.0, 0.002, 0.008, 0.018, 0.024]  # deferred at 0, 5, ..., 20
    assert r.recoveries["latency"].round(6).tolist() == [8.011]
    assert r.statement_counts["requeue_expired"] == 5


def test_a_worker_that_crashes_running_the_tick_loses_it_until_the_next_period():
    """w1 dies again at 10.0085, halfway through the tick that would have requeued job 1: that tick
    is lost (rescue_lost, deferred at 10), and job 1 waits for the task deferred at 15: recovered
    after 13.0155 s instead of 8.011."""
    r = run(MECHANISMS["rescue job lost"])
    assert timeline(r, skip=STORY)[8:16] == [
        (10.008, "rescue_job", "w1", None, None),
        (10.0085, "crash", "w1", None, None),
        (10.0085, "rescue_lost", "w1", None, None),
        (11.0085, "restart", "w1", None, None),
        (15.0125, "rescue_job", "w1", None, None),
        (15.0135, "watcher_tick", "watcher", None, None),
        (15.0135, "requeue", "watcher", 1, 1),
        (15.0155, "claim", "w1", 1, 2),
    ]
    assert r.events[r.events.kind == "rescue_lost"].detail.tolist() == [10.0]
    assert r.recoveries["latency"].round(6).tolist() == [13.0155]


def test_while_every_worker_is_busy_no_tick_runs():
    """w0 crashes at 2 holding job 2 and stays down; w1 runs job 1 until 30.005. The tasks deferred
    from 5 on wait (one at a time: the queueing lock), so job 2's lease, ended at 10.005, is
    requeued only when w1 is free, at 30.006. A watcher process requeues at 10.003 and ticks 9
    times; here 2 ticks run. No worker could take job 2 before 30 either way."""
    r = run(MECHANISMS["rescue job behind busy workers"])
    assert timeline(r, skip=STORY) == [
        (0.0, "rescue_job", "w0", None, None),
        (0.001, "watcher_tick", "watcher", None, None),
        (0.002, "claim", "w1", 1, 1),
        (0.003, "claim_lost", "w0", 1, None),
        (0.005, "claim", "w0", 2, 1),
        (2.0, "crash", "w0", 2, 1),
        (15.002, "psp_charge", "w1", 1, 1),
        (30.005, "effect", "w1", 1, 1),
        (30.005, "complete", "w1", 1, 1),
        (30.005, "rescue_job", "w1", None, None),
        (30.006, "watcher_tick", "watcher", None, None),
        (30.006, "requeue", "watcher", 2, 1),
        (30.008, "claim", "w1", 2, 2),
    ]
    rescued = r.events[r.events.kind == "rescue_job"].detail.astype(float).round(6).tolist()
    assert rescued == [0.0, 25.005]  # the task deferred at 5 waited 25 s
    watcher = run(
        MECHANISMS["rescue job behind busy workers"].with_overrides({"policy.rescue": "watcher"})
    )
    requeues = watcher.events[watcher.events.kind == "requeue"]
    assert requeues.t.round(6).tolist() == [10.003]
    assert watcher.statement_counts["requeue_expired"] == 9
    assert r.statement_counts["requeue_expired"] == 2


def test_a_lost_release_leaves_the_job_to_the_watcher():
    """w0 stops gracefully at 5 holding job 1 with jobs 2 and 3 prefetched; with a release loss of
    0.5 its stream loses the releases of 2 and 3: job 1 is back at once (w1 claims it at 5.006),
    jobs 2 and 3 wait for their lease to end (30.001) and the tick at 30.007."""
    r = run(MECHANISMS["release lost"])
    assert timeline(r, skip=(*STORY, "watcher_tick"))[3:11] == [
        (5.0, "shutdown", "w0", 1, 1),
        (5.0, "shutdown", "w0", 2, 1),
        (5.0, "shutdown", "w0", 3, 1),
        (5.001, "release", "w0", 1, 1),
        (5.001, "release_lost", "w0", 2, 1),
        (5.001, "release_lost", "w0", 3, 1),
        (5.006, "claim", "w1", 1, 2),
        (15.006, "psp_charge", "w1", 1, 2),
    ]
    requeues = r.events[r.events.kind == "requeue"]
    assert requeues[["t", "job"]].round(6).values.tolist() == [[30.007, 2], [30.007, 3]]
    assert r.recoveries["latency"].round(6).tolist() == [25.014, 25.014]
    assert r.statement_counts["release_job_fenced"] == 1
    kept = run(MECHANISMS["release lost"].with_overrides({"faults.release_loss": 0.0}))
    assert kept.statement_counts["release_job_fenced"] == 3 and "release_lost" not in set(
        kept.events.kind
    )


@pytest.mark.parametrize(
    "section, value, message",
    [
        ("policy", {"rescue": "cron"}, "policy.rescue: must be one of watcher, job"),
        ("policy", {"rescue": "job", "watcher": False}, "policy.rescue: job runs the watcher's"),
        ("faults", {"release_loss": 1.5}, "faults.release_loss: must be a probability"),
        ("faults", {"release_loss": 0.5}, "faults.release_loss: is the loss of a graceful release"),
    ],
)
def test_bad_rescue_settings_are_one_line_naming_the_field(section, value, message):
    section_type = {"policy": Policy, "faults": Faults}[section]
    with pytest.raises(ConfigError, match=message) as info:
        Scenario(**{section: section_type(**value)}).replace()
    assert "\n" not in str(info.value)
