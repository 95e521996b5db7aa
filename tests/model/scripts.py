"""Small scripted scenarios with constant times, for exact-timeline tests."""

from sim.scenario.dists import Dist
from sim.scenario.settings import (
    LOCK_TTL,
    ClockStep,
    CrashPoint,
    DbClockStep,
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
    """(t rounded to the microsecond, kind, worker, job, attempt) of the records that tell the
    story."""
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
        "deadline, completed late": with_deadline(
            workers=2, fencing=False, max_attempts=3, deadline_action="complete"
        ),
        "deadline, cancelled": with_deadline(
            workers=2, fencing=False, max_attempts=3, deadline_action="cancel"
        ),
        # the deadline falls while the completing transaction is open: cancelling rolls it back
        "deadline, cancelled mid-transaction": with_deadline(
            work=5.0, deadline=5.0015, max_attempts=1, horizon=12, deadline_action="cancel"
        ),
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


def mechanism_scenarios() -> dict[str, Scenario]:
    """The exact-timeline scenarios of issue #25's mechanisms (tests/model/test_clocks.py, ...),
    one per behaviour, for the memory/PostgreSQL equivalence suite."""
    crash_at_205 = crashing(205.0, clock_drift_ppm=50_000)
    return {
        "clock offset": scripted(
            workers=2,
            work=28,
            heartbeat=False,
            watcher=True,
            watcher_interval=5,
            claim_takes_expired=False,
            clock="worker",
            horizon=40,
            faults=Faults(clock_offset=-10.0),
        ),
        "clock drift": scripted(
            work=1000,
            heartbeat_interval=10,
            watcher=True,
            watcher_interval=1,
            claim_takes_expired=False,
            clock="worker",
            horizon=260,
            faults=crash_at_205,
        ),
        "clock step": scripted(
            work=100,
            heartbeat_interval=10,
            watcher=True,
            watcher_interval=1,
            claim_takes_expired=False,
            clock="worker",
            horizon=80,
            faults=Faults(clock_steps=(ClockStep(worker=0, at=50.0, by=-40.0),)),
        ),
        "db clock step forward": db_clock_stepped(60.0),
        "db clock step back": db_clock_stepped(-60.0),
        "two-phase stall check": stalled_at_5(stall_check="two_phase"),
        "stall budget": scripted(
            work=4,
            lease_ttl=3,
            heartbeat_interval=1.5,
            watcher=True,
            watcher_interval=3,
            claim_takes_expired=False,
            stall_check="two_phase",
            max_stalls=1,
            max_attempts=1,
            horizon=40,
            faults=POISON_TWICE,
        ),
        "process prune": process_tracked(faults=CRASH_AT_10, worker_identity="fresh"),
        "process prune fails": process_tracked(faults=CRASH_AT_10, prune_action="dead"),
        "identity reused": process_tracked(
            workers=1, jobs=2, work=20, faults=BACK_AT_15, horizon=120
        ),
        "identity fresh": process_tracked(
            workers=1, jobs=2, work=20, faults=BACK_AT_15, worker_identity="fresh", horizon=120
        ),
        "process paused past stale": process_tracked(
            work=60,
            abandon_on_lost_lease=False,
            faults=Faults(pauses=(ScriptedOutage(worker=0, at=5.0, duration=45.0),)),
            horizon=130,
        ),
        "execution timeout": temporal_like(),
        "execution timeout, no heartbeat": temporal_like(heartbeat=False, lease_ttl=100),
        "execution timeout seen by a heartbeat": temporal_like(watcher_interval=40),
        "rescue job": rescued(),
        "rescue job lost": rescued(faults=LOST_TICK),
        "rescue job behind busy workers": rescued(
            jobs=2,
            horizon=45,
            faults=crashing(2.0),
        ),
        "release lost": prefetched(
            faults=crashing(5.0, shutdown="graceful", release_loss=0.5),
            horizon=40,
        ),
        "prefetch": prefetched(),
        "prefetch, crash": prefetched(faults=CRASH_AT_5),
        "prefetch, graceful shutdown": prefetched(faults=crashing(5.0, shutdown="graceful")),
    }


def db_clock_stepped(by: float) -> Scenario:
    """The database's clock steps by `by` seconds at 45 s (faults.db_clock_steps), the watcher
    ticks every second. Forward: w0 renews its 30 s lease every 10 s (last at 40.006) and w1
    polls. Back: w0 crashes at 42 s, before the step, and is back a second later."""
    step = Faults(db_clock_steps=(DbClockStep(at=45.0, by=by),))
    settings = dict(
        heartbeat_interval=10, watcher=True, watcher_interval=1, claim_takes_expired=False
    )
    if by > 0:
        return scripted(workers=2, work=60, horizon=80, faults=step, **settings)
    crash = crashing(42.0, back_after=1.0, db_clock_steps=step.db_clock_steps)
    return scripted(work=100, horizon=150, faults=crash, **settings)


def crashing(*at: float, worker: int = 0, back_after: float = 1000, **faults) -> Faults:
    """Worker `worker` crashes at each time in `at` and is back `back_after` seconds later."""
    crashes = tuple(ScriptedCrash(at=t, worker=worker) for t in at)
    return Faults(crashes=crashes, restart_delay=Dist.constant(back_after), **faults)


CRASH_AT_5 = crashing(5.0)
# A job that kills its worker at its PSP call, at most 5 times, back a second later.
POISON_TWICE = Faults(
    crash_points=(CrashPoint("after_psp", 1.0, 5),), restart_delay=Dist.constant(1.0)
)


def stalled_at_5(**settings) -> Scenario:
    """w0 claims at 0.002 (20 s lease, renewed every 15 s) and crashes at 5; w1 waits; the watcher
    ticks every 30 s from 0."""
    defaults = dict(
        workers=2,
        work=100,
        lease_ttl=20,
        heartbeat_interval=15,
        watcher=True,
        watcher_interval=30,
        claim_takes_expired=False,
        horizon=70,
        faults=CRASH_AT_5,
    )
    return scripted(**{**defaults, **settings})


def process_tracked(**settings) -> Scenario:
    """Hatchet-like process liveness: each process heartbeats every 4 s and is stale after 30 s;
    no per-job lease (a lock TTL, no job heartbeat); the prune runs every second."""
    defaults = dict(
        workers=2,
        work=100,
        lease_ttl=LOCK_TTL,
        heartbeat=False,
        watcher=True,
        watcher_interval=1,
        claim_takes_expired=False,
        process_heartbeat_interval=4,
        process_stale_after=30,
        horizon=80,
    )
    return scripted(**{**defaults, **settings})


CRASH_AT_10 = crashing(10.0)
BACK_AT_15 = crashing(10.0, back_after=5)


def temporal_like(**settings) -> Scenario:
    """A 40 s activity under a 25 s execution timeout (start-to-close), a 10 s heartbeat timeout
    renewed every 8 s, two workers, the server's timer as a watcher ticking every second."""
    defaults = dict(
        workers=2,
        work=40,
        lease_ttl=10,
        heartbeat_interval=8,
        execution_timeout=25,
        watcher=True,
        watcher_interval=1,
        claim_takes_expired=False,
        horizon=60,
    )
    return scripted(**{**defaults, **settings})


def prefetched(**settings) -> Scenario:
    """Celery-like: two workers prefetching 3 jobs each (one SKIP LOCKED batch claim), three 20 s
    jobs, a 30 s lease never renewed, the watcher every 5 s."""
    defaults = dict(
        workers=2,
        jobs=3,
        work=20,
        prefetch=3,
        claim="skip_locked",
        claim_takes_expired=False,
        lease_ttl=30,
        heartbeat=False,
        watcher=True,
        watcher_interval=5,
        horizon=62,
    )
    return scripted(**{**defaults, **settings})


def rescued(**settings) -> Scenario:
    """procrastinate-like: the watcher's tick is a task of the queue (policy.rescue = job) deferred
    every 5 s; one 30 s job under a 10 s lease renewed every 4 s; w1 crashes at 2 holding it and is
    back a second later."""
    defaults = dict(
        workers=2,
        jobs=1,
        work=30,
        lease_ttl=10,
        heartbeat_interval=4,
        watcher=True,
        watcher_interval=5,
        rescue="job",
        claim_takes_expired=False,
        horizon=25,
        faults=crashing(2.0, worker=1, back_after=1),
    )
    return scripted(**{**defaults, **settings})


# ... and w1 crashes again at 10.0085, halfway through the statement of the tick that would requeue
LOST_TICK = crashing(2.0, 10.0085, worker=1, back_after=1)
