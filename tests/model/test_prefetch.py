"""policy.prefetch: a worker claims up to k jobs in one statement (Celery's prefetch, SQS's
MaxNumberOfMessages); every lease starts at the claim, while the jobs wait in the worker's buffer,
and a crash takes the buffered jobs with it: only the watcher gets them back."""

import pytest

from sim import run
from sim.errors import ConfigError
from sim.scenario.settings import Policy, Scenario

from .scripts import mechanism_scenarios, prefetched, timeline

MECHANISMS = mechanism_scenarios()


def test_the_buffered_jobs_leases_run_out_while_they_wait():
    """w0 claims jobs 1-3 at 0.001, all leased to 30.001; w1 finds nothing. Job 2 starts at 20.004
    (after job 1) and job 3 would start at 40: both leases lapse in the buffer, the watcher's tick
    at 30.007 requeues them and w1 takes both. w0 runs them anyway: two charges per job, each of
    w0's fenced completions refused."""
    r = run(MECHANISMS["prefetch"])
    assert timeline(r) == [
        (0.001, "claim", "w0", 1, 1),
        (0.001, "claim", "w0", 2, 1),
        (0.001, "claim", "w0", 3, 1),
        (10.001, "psp_charge", "w0", 1, 1),
        (20.004, "effect", "w0", 1, 1),
        (20.004, "complete", "w0", 1, 1),
        (30.004, "psp_charge", "w0", 2, 1),
        (30.007, "requeue", "watcher", 2, 1),
        (30.007, "requeue", "watcher", 3, 1),
        (30.031, "claim", "w1", 2, 2),
        (30.031, "claim", "w1", 3, 2),
        (40.007, "complete_rejected", "w0", 2, 1),
        (40.031, "psp_charge", "w1", 2, 2),
        (50.007, "psp_charge", "w0", 3, 1),
        (50.034, "effect", "w1", 2, 2),
        (50.034, "complete", "w1", 2, 2),
        (60.01, "complete_rejected", "w0", 3, 1),
        (60.034, "psp_charge", "w1", 3, 2),
    ]
    assert r.events[r.events.kind == "claim"].detail.round(6).tolist()[:3] == [30.001] * 3
    assert r.check().counts() == {"duplicate_external_effect": 2}
    assert "claim_skip_locked" not in r.statement_counts
    lapsed = r.leases[r.leases.worker == "w0"].sort_values("job")
    assert lapsed["outcome"].tolist() == ["completed", "rejected", "rejected"]


def test_without_prefetch_the_same_jobs_run_once():
    """The same queue with prefetch = 1: each lease starts when its job does; nothing lapses."""
    r = run(prefetched(prefetch=1))
    assert [(t, k, w, j) for t, k, w, j, _ in timeline(r) if k == "claim"] == [
        (0.001, "claim", "w0", 1),
        (0.001, "claim", "w1", 2),
        (20.005, "claim", "w0", 3),
    ]
    assert r.check().counts() == {}
    assert r.summary["completed"] == 3


def test_a_crash_drops_the_buffered_jobs_until_the_watcher_requeues_them():
    """w0 dies at 5 running job 1 with jobs 2 and 3 buffered: all three stay Processing under w0's
    lease until it ends at 30.001; the tick at 30.007 requeues them, w1 claims them at 30.031."""
    r = run(MECHANISMS["prefetch, crash"])
    assert timeline(r)[:12] == [
        (0.001, "claim", "w0", 1, 1),
        (0.001, "claim", "w0", 2, 1),
        (0.001, "claim", "w0", 3, 1),
        (5.0, "crash", "w0", 1, 1),
        (5.0, "drop", "w0", 2, 1),
        (5.0, "drop", "w0", 3, 1),
        (30.007, "requeue", "watcher", 1, 1),
        (30.007, "requeue", "watcher", 2, 1),
        (30.007, "requeue", "watcher", 3, 1),
        (30.031, "claim", "w1", 1, 2),
        (30.031, "claim", "w1", 2, 2),
        (30.031, "claim", "w1", 3, 2),
    ]
    assert r.recoveries["latency"].round(6).tolist() == [25.031] * 3
    assert r.leases[r.leases.worker == "w0"]["outcome"].tolist() == ["crashed"] * 3


def test_a_graceful_shutdown_releases_the_buffered_jobs_too():
    """Released one statement each at 5.001-5.003, and taken by w1 at 5.006: no watcher needed."""
    r = run(MECHANISMS["prefetch, graceful shutdown"])
    assert timeline(r)[3:12] == [
        (5.0, "shutdown", "w0", 1, 1),
        (5.0, "shutdown", "w0", 2, 1),
        (5.0, "shutdown", "w0", 3, 1),
        (5.001, "release", "w0", 1, 1),
        (5.002, "release", "w0", 2, 1),
        (5.003, "release", "w0", 3, 1),
        (5.006, "claim", "w1", 1, 2),
        (5.006, "claim", "w1", 2, 2),
        (5.006, "claim", "w1", 3, 2),
    ]
    assert r.statement_counts["release_job_fenced"] == 3


@pytest.mark.parametrize(
    "policy, message",
    [
        ({"prefetch": 0}, "policy.prefetch: must be from 1 to 1,000"),
        ({"prefetch": 4, "claim": "conditional_update"}, "policy.prefetch: a batch claim is one"),
    ],
)
def test_bad_prefetch_is_one_line_naming_the_field(policy, message):
    with pytest.raises(ConfigError, match=message) as info:
        Scenario(policy=Policy(**policy)).replace()
    assert "\n" not in str(info.value)
