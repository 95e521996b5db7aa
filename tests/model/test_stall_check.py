"""policy.stall_check = two_phase and policy.max_stalls: BullMQ's stalled-job check (mark on one
pass, reclaim the still-expired marked jobs on the next) and a stall budget counted apart from the
attempts (maxStalledCount)."""

from sim import run

from .scripts import mechanism_scenarios, stalled_at_5, timeline

MECHANISMS = mechanism_scenarios()


def test_a_job_claimed_after_a_pass_waits_one_more_pass():
    """Claimed at 0.002, just after the watcher's first pass (0.001); w0 crashes at 5 and the lease
    ends at 20.002. The pass at 30.002 finds it expired but unmarked: it marks it, and the pass at
    60.003 reclaims it. The single-pass watcher requeues it at 30.002, a whole interval earlier."""
    r = run(MECHANISMS["two-phase stall check"])
    assert timeline(r) == [
        (0.002, "claim", "w0", 1, 1),
        (0.002, "claim_lost", "w1", 1, None),
        (5.0, "crash", "w0", 1, 1),
        (60.003, "requeue", "watcher", 1, 1),
        (60.064, "claim", "w1", 1, 2),
    ]
    assert r.recoveries["latency"].round(6).tolist() == [55.064]
    assert (
        r.statement_counts["reclaim_stalled"] == 3 and "requeue_expired" not in r.statement_counts
    )
    single = run(stalled_at_5())
    assert [(round(t, 6), k) for t, k, *_ in timeline(single)][3:5] == [
        (30.002, "requeue"),
        (30.034, "claim"),
    ]


def test_the_second_stall_kills_the_job_though_attempts_remain():
    """A job that kills its worker at its PSP call, under maxStalledCount 1 and attempts 1: the
    first stall (crash at 2.002, marked at 3.002, reclaimed at 6.003) sends it back; the second
    (crash at 8.007, marked at 9.004, reclaimed at 12.005) exceeds the budget: Dead after 2
    leases, the claim cap being max_attempts + max_stalls = 2."""
    r = run(MECHANISMS["stall budget"])
    assert timeline(r) == [
        (0.002, "claim", "w0", 1, 1),
        (1.503, "heartbeat", "w0", 1, 1),
        (2.002, "psp_charge", "w0", 1, 1),
        (2.002, "crash", "w0", 1, 1),
        (3.002, "restart", "w0", None, None),
        (6.003, "requeue", "watcher", 1, 1),
        (6.007, "claim", "w0", 1, 2),
        (7.508, "heartbeat", "w0", 1, 2),
        (8.007, "psp_charge", "w0", 1, 2),
        (8.007, "crash", "w0", 1, 2),
        (9.007, "restart", "w0", None, None),
        (12.005, "requeue", "watcher", 1, 2),
    ]
    assert r.events[r.events.kind == "requeue"].detail.tolist() == ["Pending", "Dead"]
    job = r.table_jobs.iloc[0]
    assert (job.status, job.attempts, job.last_error) == (
        "Dead",
        2,
        "stalled more than max_stalls times",
    )
    assert r.scenario.policy.claim_cap == 2
    assert "attempts_beyond_max" not in r.check().counts()  # 2 leases under a cap of 2
