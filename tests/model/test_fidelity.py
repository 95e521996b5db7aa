"""Fidelity to real queues (issue #16): the failure modes peers' users hit, as exact timelines.

Each test names the peer issue whose outcome it reproduces. Scripted scenarios: constant work,
1 ms statements, no random phases (tests/model/scripts.py).
"""

import dataclasses

import pytest

from sim import run
from sim.errors import ConfigError
from sim.invariants import check
from sim.scenario.dists import Dist
from sim.scenario.settings import Faults, ScriptedCrash, preset

from .scripts import (
    HICCUP,
    PAUSED,
    POISON,
    fidelity_scenarios,
    scripted,
    timeline,
    with_deadline,
)

QUIET = ("idle", "watcher_tick", "enqueue", "lock_wait", "heartbeat", "psp_charge", "restart")


def _peer(name: str, **overrides):
    """A peer preset's policy on one 10 s job, two workers, 1 ms statements, no random phases."""
    base = {
        "workload.jobs": 1,
        "workload.arrival": "batch",
        "workload.processing": 10.0,
        "workload.psp_call": 0.0,
        "workload.statement_latency": 0.001,
        "faults.crash_rate": 0.0,
        "policy.random_phase": False,
        "policy.workers": 2,
    }
    return preset(name).with_overrides({**base, **overrides})


# ---- 1. poison jobs and max_attempts -------------------------------------------------------------


def test_a_poison_job_stops_at_max_attempts_even_when_the_claim_takes_expired_leases():
    """A job that kills its worker every time. The claim takes the expired lease before the watcher
    looks (claim_takes_expired), so before the cap was on every claim path it reached 101 attempts
    with max_attempts = 25. Now the claim skips it at the cap and the watcher marks it Dead."""
    r = run(
        scripted(
            work=2,
            lease_ttl=3,
            heartbeat_interval=1,
            max_attempts=3,
            horizon=40,
            faults=POISON,
            watcher=True,
            watcher_interval=10,
        )
    )
    assert timeline(r, skip=QUIET) == [
        (0.002, "claim", "w0", 1, 1),
        (1.002, "crash", "w0", 1, 1),  # the crash point after the PSP call, half way through 2 s
        (
            3.005,
            "claim",
            "w0",
            1,
            2,
        ),  # restarted at 2.002; the lease (until 3.002) taken by the claim
        (4.005, "crash", "w0", 1, 2),
        (6.008, "claim", "w0", 1, 3),
        (7.008, "crash", "w0", 1, 3),
        (10.002, "requeue", "watcher", 1, 3),  # the third lease expired at 9.008: no claim takes it
    ]
    assert r.table_jobs[["status", "attempts", "last_error"]].values.tolist() == [
        ["Dead", 3, "lease expired"]
    ]
    assert "attempts_beyond_max" not in r.check().counts()


def test_the_issue_s_poison_job_ends_dead_at_25_attempts():
    r = run(
        scripted(
            work=2,
            lease_ttl=3,
            heartbeat_interval=1,
            max_attempts=25,
            horizon=400,
            faults=POISON,
            watcher=True,
            watcher_interval=10,
        )
    )
    claims = r.events[r.events.kind == "claim"]
    assert claims["attempt"].tolist() == list(range(1, 26))
    assert r.table_jobs[["status", "attempts"]].values.tolist() == [["Dead", 25]]


def test_attempts_beyond_max_is_reported():
    """The invariant itself: the same run judged against a cap of 2 has one claim too many."""
    r = run(
        scripted(
            work=2,
            lease_ttl=3,
            heartbeat_interval=1,
            max_attempts=3,
            horizon=40,
            faults=POISON,
            watcher=True,
            watcher_interval=10,
        )
    )
    stricter = dataclasses.replace(
        r.scenario, policy=dataclasses.replace(r.scenario.policy, max_attempts=2)
    )
    report = check(dataclasses.replace(r, scenario=stricter))
    assert [
        (v.invariant, v.job, v.detail)
        for v in report.violations
        if v.invariant == "attempts_beyond_max"
    ] == [("attempts_beyond_max", 1, "w0 claimed it at 6.008s as attempt 3; max_attempts is 2")]


# ---- 2. a job held forever -----------------------------------------------------------------------


def test_a_job_held_by_a_dead_owner_past_the_horizon_is_reported():
    """lease_ttl = 1e9 is a lock: the job w0 held when it crashed at 3 s can never be taken again.
    The other jobs complete; the checker reports job 1 as stuck instead of saying "all hold"."""
    r = run(
        scripted(
            jobs=3,
            workers=2,
            work=5,
            lease_ttl=1e9,
            heartbeat=False,
            horizon=200,
            faults=Faults(
                crashes=(ScriptedCrash(at=3.0, job=1),), restart_delay=Dist.constant(1.0)
            ),
        )
    )
    assert timeline(r, skip=QUIET + ("effect",)) == [
        (0.002, "claim", "w0", 1, 1),
        (0.002, "claim_lost", "w1", 1, None),
        (0.004, "claim", "w1", 2, 1),
        (3.0, "crash", "w0", 1, 1),
        (4.002, "claim", "w0", 3, 1),
        (5.007, "complete", "w1", 2, 1),
        (9.005, "complete", "w0", 3, 1),
    ]
    report = r.check()
    assert not report.ok
    assert [(v.invariant, v.job, v.detail) for v in report.violations] == [
        (
            "stuck_processing",
            1,
            "w0 crashed holding it at 3.000s; its lease runs to 1e+09s, past the horizon "
            "(200s): still Processing, held by a dead owner",
        )
    ]


def test_a_crash_just_before_the_horizon_is_not_a_finding():
    """The lease outlives the horizon, but no recovery could have happened in the time left."""
    r = run(
        scripted(
            jobs=1,
            work=50,
            lease_ttl=30,
            horizon=40,
            faults=Faults(crashes=(ScriptedCrash(at=35.0, job=1),)),
        )
    )
    assert r.table_jobs["status"].tolist() == ["Processing"]
    assert r.check().counts() == {}


# ---- 3. graphile-worker v0.16+ -------------------------------------------------------------------


def test_graphile_worker_016_frees_a_stale_lock_only_by_its_periodic_reset():
    """Since v0.16 get_job takes only is_available jobs: the crashed worker's job waits for the
    reset tick after its 4 h lock went stale (ticks every 540 s: 14580 s), not the next poll after
    14400 s as before v0.16."""
    crash = Faults(crashes=(ScriptedCrash(at=5.0, job=1),), restart_delay=Dist.constant(30.0))
    now = run(_peer("graphile-worker", horizon=16000.0).replace(faults=crash))
    before = run(
        _peer("graphile-worker", horizon=16000.0, **{"policy.claim_takes_expired": True}).replace(
            faults=crash
        )
    )
    assert preset("graphile-worker").policy.claim_takes_expired is False
    assert timeline(now, skip=QUIET + ("effect", "complete")) == [
        (0.001, "claim", "w0", 1, 1),
        (5.0, "crash", "w0", 1, 1),
        (14580.028, "requeue", "watcher", 1, 1),
        (14580.27, "claim", "w0", 1, 2),
    ]
    assert [t for t, kind, *_ in timeline(before) if kind == "claim"] == [0.001, 14400.18]


# ---- 4. the watcher's own read-then-write race ---------------------------------------------------


def test_a_watcher_that_reads_then_writes_requeues_a_job_that_completed_in_between():
    """River #1302 (fixed by PR #1373): the rescuer selected the stuck job at 3.002, the job
    completed at 4.004, the rescue UPDATE by id at 5.003 moved it back to Pending: it ran again."""
    r = run(
        scripted(
            work=4,
            lease_ttl=2,
            heartbeat=False,
            watcher=True,
            watcher_interval=1.0,
            watcher_gap=2.0,
            claim="skip_locked",
            claim_takes_expired=False,
            fencing=False,
            horizon=10,
        )
    )
    assert timeline(r) == [
        (0.001, "claim", "w0", 1, 1),
        (2.001, "psp_charge", "w0", 1, 1),
        (4.004, "effect", "w0", 1, 1),
        (4.004, "complete", "w0", 1, 1),
        (5.003, "requeue", "watcher", 1, 1),  # read at 3.002, written 2 s later: the overwrite
        (5.006, "claim", "w0", 1, 2),
        (7.006, "psp_charge", "w0", 1, 2),
        (9.009, "effect", "w0", 1, 2),
        (9.009, "complete", "w0", 1, 2),
    ]
    report = r.check()
    assert report.counts() == {
        "terminal_overwritten": 1,
        "duplicate_db_effect": 1,
        "duplicate_external_effect": 1,
    }
    assert [v.detail for v in report.violations if v.invariant == "terminal_overwritten"] == [
        "w0 made it Completed at 4.004s; watcher made it Pending at 5.003s"
    ]


def test_the_one_statement_watcher_never_touches_a_completed_job():
    r = run(
        scripted(
            work=4,
            lease_ttl=2,
            heartbeat=False,
            watcher=True,
            watcher_interval=1.0,
            claim="skip_locked",
            claim_takes_expired=False,
            fencing=False,
            horizon=10,
        )
    )
    assert [e for e in timeline(r) if e[1] in ("requeue", "complete")] == [
        (2.003, "requeue", "watcher", 1, 1),
        (4.004, "complete", "w0", 1, 1),
    ]
    assert "terminal_overwritten" not in r.check().counts()


# ---- 5. a worker-side deadline that frees the slot but not the work ------------------------------


def test_a_worker_side_deadline_retries_the_job_and_drops_the_late_result():
    """pg-boss #555: work() fails the job at expireIn and fetches again; the handler keeps running,
    so the retry runs in parallel with it and both charge the card; a handler past its deadline
    has lost the race, so pg-boss never calls complete() for it (manager.ts #processJobs): its
    result is dropped. Every attempt takes 8 s against a 5 s deadline: the third fails for good."""
    r = run(fidelity_scenarios()["deadline"])  # two workers, unfenced, 3 attempts
    assert r.scenario.policy.deadline_action == "drop"  # the default
    assert timeline(r) == [
        (0.001, "claim", "w0", 1, 1),
        (4.001, "psp_charge", "w0", 1, 1),
        (5.002, "deadline", "w0", 1, 1),  # failed for a retry on a fresh connection
        (5.003, "claim", "w0", 1, 2),  # the freed slot fetches the retry at once
        (8.001, "late_result", "w0", 1, 1),  # the first handler did not stop; nothing is sent
        (9.003, "psp_charge", "w0", 1, 2),
        (10.004, "deadline", "w0", 1, 2),
        (10.005, "claim", "w0", 1, 3),
        (13.003, "late_result", "w0", 1, 2),
        (14.005, "psp_charge", "w0", 1, 3),
        (15.006, "deadline", "w0", 1, 3),  # out of attempts: Dead
        (18.005, "late_result", "w0", 1, 3),
    ]
    assert [e.detail for e in r.log if e.kind == "deadline"] == ["Pending", "Pending", "Dead"]
    assert r.check().counts() == {"duplicate_external_effect": 1}  # the card, charged 3 times
    assert r.table_ledger.empty
    assert preset("pg-boss").policy.deadline == preset("pg-boss").policy.lease_ttl == 900
    assert preset("pg-boss").policy.deadline_action == "drop"


def test_a_deadline_that_completes_late_lets_the_first_handler_complete_the_retry():
    """deadline_action = complete: the handler past its deadline completes the job its retry now
    holds (unfenced), and both commit their effects."""
    r = run(fidelity_scenarios()["deadline, completed late"])
    assert timeline(r) == [
        (0.001, "claim", "w0", 1, 1),
        (4.001, "psp_charge", "w0", 1, 1),
        (5.002, "deadline", "w0", 1, 1),
        (5.003, "claim", "w0", 1, 2),
        (8.004, "effect", "w0", 1, 1),  # the first handler did not stop
        (8.004, "complete", "w0", 1, 1),
        (9.003, "psp_charge", "w0", 1, 2),
        (10.004, "deadline", "w0", 1, 2),  # the job is Completed already: nothing to fail
        (13.006, "effect", "w0", 1, 2),
        (13.006, "complete", "w0", 1, 2),
    ]
    assert [e.detail for e in r.log if e.kind == "deadline"] == ["Pending", None]
    assert r.check().counts() == {
        "non_owner_completion": 1,
        "duplicate_db_effect": 1,
        "duplicate_external_effect": 1,
    }


def test_a_deadline_that_cancels_stops_the_handler_before_it_fails_the_job():
    """deadline_action = cancel (River's JobTimeout cancels the job's context): the handler stops
    at the deadline, after its PSP call (that charge stays made), and nothing of it comes later."""
    r = run(fidelity_scenarios()["deadline, cancelled"])
    assert timeline(r) == [
        (0.001, "claim", "w0", 1, 1),
        (4.001, "psp_charge", "w0", 1, 1),
        (5.001, "cancel", "w0", 1, 1),
        (5.002, "deadline", "w0", 1, 1),
        (5.003, "claim", "w0", 1, 2),
        (9.003, "psp_charge", "w0", 1, 2),
        (10.003, "cancel", "w0", 1, 2),
        (10.004, "deadline", "w0", 1, 2),
        (10.005, "claim", "w0", 1, 3),
        (14.005, "psp_charge", "w0", 1, 3),
        (15.005, "cancel", "w0", 1, 3),
        (15.006, "deadline", "w0", 1, 3),
    ]
    assert r.check().counts() == {"duplicate_external_effect": 1}
    assert r.table_jobs["status"].tolist() == ["Dead"] and r.table_ledger.empty


def test_a_cancelled_handler_s_open_transaction_rolls_back():
    """A deadline reached while the handler's completing transaction is open (its ledger row
    written at 5.002, the completion not yet sent) leaves no ledger row: cancelling closes the
    handler's connection, and the server rolls the transaction back."""
    r = run(fidelity_scenarios()["deadline, cancelled mid-transaction"])
    assert timeline(r) == [
        (0.001, "claim", "w0", 1, 1),
        (2.501, "psp_charge", "w0", 1, 1),
        (5.0025, "cancel", "w0", 1, 1),  # BEGIN and the ledger insert (5.002) are in flight
        (5.0035, "deadline", "w0", 1, 1),
    ]
    assert r.table_ledger.empty and r.table_jobs["status"].tolist() == ["Dead"]


def test_a_crash_takes_the_handlers_past_their_deadline_with_it():
    crash = Faults(crashes=(ScriptedCrash(at=3.0, worker=0),), restart_delay=Dist.constant(100.0))
    r = run(with_deadline(deadline=2, max_attempts=1, faults=crash))
    assert timeline(r) == [
        (0.001, "claim", "w0", 1, 1),
        (2.002, "deadline", "w0", 1, 1),  # out of attempts: Dead
        (3.0, "crash", "w0", None, None),
    ]
    assert r.table_jobs["status"].tolist() == ["Dead"] and r.table_ledger.empty


def test_a_paused_worker_does_nothing_until_its_pause_ends_not_even_its_deadline():
    """pg-boss's deadline is a timer in the worker's own process: a stop-the-world pause (GC,
    SIGSTOP) freezes it with everything else, so an overdue deadline fires when the pause ends.
    Here it is due at 5.001, inside w0's pause from 2 to 12: the job is failed at 12.001 and
    taken again at 12.002, not failed and claimed in the middle of the pause."""
    r = run(with_deadline(faults=PAUSED))
    assert timeline(r) == [
        (0.001, "claim", "w0", 1, 1),
        (2.0, "pause_start", "w0", None, None),
        (12.0, "pause_end", "w0", None, None),
        (12.001, "deadline", "w0", 1, 1),  # overdue since 5.001: fails the job once thawed
        (12.002, "claim", "w0", 1, 2),
        (14.001, "psp_charge", "w0", 1, 1),  # the first handler: 4 s of work around the pause
        (16.002, "psp_charge", "w0", 1, 2),
        (17.003, "deadline", "w0", 1, 2),
        (17.004, "claim", "w0", 1, 3),
        (18.001, "late_result", "w0", 1, 1),  # past its deadline: the result is dropped
    ]
    assert [e.detail for e in r.log if e.kind == "deadline"] == ["Pending", "Pending"]
    leases = r.leases[["attempt", "start", "end", "end_reason", "outcome"]].round(6)
    assert leases.values.tolist() == [
        [1, 0.001, 12.001, "released", "deadline"],
        [2, 12.002, 17.003, "released", "deadline"],
        [3, 17.004, 20.0, "open", "open"],  # attempt 1's late refusal is not attempt 3's end
    ]
    assert r.check().counts() == {"duplicate_external_effect": 1}


def test_a_handler_past_its_deadline_is_not_mistaken_for_the_later_lease_of_its_worker():
    """The worker holds attempt 2 of job 1 when its first handler completes attempt 1 (8.004):
    that record belongs to attempt 1's lease, long released by the deadline, so attempt 2's lease
    ends at its own deadline (10.004), and no lease ends before it starts."""
    r = run(fidelity_scenarios()["deadline, completed late"])
    leases = r.leases[["worker", "attempt", "start", "end", "end_reason", "outcome"]].round(6)
    assert leases.values.tolist() == [
        ["w0", 1, 0.001, 5.002, "released", "deadline"],
        ["w0", 2, 5.003, 10.004, "released", "deadline"],
    ]


def test_a_job_its_deadline_failed_for_good_is_not_reported_stuck():
    """The lease lapses at 3.001 and the deadline fails the job at 5.002, out of attempts: it is
    Dead, not stuck in Processing (the stuck check counted only claims, requeues and completions
    as a job moving on)."""
    r = run(with_deadline(lease_ttl=3, max_attempts=1, horizon=30))
    assert timeline(r) == [
        (0.001, "claim", "w0", 1, 1),
        (4.001, "psp_charge", "w0", 1, 1),
        (5.002, "deadline", "w0", 1, 1),
        (8.001, "late_result", "w0", 1, 1),
    ]
    assert [e.detail for e in r.log if e.kind == "deadline"] == ["Dead"]
    assert r.table_jobs["status"].tolist() == ["Dead"]
    assert r.check().counts() == {}


def test_the_issue_s_paused_zombie_with_a_deadline_has_no_false_findings():
    """Issue #21: `run gc-pause-zombie --set policy.deadline=10` had the paused w0 failing and
    claiming jobs during its 45 s pause, leases ending before they started and 28 false stuck
    jobs. w0 now records nothing from 6 s to 51 s; at 51.002 its deadline finds the job gone
    (the watcher requeued it at 25.458); one false expiry, w0's lease lapsing in its pause."""
    r = run("gc-pause-zombie", **{"policy.deadline": 10})
    w0 = [(round(e.t, 6), e.kind) for e in r.log if e.worker == "w0" and 6.0 <= e.t < 51.01]
    assert w0 == [
        (6.0, "pause_start"),
        (51.0, "pause_end"),
        (51.002, "deadline"),
        (51.002, "heartbeat_rejected"),
        (51.006, "claim"),
    ]
    assert [e.detail for e in r.log if e.kind == "deadline" and e.worker == "w0"][0] is None
    assert (r.leases["end"] >= r.leases["start"]).all()
    assert r.summary["false_expiries"] == 1
    assert r.leases.loc[r.leases["false_expiry"], ["worker", "attempt"]].values.tolist() == [
        ["w0", 1]
    ]
    assert r.check().counts() == {"duplicate_external_effect": 2}  # the preset's expectation


# ---- 6. retry backoff after rescue; graceful shutdown --------------------------------------------


@pytest.mark.parametrize(("backoff", "reclaimed"), [(0.0, 3.004), (10.0, 13.014)])
def test_a_rescued_job_waits_for_its_retry_backoff(backoff, reclaimed):
    """River's rescuer makes a stuck job retryable at the client's retry policy, attempt^4
    seconds: with retry_backoff = 10 the job requeued at 3.002 is due at 13.002, and idle w1
    takes it then."""
    r = run(
        scripted(
            workers=2,
            work=4,
            lease_ttl=2,
            heartbeat=False,
            watcher=True,
            watcher_interval=3.0,
            retry_backoff=backoff,
            claim="skip_locked",
            claim_takes_expired=False,
            max_attempts=3,
            horizon=15,
        )
    )
    claims = [e for e in timeline(r) if e[1] in ("requeue", "claim")]
    assert claims[:3] == [
        (0.001, "claim", "w0", 1, 1),
        (3.002, "requeue", "watcher", 1, 1),
        (reclaimed, "claim", "w1", 1, 2),
    ]
    assert preset("river").policy.retry_backoff == 1.0


@pytest.mark.parametrize(("shutdown", "reclaimed"), [("crash", 30.034), ("graceful", 1.005)])
def test_a_graceful_shutdown_releases_the_job_a_crash_holds_it(shutdown, reclaimed):
    """Solid Queue releases claimed executions on shutdown: the job is claimable at once, where a
    crashed worker's job waits for its lease (30 s) to expire."""
    r = run(
        scripted(
            workers=2,
            work=4,
            horizon=40,
            faults=Faults(
                crashes=(ScriptedCrash(at=1.0, worker=0),),
                shutdown=shutdown,
                restart_delay=Dist.constant(100.0),
            ),
        )
    )
    stop = [e for e in timeline(r) if e[1] in ("crash", "shutdown", "release", "claim")]
    if shutdown == "graceful":
        assert stop == [
            (0.002, "claim", "w0", 1, 1),
            (1.0, "shutdown", "w0", 1, 1),
            (1.001, "release", "w0", 1, 1),
            (1.005, "claim", "w1", 1, 2),
        ]
        assert r.recoveries.empty  # a graceful stop is not a crash
    else:
        assert stop == [
            (0.002, "claim", "w0", 1, 1),
            (1.0, "crash", "w0", 1, 1),
            (reclaimed, "claim", "w1", 1, 2),
        ]
    assert r.table_jobs[["status", "attempts"]].values.tolist() == [["Completed", 2]]
    assert r.leases["end_reason"].tolist() == [
        "crashed" if shutdown == "crash" else "released",
        "completed",
    ]


def test_new_settings_are_validated():
    for key, value, message in [
        ("policy.watcher_gap", -1.0, "policy.watcher_gap: must be >= 0 seconds"),
        ("policy.deadline", -1.0, "policy.deadline: must be >= 0 seconds"),
        ("policy.retry_backoff", 1e6, "policy.retry_backoff: must be >= 0 seconds, with"),
        ("faults.shutdown", "polite", "faults.shutdown: must be one of crash, graceful"),
    ]:
        with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
            scripted().with_overrides({key: value})


# ---- 7. finished and failed ----------------------------------------------------------------------


@pytest.mark.parametrize("fencing", [False, True])
def test_solid_queue_pruning_a_live_worker_with_a_stale_heartbeat(fencing):
    """Solid Queue #589 (fixed in v1.5.0 by #761): a DB hiccup (a partition that makes w0's
    statements hang from 100 s to 700 s) stales w0's heartbeat; the prune at 600 s fails its job
    (Dead); w0, alive, then finishes it. Before v1.5.0 (fencing = false) both went through: the job
    ended failed AND finished. The preset follows v1.5.0: the late finish is refused."""
    r = run(
        _peer(
            "solid-queue",
            horizon=1000.0,
            **{"policy.fencing": fencing, "workload.processing": 350.0, "policy.workers": 1},
        ).replace(faults=HICCUP)
    )
    assert preset("solid-queue").policy.fencing is True
    finish = (
        (700.002, "complete", "w0", 1, 1)
        if not fencing
        else (700.002, "complete_rejected", "w0", 1, 1)
    )
    assert timeline(r, skip=QUIET + ("effect", "partition_start", "partition_end")) == [
        (0.001, "claim", "w0", 1, 1),
        (
            600.003,
            "requeue",
            "watcher",
            1,
            1,
        ),  # the lease (last renewed at 60.002) ran out at 360.002
        finish,
    ]
    assert [e.detail for e in r.log if e.kind == "requeue"] == ["Dead"]
    if fencing:
        assert r.table_jobs["status"].tolist() == ["Dead"] and r.check().counts() == {}
    else:
        assert r.table_jobs["status"].tolist() == ["Completed"]
        assert [v.detail for v in r.check().violations] == [
            "watcher made it Dead at 600.003s; w0 made it Completed at 700.002s"
        ]
