"""Scenario = Workload + Policy + Faults (+ horizon, seed, backend): frozen, validated, TOML
in/out."""

from __future__ import annotations

import dataclasses
import difflib
import os
import tomllib
import warnings
from dataclasses import dataclass, field, fields, replace
from importlib import resources
from pathlib import Path

import tomli_w

from sim.errors import ConfigError
from sim.scenario import limits
from sim.scenario.dists import Dist, decode_utf8
from sim.scenario.fields import LeaseWarning, build, check_types, describe
from sim.scenario.pinned import DbStall, HeartbeatFault, Pinned
from sim.scenario.pinned import rules as schedule_rules
from sim.support.input_files import read_capped

CLAIM_STRATEGIES = ("read_then_write", "conditional_update", "skip_locked", "select_for_update")
ARRIVALS = ("batch", "poisson")
WATCHER_ACTIONS = ("requeue", "dead")
STALL_CHECKS = ("single", "two_phase")
PRUNE_ACTIONS = ("requeue", "dead")
IDENTITIES = ("reused", "fresh")
CLOCKS = ("db", "worker")
PARTITION_MODES = ("fail", "hang")
SHUTDOWNS = ("crash", "graceful")
RESCUES = ("watcher", "job")
COMPLETIONS = ("transaction", "background")
DEADLINE_ACTIONS = ("drop", "complete", "cancel")
CRASH_POINTS = ("after_psp", "after_marker")
CRASH_TARGETS = ("any", "holder")
LOCK_TTL = 1e9  # a lease TTL that stands for a lock: no claim expires within any horizon
INVARIANTS = (
    "lost_job",
    "double_claim",
    "non_owner_completion",
    "duplicate_db_effect",
    "duplicate_external_effect",
    "attempts_not_incremented",
    "stuck_processing",
    "attempts_beyond_max",
    "terminal_overwritten",
)


@dataclass(frozen=True)
class Workload:
    """What arrives and how long it takes."""

    jobs: int = 100  # batch size, or number of arrivals for a Poisson stream
    arrival: str = "batch"  # batch: all at t=0 | poisson: at `rate` jobs per second
    rate: float = 1.0
    processing: Dist = Dist.constant(2.0)  # total work per job, excluding the PSP call
    psp_at: float = 0.5  # fraction of the work done before the PSP call
    psp_call: Dist = Dist.constant(0.2)  # duration of the external PSP call
    statement_latency: Dist = Dist.constant(0.002)  # one DB round trip
    duplicate_delivery: float = 0.0  # probability an event is delivered (enqueued) twice
    redelivery_delay: Dist = Dist.constant(0.0)
    payload_mismatch: float = 0.0  # probability a redelivery carries a different payload

    def __post_init__(self):
        check_types(self, "workload.")


@dataclass(frozen=True)
class Policy:
    """How the queue hands out and recovers work."""

    workers: int = 4
    poll_interval: float = 1.0  # idle workers poll this often, each with a random phase
    claim: str = "conditional_update"
    claim_takes_expired: bool = (
        True  # the seed's claim also takes Processing jobs whose lease expired
    )
    candidates: int = 1  # how many candidate ids a claim reads before trying them
    # > 1: a claim takes up to this many jobs at once (Celery's prefetch, SQS's
    # MaxNumberOfMessages; claim = skip_locked): every lease starts at the claim, while the jobs
    # wait in the worker's buffer
    prefetch: int = 1
    select_to_update_gap: float = 0.0  # application time between the read and the write of a claim
    lease_ttl: float = 30.0
    heartbeat: bool = True
    heartbeat_interval: float = 10.0
    watcher: bool = True
    watcher_interval: float = 30.0
    watcher_action: str = "requeue"  # requeue (Dead at max_attempts) | dead (every expired job)
    watcher_batch: int = 1000
    # > 0: the watcher reads stuck jobs, then UPDATEs each by id this much later (read-then-write)
    watcher_gap: float = 0.0
    # watcher: a process of its own ticks every watcher_interval | job: the tick is a task of the
    # queue a worker runs between jobs (procrastinate #1408): it waits while every worker is busy or
    # paused, and a worker that crashes running it loses that tick
    rescue: str = "watcher"
    # single: each tick requeues what has expired | two_phase: a tick reclaims the jobs the previous
    # tick marked whose lease is still expired, then marks every Processing job (BullMQ)
    stall_check: str = "single"
    # None: a stalled job's recovery counts against max_attempts only | n: a stall budget apart
    # from the attempts (BullMQ's maxStalledCount, Hatchet's internal retries): the (n + 1)-th stall
    # kills the job, and stall recoveries do not use up its max_attempts
    max_stalls: int | None = None
    # > 0: process liveness. Each worker process registers a row and renews its heartbeat_at this
    # often (not per job); the watcher prunes processes silent for process_stale_after seconds and
    # moves the Processing jobs of owners without a live row: requeue (a stall: max_stalls counts
    # it) or dead (Solid Queue fails them)
    process_heartbeat_interval: float = 0.0
    process_stale_after: float = 30.0
    prune_action: str = "requeue"
    # reused: a restarted worker keeps its name, so its process row looks alive again and the jobs
    # its previous life held are never pruned (a restarted pod with the same id, procrastinate
    # #1518) | fresh: it comes back as a new process, w0.1, w0.2, ... (the log names it so too)
    worker_identity: str = "reused"
    max_attempts: int = (
        25  # every claim path skips a job with this many attempts; the watcher marks it Dead
    )
    retry_backoff: float = (
        0.0  # a requeued job is due again after retry_backoff x attempts^4 seconds (River's policy)
    )
    # > 0: the worker fails its job for a retry after this long and moves on; the handler runs on
    deadline: float = 0.0
    # what the worker does with a handler still running at its deadline (policy.deadline > 0):
    # drop: it fails the attempt, the handler runs on (its PSP call, its own transaction) and its
    # late result is dropped, no completion sent (pg-boss's work() races the handler against
    # expireInSeconds; Temporal's SDK logs "Activity complete after timeout" and reports nothing) |
    # complete: the handler runs on and completes the job late, as if nothing happened | cancel:
    # the handler is stopped at the deadline (a context or signal it honours: River cancels the
    # job's context at JobTimeout), its open transaction rolled back, and the attempt failed
    deadline_action: str = "drop"
    # > 0: no lease outlives its claim by more than this, heartbeats or not (Temporal's
    # StartToClose, Hatchet's step timeout): an execution timeout apart from the renewable lease
    execution_timeout: float = 0.0
    fencing: bool = True  # completion checks owner + attempt
    # transaction: the effect (ledger row) and the completion commit together (the seed's pattern) |
    # background: the handler's effect commits on its own and the completion follows it, outside,
    # as the background completers of River, pg-boss, graphile-worker and Oban: refused, it undoes
    # nothing
    completion: str = "transaction"
    dedup: bool = False  # seed 2: marker + ledger + completion in one transaction
    idempotency_key: bool = False  # PSP calls carry the payment's event id
    abandon_on_lost_lease: bool = True  # a rejected heartbeat makes the worker drop the job
    clock: str = "db"  # db: every statement uses the DB clock | worker: each worker's own clock
    random_phase: bool = True  # idle polls and watcher ticks start at a random phase; false: at t=0

    def __post_init__(self):
        check_types(self, "policy.")

    @property
    def sweeps_leases(self) -> bool:
        """Does the watcher sweep expired leases? Not under process liveness when leases cannot
        expire (a lock TTL and no execution timeout): then only the process prune recovers."""
        return not (
            self.process_heartbeat_interval
            and self.lease_ttl >= LOCK_TTL
            and not self.execution_timeout
        )

    @property
    def claim_cap(self) -> int:
        """The most leases a job may have: max_attempts, plus max_stalls recoveries from stalls."""
        return self.max_attempts + (self.max_stalls or 0)


@dataclass(frozen=True)
class ScriptedCrash:
    """Crash `worker` at `at`, or whichever worker holds a lease on `job` then (give one of the
    two)."""

    at: float
    worker: int | None = None
    job: int | None = None

    def __post_init__(self):
        check_types(self, "crash.")


@dataclass(frozen=True)
class ScriptedOutage:
    """A stop-the-world pause or a worker<->DB partition at a given time."""

    worker: int
    at: float
    duration: float

    def __post_init__(self):
        check_types(self, "outage.")


@dataclass(frozen=True)
class CrashPoint:
    """Crash a worker when it reaches `point`, with `probability`, at most `limit` times in the
    run."""

    point: str
    probability: float = 1.0
    limit: int = 1

    def __post_init__(self):
        check_types(self, "crash_point.")


@dataclass(frozen=True)
class ClockStep:
    """Worker `worker`'s clock jumps by `by` seconds at `at` (an NTP step; negative: backwards)."""

    worker: int
    at: float
    by: float

    def __post_init__(self):
        check_types(self, "clock_step.")


@dataclass(frozen=True)
class DbClockStep:
    """The database's clock jumps by `by` seconds at `at` (an NTP step on its host, a failover to a
    replica whose clock differs; negative: backwards): the bound now of every statement that reads
    the database's time jumps with it, and so does every deadline compared with it."""

    at: float
    by: float

    def __post_init__(self):
        check_types(self, "db_clock_step.")


@dataclass(frozen=True)
class Faults:
    """What goes wrong: crashes, pauses, heartbeat trouble, partitions, clock skew."""

    crash_rate: float = 0.0  # crashes per worker-hour
    # any: each worker crashes on its own Poisson clock whatever it is doing | holder: one pool-wide
    # Poisson clock at crash_rate x workers per hour, each tick crashes a worker holding a job
    # (chosen uniformly among the holders; a tick with no holder crashes nobody), like `kill` of a
    # job holder
    crash_target: str = "any"
    crashes: tuple[ScriptedCrash, ...] = ()
    restart_delay: Dist = Dist.constant(5.0)
    pause_rate: float = 0.0  # stop-the-world pauses per worker-hour
    pause_duration: Dist = Dist.constant(1.0)
    pauses: tuple[ScriptedOutage, ...] = ()
    heartbeat_loss: float = 0.0  # probability a heartbeat never reaches the DB
    heartbeat_delay: Dist = Dist.constant(0.0)  # extra delay before a heartbeat reaches the DB
    partition_rate: float = 0.0  # worker<->DB partitions per worker-hour
    partition_duration: Dist = Dist.constant(10.0)
    partitions: tuple[ScriptedOutage, ...] = ()
    partition_mode: str = "fail"  # fail: DB calls error out | hang: they wait until healed
    crash_points: tuple[CrashPoint, ...] = ()
    clock_skew: float = (
        0.0  # standard deviation (s) of worker clock offsets when policy.clock = worker
    )
    # how crashes stop a worker: crash (its lease stays) | graceful (it releases its job first)
    shutdown: str = "crash"
    # probability that a graceful release never reaches the database (kombu #1835): the job stays
    # leased to the stopped worker until the watcher requeues it
    release_loss: float = 0.0
    # with policy.clock = worker: every worker clock is ahead of the database's by this much (s;
    # negative: behind), runs clock_drift_ppm parts per million fast (negative: slow) from t = 0,
    # and takes its scripted clock_steps; the worker stamps lease expiry, heartbeats and backoff
    # with it
    clock_offset: float = 0.0
    clock_drift_ppm: float = 0.0
    clock_steps: tuple[ClockStep, ...] = ()
    # the database's own clock steps (whatever policy.clock): the watcher, the producer and every
    # worker on the database's clock bind the stepped time
    db_clock_steps: tuple[DbClockStep, ...] = ()
    # scripted database stalls and heartbeat faults (pinned.py): what sim hunt searches over
    db_stalls: tuple[DbStall, ...] = ()
    heartbeat_faults: tuple[HeartbeatFault, ...] = ()

    def __post_init__(self):
        check_types(self, "faults.")


@dataclass(frozen=True)
class Scenario:
    name: str = "custom"
    description: str = ""
    workload: Workload = field(default_factory=Workload)
    policy: Policy = field(default_factory=Policy)
    faults: Faults = field(default_factory=Faults)
    horizon: float = 600.0  # simulated seconds
    seed: int = 1
    backend: str = "memory"
    record_heartbeats: bool = True  # False drops heartbeat records from the log for big runs
    expect: tuple[str, ...] = ()  # invariant violations this scenario exists to show
    pinned: Pinned | None = None  # draws fixed by an explicit schedule (pinned.py; sim hunt)

    def __post_init__(self):
        check_types(self, "")

    def with_overrides(self, assignments: dict[str, object]) -> Scenario:
        """A copy with dotted keys replaced, e.g. {"policy.lease_ttl": 20}; validated."""
        data = to_dict(self)
        for dotted, value in assignments.items():
            deep = limits.nesting_problem(value, str(dotted))
            if deep:
                raise ConfigError(deep)
            _assign(data, dotted, value)
        return from_dict(data)

    def replace(self, **sections) -> Scenario:
        """A copy with whole fields or sections replaced, e.g. replace(seed=2)."""
        return validate(replace(self, **sections))


# ---- validation ---------------------------------------------------------------------------------


def validate(scenario: Scenario) -> Scenario:
    """Raise ConfigError (one line) for values a run cannot use; warn for risky ones.

    Types were checked when the scenario was built; here: ranges, the limits of sim.scenario.limits
    (time values a timestamptz holds on both backends, sizes a run can simulate) and cross-field
    rules.
    """
    if not isinstance(scenario, Scenario):
        raise ConfigError(
            f"scenario: expected a Scenario, a preset name or a TOML path, got {describe(scenario)}"
        )
    w, p, f = scenario.workload, scenario.policy, scenario.faults
    rules = [
        (0 < scenario.horizon, "horizon", "must be > 0 seconds"),
        (scenario.seed >= 0, "seed", "must be a whole number >= 0"),
        (
            scenario.seed <= limits.MAX_SEED,
            "seed",
            f"must be at most {limits.MAX_SEED} (a 64-bit integer)",
        ),
        (scenario.backend in ("memory", "postgres"), "backend", "must be memory or postgres"),
        (0 <= w.jobs <= limits.MAX_JOBS, "workload.jobs", f"must be from 0 to {limits.MAX_JOBS:,}"),
        (w.arrival in ARRIVALS, "workload.arrival", f"must be one of {', '.join(ARRIVALS)}"),
        (w.rate > 0, "workload.rate", "must be > 0 jobs per second"),
        (0 <= w.psp_at <= 1, "workload.psp_at", "must be a fraction between 0 and 1"),
        (
            0 <= w.duplicate_delivery <= 1,
            "workload.duplicate_delivery",
            "must be a probability between 0 and 1",
        ),
        (
            0 <= w.payload_mismatch <= 1,
            "workload.payload_mismatch",
            "must be a probability between 0 and 1",
        ),
        (
            1 <= p.workers <= limits.MAX_WORKERS,
            "policy.workers",
            f"must be from 1 to {limits.MAX_WORKERS:,}",
        ),
        (p.poll_interval > 0, "policy.poll_interval", "must be > 0 seconds"),
        (
            p.claim in CLAIM_STRATEGIES,
            "policy.claim",
            f"must be one of {', '.join(CLAIM_STRATEGIES)}",
        ),
        (
            1 <= p.candidates <= limits.MAX_CANDIDATES,
            "policy.candidates",
            f"must be from 1 to {limits.MAX_CANDIDATES:,}",
        ),
        (p.select_to_update_gap >= 0, "policy.select_to_update_gap", "must be >= 0 seconds"),
        (
            1 <= p.prefetch <= limits.MAX_CANDIDATES,
            "policy.prefetch",
            f"must be from 1 to {limits.MAX_CANDIDATES:,}",
        ),
        (
            p.prefetch == 1 or p.claim == "skip_locked",
            "policy.prefetch",
            "a batch claim is one SKIP LOCKED statement: set policy.claim = skip_locked",
        ),
        (p.lease_ttl > 0, "policy.lease_ttl", "must be > 0 seconds"),
        (p.heartbeat_interval > 0, "policy.heartbeat_interval", "must be > 0 seconds"),
        (p.watcher_interval > 0, "policy.watcher_interval", "must be > 0 seconds"),
        (
            p.watcher_action in WATCHER_ACTIONS,
            "policy.watcher_action",
            f"must be one of {', '.join(WATCHER_ACTIONS)}",
        ),
        (
            1 <= p.watcher_batch <= limits.MAX_BATCH,
            "policy.watcher_batch",
            f"must be from 1 to {limits.MAX_BATCH:,}",
        ),
        (
            1 <= p.max_attempts <= limits.MAX_BATCH,
            "policy.max_attempts",
            f"must be from 1 to {limits.MAX_BATCH:,}",
        ),
        (p.watcher_gap >= 0, "policy.watcher_gap", "must be >= 0 seconds"),
        (p.rescue in RESCUES, "policy.rescue", f"must be one of {', '.join(RESCUES)}"),
        (
            p.rescue == "watcher" or p.watcher,
            "policy.rescue",
            "job runs the watcher's tick as a job: set policy.watcher = true",
        ),
        (
            p.stall_check in STALL_CHECKS,
            "policy.stall_check",
            f"must be one of {', '.join(STALL_CHECKS)}",
        ),
        (
            not (p.stall_check == "two_phase" and p.watcher_gap),
            "policy.watcher_gap",
            "must be 0 with policy.stall_check = two_phase (its passes re-check every row)",
        ),
        (
            p.max_stalls is None or 0 <= p.max_stalls <= limits.MAX_BATCH,
            "policy.max_stalls",
            f"must be from 0 to {limits.MAX_BATCH:,} (or absent: stalls count as attempts)",
        ),
        (
            p.max_stalls is None or p.stall_check == "two_phase" or p.process_heartbeat_interval,
            "policy.max_stalls",
            "counts the stalls a two-phase stall check or a process prune finds: set "
            "policy.stall_check = two_phase or policy.process_heartbeat_interval > 0",
        ),
        (
            p.process_heartbeat_interval >= 0,
            "policy.process_heartbeat_interval",
            "must be >= 0 seconds (0: no process liveness)",
        ),
        (p.process_stale_after > 0, "policy.process_stale_after", "must be > 0 seconds"),
        (
            p.prune_action in PRUNE_ACTIONS,
            "policy.prune_action",
            f"must be one of {', '.join(PRUNE_ACTIONS)}",
        ),
        (
            p.worker_identity in IDENTITIES,
            "policy.worker_identity",
            f"must be one of {', '.join(IDENTITIES)}",
        ),
        (
            0 <= p.retry_backoff
            and p.retry_backoff * min(p.max_attempts, 10**4) ** 4 <= limits.MAX_SECONDS,
            "policy.retry_backoff",
            "must be >= 0 seconds, with retry_backoff x max_attempts^4 at most 1e9 s",
        ),
        (p.deadline >= 0, "policy.deadline", "must be >= 0 seconds (0: no worker-side deadline)"),
        (
            p.deadline_action in DEADLINE_ACTIONS,
            "policy.deadline_action",
            f"must be one of {', '.join(DEADLINE_ACTIONS)}",
        ),
        (
            p.execution_timeout >= 0,
            "policy.execution_timeout",
            "must be >= 0 seconds (0: no execution timeout)",
        ),
        (
            p.completion in COMPLETIONS,
            "policy.completion",
            f"must be one of {', '.join(COMPLETIONS)}",
        ),
        (p.clock in CLOCKS, "policy.clock", f"must be one of {', '.join(CLOCKS)}"),
        (f.crash_rate >= 0, "faults.crash_rate", "must be >= 0 per worker-hour"),
        (
            f.crash_target in CRASH_TARGETS,
            "faults.crash_target",
            f"must be one of {', '.join(CRASH_TARGETS)}",
        ),
        (f.pause_rate >= 0, "faults.pause_rate", "must be >= 0 per worker-hour"),
        (f.partition_rate >= 0, "faults.partition_rate", "must be >= 0 per worker-hour"),
        (
            0 <= f.heartbeat_loss <= 1,
            "faults.heartbeat_loss",
            "must be a probability between 0 and 1",
        ),
        (
            f.partition_mode in PARTITION_MODES,
            "faults.partition_mode",
            f"must be one of {', '.join(PARTITION_MODES)}",
        ),
        (f.clock_skew >= 0, "faults.clock_skew", "must be >= 0 seconds"),
        (
            abs(f.clock_drift_ppm) < limits.MAX_DRIFT_PPM,
            "faults.clock_drift_ppm",
            f"must be between -{limits.MAX_DRIFT_PPM:g} and {limits.MAX_DRIFT_PPM:g} "
            "parts per million",
        ),
        (f.shutdown in SHUTDOWNS, "faults.shutdown", f"must be one of {', '.join(SHUTDOWNS)}"),
        (0 <= f.release_loss <= 1, "faults.release_loss", "must be a probability between 0 and 1"),
        (
            not f.release_loss or f.shutdown == "graceful",
            "faults.release_loss",
            "is the loss of a graceful release: set faults.shutdown = graceful",
        ),
    ]
    times = {
        "horizon": scenario.horizon,
        "policy.poll_interval": p.poll_interval,
        "policy.select_to_update_gap": p.select_to_update_gap,
        "policy.lease_ttl": p.lease_ttl,
        "policy.heartbeat_interval": p.heartbeat_interval,
        "policy.watcher_interval": p.watcher_interval,
        "policy.watcher_gap": p.watcher_gap,
        "policy.deadline": p.deadline,
        "policy.execution_timeout": p.execution_timeout,
        "policy.process_heartbeat_interval": p.process_heartbeat_interval,
        "policy.process_stale_after": p.process_stale_after,
        "faults.clock_skew": f.clock_skew,
        "faults.clock_offset": abs(f.clock_offset),
    }
    for i, crash in enumerate(f.crashes):
        rules.append(
            (
                (crash.worker is None) != (crash.job is None),
                f"faults.crashes[{i}]",
                "give either worker or job, not both"
                if crash.worker is not None
                else "give the worker (an index) or the job it crashes holding, one of them",
            )
        )
        if crash.worker is not None:
            rules.append(
                (
                    0 <= crash.worker < p.workers,
                    f"faults.crashes[{i}].worker",
                    f"must be a worker index 0..{p.workers - 1}",
                )
            )
        if crash.job is not None:
            rules.append(
                (
                    0 <= crash.job <= limits.MAX_SEED,
                    f"faults.crashes[{i}].job",
                    "must be a job id >= 0",
                )
            )
        rules.append((crash.at >= 0, f"faults.crashes[{i}].at", "must be >= 0 seconds"))
        times[f"faults.crashes[{i}].at"] = crash.at
    for section in ("pauses", "partitions"):
        for i, outage in enumerate(getattr(f, section)):
            rules.append(
                (
                    0 <= outage.worker < p.workers,
                    f"faults.{section}[{i}].worker",
                    f"must be a worker index 0..{p.workers - 1}",
                )
            )
            rules.append((outage.at >= 0, f"faults.{section}[{i}].at", "must be >= 0 seconds"))
            rules.append(
                (outage.duration > 0, f"faults.{section}[{i}].duration", "must be > 0 seconds")
            )
            times[f"faults.{section}[{i}].at"] = outage.at
            times[f"faults.{section}[{i}].duration"] = outage.duration
    for i, step in enumerate(f.clock_steps):
        rules.append(
            (
                0 <= step.worker < p.workers,
                f"faults.clock_steps[{i}].worker",
                f"must be a worker index 0..{p.workers - 1}",
            )
        )
        rules.append((step.at >= 0, f"faults.clock_steps[{i}].at", "must be >= 0 seconds"))
        times[f"faults.clock_steps[{i}].at"] = step.at
        times[f"faults.clock_steps[{i}].by"] = abs(step.by)
    for i, db_step in enumerate(f.db_clock_steps):
        rules.append((db_step.at >= 0, f"faults.db_clock_steps[{i}].at", "must be >= 0 seconds"))
        times[f"faults.db_clock_steps[{i}].at"] = db_step.at
        times[f"faults.db_clock_steps[{i}].by"] = abs(db_step.by)
    times["faults.db_clock_steps (all steps together)"] = sum(abs(s.by) for s in f.db_clock_steps)
    for i, cp in enumerate(f.crash_points):
        rules.append(
            (
                cp.point in CRASH_POINTS,
                f"faults.crash_points[{i}].point",
                f"must be one of {', '.join(CRASH_POINTS)}",
            )
        )
        rules.append(
            (
                0 <= cp.probability <= 1,
                f"faults.crash_points[{i}].probability",
                "must be a probability between 0 and 1",
            )
        )
        rules.append(
            (
                1 <= cp.limit <= limits.MAX_SEED,
                f"faults.crash_points[{i}].limit",
                "must be at least 1",
            )
        )
    for i, name in enumerate(scenario.expect):
        rules.append(
            (name in INVARIANTS, f"expect[{i}]", f"{name!r} is not one of {', '.join(INVARIANTS)}")
        )
    scheduled, scheduled_times = schedule_rules(scenario)
    rules += scheduled
    times.update(scheduled_times)
    rules += [
        (
            value <= limits.MAX_SECONDS,
            key,
            f"{value:g} s is too long: time values are at most "
            f"{limits.MAX_SECONDS:g} s (about 31 years), "
            "so that every timestamp fits a timestamptz",
        )
        for key, value in times.items()
    ]
    for ok, key, message in rules:
        if not ok:
            raise ConfigError(f"{key}: {message}")
    for key in ("processing", "psp_call", "statement_latency", "redelivery_delay"):
        _check_dist(getattr(w, key), f"workload.{key}")
    for key in ("restart_delay", "pause_duration", "heartbeat_delay", "partition_duration"):
        _check_dist(getattr(f, key), f"faults.{key}")
    size = limits.size_problem(scenario)
    if size:
        raise ConfigError(size)
    worker_clock = [
        key
        for key, value in (
            ("faults.clock_offset", f.clock_offset),
            ("faults.clock_drift_ppm", f.clock_drift_ppm),
            ("faults.clock_steps", f.clock_steps),
        )
        if value
    ]
    doubts = [  # settings that run but likely do not do what was meant: a warning each
        (
            bool(worker_clock) and p.clock != "worker",
            f"{worker_clock[0] if worker_clock else ''} has no effect with policy.clock = "
            f"{p.clock}: workers bind the database's time; set policy.clock = worker",
        ),
        (
            bool(p.process_heartbeat_interval)
            and p.process_heartbeat_interval >= p.process_stale_after,
            f"policy.process_heartbeat_interval {p.process_heartbeat_interval:g} s >= "
            f"policy.process_stale_after {p.process_stale_after:g} s: "
            "live processes will be pruned",
        ),
        (
            bool(p.process_heartbeat_interval) and not p.watcher,
            "policy.process_heartbeat_interval > 0 without policy.watcher: nothing prunes a dead "
            "process, so its jobs stay Processing",
        ),
        (
            p.heartbeat and p.heartbeat_interval >= p.lease_ttl,
            f"policy.heartbeat_interval {p.heartbeat_interval:g} s >= "
            f"policy.lease_ttl {p.lease_ttl:g} s: leases will lapse between heartbeats",
        ),
    ]
    for doubtful, message in doubts:
        if doubtful:
            warnings.warn(message, LeaseWarning, stacklevel=2)
    return scenario


def _check_dist(dist: Dist, key: str) -> None:
    problems = dist.problems(key)
    if problems:
        raise ConfigError(problems[0])


# ---- dict / TOML conversion ---------------------------------------------------------------------


def to_dict(obj) -> dict:
    """Plain nested dict of a scenario (distributions as tables), ready for TOML."""
    if isinstance(obj, Dist):
        return obj.to_dict()
    out: dict[str, object] = {}
    for f in fields(obj):
        value = getattr(obj, f.name)
        if value is None:
            continue  # TOML has no null: an absent key means None
        if dataclasses.is_dataclass(value):
            out[f.name] = to_dict(value)
        elif isinstance(value, tuple):
            out[f.name] = [to_dict(v) if dataclasses.is_dataclass(v) else v for v in value]
        else:
            out[f.name] = value
    return out


def from_dict(data: dict) -> Scenario:
    """Build and validate a Scenario from a nested dict (e.g. parsed TOML)."""
    return validate(build(Scenario, data, ""))


def _assign(data: dict, dotted: str, value) -> None:
    *parents, leaf = dotted.split(".")
    node = data
    walked = []
    for part in parents:
        walked.append(part)
        child = node.get(part)
        if not isinstance(child, dict):
            options = [k for k, v in node.items() if isinstance(v, dict)]
            close = difflib.get_close_matches(part, options, n=1)
            hint = f"; did you mean {'.'.join(walked[:-1] + [close[0]])}?" if close else ""
            raise ConfigError(f"{'.'.join(walked)}: unknown section{hint}")
        node = child
    node[leaf] = value


def loads(text: str, source: str = "scenario", *, folder: str | Path | None = None) -> Scenario:
    """A scenario from TOML text; `{csv = "d.csv"}` distributions resolve relative to `folder`
    (the TOML file's own folder when read by load(); else the current directory)."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{source}: not valid TOML ({exc})") from None
    except RecursionError:
        raise ConfigError(limits.too_deep(source)) from None
    deep = limits.nesting_problem(data, source)
    if deep:
        raise ConfigError(deep)
    if folder is not None:
        _anchor_csv_paths(data, Path(folder))
    return from_dict(data)


def _anchor_csv_paths(node, folder: Path) -> None:
    """Make every relative `csv = "..."` path in parsed TOML relative to `folder` instead of the
    cwd."""
    if isinstance(node, list):
        for item in node:
            _anchor_csv_paths(item, folder)
    elif isinstance(node, dict):
        csv = node.get("csv")
        if isinstance(csv, str) and not Path(csv).is_absolute():
            node["csv"] = str(folder / csv)
        for value in node.values():
            _anchor_csv_paths(value, folder)


def load(path: str | os.PathLike[str]) -> Scenario:
    path = Path(path)
    raw = read_capped(path, "scenario TOML", limits.MAX_TOML_BYTES)
    return loads(decode_utf8(raw, path, "TOML"), str(path), folder=path.parent)


def dumps(scenario: Scenario) -> str:
    return tomli_w.dumps(to_dict(scenario))


def save(scenario: Scenario, path: str | Path, *, overwrite: bool = False) -> Path:
    """Write TOML; refuses to replace an existing file unless overwrite=True."""
    path = Path(path)
    if path.exists() and not overwrite:
        raise ConfigError(f"{path}: already exists; choose another name or pass overwrite=True")
    path.write_text(dumps(scenario), encoding="utf-8")
    return path


# ---- presets ------------------------------------------------------------------------------------


def preset_names() -> list[str]:
    folder = resources.files("sim.scenario") / "presets"
    return sorted(
        p.name.removesuffix(".toml") for p in folder.iterdir() if p.name.endswith(".toml")
    )


def preset(name: str) -> Scenario:
    """A named preset from sim/scenario/presets/, or ConfigError with a did-you-mean."""
    if not isinstance(name, str):
        raise ConfigError(f"preset: expected a preset name, got {describe(name)}")
    names = preset_names()
    if name not in names:
        close = difflib.get_close_matches(name, names, n=1)
        hint = f"; did you mean {close[0]}?" if close else f"; presets: {', '.join(names)}"
        raise ConfigError(f"scenario {name!r}: no such preset{hint}")
    text = (resources.files("sim.scenario") / "presets" / f"{name}.toml").read_text(
        encoding="utf-8"
    )
    return loads(text, f"preset {name}")


def resolve(name_or_path: str | os.PathLike) -> Scenario:
    """A preset name, or a path to a TOML file."""
    if isinstance(name_or_path, os.PathLike):
        return load(name_or_path)
    if not isinstance(name_or_path, str):
        raise ConfigError(
            f"scenario: expected a preset name or a TOML path, got {describe(name_or_path)}"
        )
    if name_or_path.endswith(".toml") or "/" in name_or_path:
        return load(name_or_path)
    return preset(name_or_path)


def as_scenario(scenario: Scenario | str | os.PathLike) -> Scenario:
    """What the public entry points accept as a scenario: a Scenario (validated here, since one
    built in code has not been checked yet), a preset name or a TOML path; else ConfigError."""
    if isinstance(scenario, Scenario):
        return validate(scenario)
    if isinstance(scenario, str | os.PathLike):
        return resolve(scenario)
    raise ConfigError(
        f"scenario: expected a Scenario, a preset name or a TOML path, got {describe(scenario)}"
    )


def recovery_allowance(scenario: Scenario) -> float:
    """How long an expired lease may stay invisible to claimers: one watcher tick, or one poll;
    plus slack. A read-then-write watcher reads, waits watcher_gap, writes, then sleeps its
    interval: a lease expiring just after a read is read one gap and one interval later and
    written a gap after that, so its tick lasts watcher_interval + 2 x watcher_gap.

    With neither a watcher nor a claim that takes expired leases nothing ever recovers the job; the
    allowance is then one poll, so that such a job is reported stuck instead of waiting forever."""
    p = scenario.policy
    allowance = p.watcher_interval + 2 * p.watcher_gap if p.watcher else p.poll_interval
    return allowance + 1.0 + 10 * scenario.workload.statement_latency.quantile(0.99)
