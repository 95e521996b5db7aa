"""Small scripted scenarios with constant times, for exact-timeline tests."""

from sim.dists import Dist
from sim.scenario import (
    CrashPoint,
    Faults,
    Policy,
    Scenario,
    ScriptedCrash,
    ScriptedOutage,
    Workload,
)

LATENCY = 0.001


def scripted(
    *,
    jobs=1,
    work=25.0,
    psp_at=0.5,
    workers=1,
    horizon=120.0,
    faults=None,
    workload=None,
    **policy,
) -> Scenario:
    """Constant work and latency, no random phases: every time in the log is predictable."""
    defaults = dict(
        workers=workers,
        poll_interval=1.0,
        lease_ttl=30.0,
        heartbeat_interval=10.0,
        watcher=False,
        watcher_interval=30.0,
        random_phase=False,
        dedup=False,
    )
    return Scenario(
        name="scripted",
        workload=Workload(
            jobs=jobs,
            processing=Dist.constant(work),
            psp_at=psp_at,
            psp_call=Dist.constant(0.0),
            statement_latency=Dist.constant(LATENCY),
            **(workload or {}),
        ),
        policy=Policy(**{**defaults, **policy}),
        faults=faults or Faults(),
        horizon=horizon,
    )


def with_deadline(**settings) -> Scenario:
    """pg-boss's worker-side deadline (policy.deadline) at 5 s on an 8 s job: fetch by SKIP LOCKED
    of fresh jobs only, a 900 s lease that outlives everything, no heartbeat, 20 s of run."""
    defaults = dict(
        work=8,
        heartbeat=False,
        claim="skip_locked",
        claim_takes_expired=False,
        lease_ttl=900,
        deadline=5,
        horizon=20,
    )
    return scripted(**{**defaults, **settings})


def paused_zombie(**policy) -> Scenario:
    """w0 paused from 6 s to 51 s in a 20 s job with a 15 s lease: w1 takes the expired lease at
    20.024 and finishes; the zombie thaws and finishes too (refused, if fenced)."""
    pause = Faults(pauses=(ScriptedOutage(worker=0, at=6.0, duration=45.0),))
    settings = dict(psp_at=0.1, lease_ttl=15, heartbeat_interval=5, abandon_on_lost_lease=False)
    return scripted(workers=2, work=20, horizon=80, faults=pause, **{**settings, **policy})


def timeline(run, *, skip=("idle", "watcher_tick", "enqueue", "lock_wait")) -> list[tuple]:
    """(t rounded to the microsecond, kind, worker, job, attempt) of the records that tell the story."""
    return [
        (round(e.t, 6), e.kind, e.worker, e.job, e.attempt) for e in run.log if e.kind not in skip
    ]


# A job that kills its worker every time (tests/model/test_fidelity.py's poison-job tests).
POISON = Faults(
    crash_points=(CrashPoint("after_psp", 1.0, 1000),), restart_delay=Dist.constant(1.0)
)
# A stop-the-world pause of w0 from 2 s to 12 s (a long GC, a SIGSTOP).
PAUSED = Faults(pauses=(ScriptedOutage(worker=0, at=2.0, duration=10.0),))
# Solid Queue #589's DB hiccup: w0's statements hang from 100 s to 700 s.
HICCUP = Faults(
    partitions=(ScriptedOutage(worker=0, at=100.0, duration=600.0),), partition_mode="hang"
)


def fidelity_scenarios() -> dict[str, Scenario]:
    """The scripted runs of tests/model/test_fidelity.py (issue #16), one per failure mode, for the
    memory/PostgreSQL equivalence suite."""
    stop = ScriptedCrash(at=1.0, worker=0)
    return {
        "poison job": scripted(
            work=2,
            lease_ttl=3,
            heartbeat_interval=1,
            max_attempts=3,
            horizon=40,
            faults=POISON,
            watcher=True,
            watcher_interval=10,
        ),
        "held by a dead owner": scripted(
            jobs=3,
            workers=2,
            work=5,
            lease_ttl=1e9,
            heartbeat=False,
            horizon=200,
            faults=Faults(crashes=(ScriptedCrash(at=3.0, job=1),)),
        ),
        "watcher gap": scripted(
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
        ),
        "deadline": with_deadline(workers=2, fencing=False, max_attempts=3),
        "retry backoff": scripted(
            workers=2,
            work=4,
            lease_ttl=2,
            heartbeat=False,
            watcher=True,
            watcher_interval=3.0,
            retry_backoff=10.0,
            claim="skip_locked",
            claim_takes_expired=False,
            max_attempts=3,
            horizon=15,
        ),
        "graceful shutdown": scripted(
            workers=2, work=4, horizon=40, faults=Faults(crashes=(stop,), shutdown="graceful")
        ),
        "finished and failed": scripted(
            work=350,
            lease_ttl=300,
            heartbeat_interval=60,
            watcher=True,
            watcher_interval=300,
            watcher_action="dead",
            max_attempts=1,
            fencing=False,
            claim="skip_locked",
            claim_takes_expired=False,
            horizon=1000,
            faults=HICCUP,
        ),
        "background completion": paused_zombie(completion="background"),
    }
