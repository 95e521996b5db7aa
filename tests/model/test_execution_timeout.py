"""policy.execution_timeout: a lease never outlives its claim by more than the timeout, heartbeats
or not (Temporal's StartToClose beside its HeartbeatTimeout; Hatchet's step timeout). The worker
learns of it only through a heartbeat (Temporal cancels an activity only through the heartbeat)."""

from sim import run

from .scripts import mechanism_scenarios, timeline

MECHANISMS = mechanism_scenarios()

# w0 claims at 0.002 and renews every 8 s; from 16.004 on its renewals reach only the 25.002 cap
RENEWED_UP_TO_THE_CAP = [
    (0.002, "claim", "w0", 1, 1),
    (0.002, "claim_lost", "w1", 1, None),
    (8.003, "heartbeat", "w0", 1, 1),
    (16.004, "heartbeat", "w0", 1, 1),
    (20.002, "psp_charge", "w0", 1, 1),
    (24.005, "heartbeat", "w0", 1, 1),
]


def test_the_retry_runs_beside_the_still_running_original():
    """Claimed at 0.002 with a 10 s lease (capped at 25.002), renewed at 8.003 to 18.003, at 16.004
    and 24.005 only up to the cap. The watcher's tick at 25.025 requeues the job and w1 claims it
    at 25.029 as attempt 2, while w0 is still on its 40 s of work: w0 learns it from its heartbeat
    at 32.006, rejected, and gives the job up at its next checkpoint, 40.002."""
    r = run(MECHANISMS["execution timeout"])
    assert timeline(r)[:10] == [
        *RENEWED_UP_TO_THE_CAP,
        (25.026, "requeue", "watcher", 1, 1),
        (25.029, "claim", "w1", 1, 2),
        (32.006, "heartbeat_rejected", "w0", 1, 1),
        (33.03, "heartbeat", "w1", 1, 2),
    ]
    renewals = [round(e.detail, 6) for e in r.log if e.kind == "heartbeat" and e.attempt == 1]
    assert renewals == [18.003, 25.002, 25.002]  # min(now + 10, claim + 25)
    first, second = r.leases.iloc[0], r.leases.iloc[1]
    assert (round(first.until, 6), first.end_reason, bool(first.false_expiry)) == (
        25.002,
        "expired",
        True,
    )
    assert (round(second.until, 6), second.end_reason) == (50.029, "expired")  # capped again
    assert ("abandon", "w0", 40.002) in [(e.kind, e.worker, round(e.t, 6)) for e in r.log]


def test_without_a_heartbeat_the_original_runs_to_its_end_and_its_completion_is_refused():
    """No heartbeat: the lease is min(100, 25) s from the claim; w0 never hears of the timeout,
    charges the card, runs its 40 s and its completion, fenced by attempt, is refused at 40.005."""
    r = run(MECHANISMS["execution timeout, no heartbeat"])
    assert timeline(r) == [
        (0.002, "claim", "w0", 1, 1),
        (0.002, "claim_lost", "w1", 1, None),
        (20.002, "psp_charge", "w0", 1, 1),
        (25.026, "requeue", "watcher", 1, 1),
        (25.029, "claim", "w1", 1, 2),
        (40.005, "complete_rejected", "w0", 1, 1),
        (45.029, "psp_charge", "w1", 1, 2),
        (50.051, "requeue", "watcher", 1, 2),
        (51.018, "claim", "w0", 1, 3),
    ]
    assert r.events[r.events.kind == "claim"].detail.round(6).tolist()[0] == 25.002


def test_a_heartbeat_past_the_cap_tells_the_worker_the_attempt_is_over():
    """With the watcher's tick only at 40.001, w0's heartbeat at 32.006 still finds its row and
    renews it only to 25.002, already past: w0 records the execution timeout, stops renewing and
    gives the job up at 40.002, the very instant the watcher requeues it."""
    r = run(MECHANISMS["execution timeout seen by a heartbeat"])
    assert timeline(r)[:9] == [
        *RENEWED_UP_TO_THE_CAP,
        (32.006, "heartbeat", "w0", 1, 1),
        (32.006, "execution_timeout", "w0", 1, 1),
        (40.002, "abandon", "w0", 1, 1),
    ]
    assert [round(e.detail, 6) for e in r.log if e.kind == "execution_timeout"] == [25.002]
