"""Scenario = Workload + Policy + Faults (+ horizon, seed, backend): frozen, validated, TOML
in/out."""

from __future__ import annotations

import dataclasses
import difflib
import os
import tomllib
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, fields, replace
from importlib import resources
from operator import attrgetter
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import tomli_w

from sim.errors import ConfigError
from sim.scenario import limits
from sim.scenario.dists import Dist, decode_utf8
from sim.scenario.fields import LeaseWarning as LeaseWarning
from sim.scenario.fields import build, check_types, convert, describe, hints_of
from sim.scenario.pinned import DbStall, HeartbeatFault, Pinned
from sim.scenario.pinned import rules as schedule_rules
from sim.scenario.rules import ARRIVALS as ARRIVALS
from sim.scenario.rules import CLAIM_STRATEGIES as CLAIM_STRATEGIES
from sim.scenario.rules import CLOCKS as CLOCKS
from sim.scenario.rules import COMPLETIONS as COMPLETIONS
from sim.scenario.rules import CRASH_POINTS as CRASH_POINTS
from sim.scenario.rules import CRASH_TARGETS as CRASH_TARGETS
from sim.scenario.rules import DEADLINE_ACTIONS as DEADLINE_ACTIONS
from sim.scenario.rules import FIELD_RULES, ITEM_RULES, SECONDS, rules_of, too_long
from sim.scenario.rules import IDENTITIES as IDENTITIES
from sim.scenario.rules import INVARIANTS as INVARIANTS
from sim.scenario.rules import PARTITION_MODES as PARTITION_MODES
from sim.scenario.rules import PRUNE_ACTIONS as PRUNE_ACTIONS
from sim.scenario.rules import RESCUES as RESCUES
from sim.scenario.rules import SHUTDOWNS as SHUTDOWNS
from sim.scenario.rules import STALL_CHECKS as STALL_CHECKS
from sim.scenario.rules import WATCHER_ACTIONS as WATCHER_ACTIONS
from sim.support.input_files import read_capped

LOCK_TTL = 1e9  # a lease TTL that stands for a lock: no claim expires within any horizon


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

    def __post_init__(self) -> None:
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

    def __post_init__(self) -> None:
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

    def __post_init__(self) -> None:
        check_types(self, "crash.")


@dataclass(frozen=True)
class ScriptedOutage:
    """A stop-the-world pause or a worker<->DB partition at a given time."""

    worker: int
    at: float
    duration: float

    def __post_init__(self) -> None:
        check_types(self, "outage.")


@dataclass(frozen=True)
class CrashPoint:
    """Crash a worker when it reaches `point`, with `probability`, at most `limit` times in the
    run."""

    point: str
    probability: float = 1.0
    limit: int = 1

    def __post_init__(self) -> None:
        check_types(self, "crash_point.")


@dataclass(frozen=True)
class ClockStep:
    """Worker `worker`'s clock jumps by `by` seconds at `at` (an NTP step; negative: backwards)."""

    worker: int
    at: float
    by: float

    def __post_init__(self) -> None:
        check_types(self, "clock_step.")


@dataclass(frozen=True)
class DbClockStep:
    """The database's clock jumps by `by` seconds at `at` (an NTP step on its host, a failover to a
    replica whose clock differs; negative: backwards): the bound now of every statement that reads
    the database's time jumps with it, and so does every deadline compared with it."""

    at: float
    by: float

    def __post_init__(self) -> None:
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

    def __post_init__(self) -> None:
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

    def __post_init__(self) -> None:
        check_types(self, "")

    @property
    def validated(self) -> bool:
        """Has validate passed this very object? (A copy made by dataclasses.replace has not.)"""
        return bool(self.__dict__.get("_validated", False))

    def with_overrides(self, assignments: Mapping[str, object]) -> Scenario:
        """A copy with dotted keys replaced, e.g. {"policy.lease_ttl": 20}; validated."""
        return validate(_overridden(self, assignments))

    def replace(self, **sections: Any) -> Scenario:
        """A copy with whole fields or sections replaced, e.g. replace(seed=2); validated (a
        validated scenario given a new seed, name or description: only those fields' rules)."""
        copy = replace(self, **sections)
        if not (self.validated and set(sections) <= FREE_FIELDS):
            return validate(copy)
        problems = (rule.problem(key, sections[key]) for key in sections for rule in rules_of(key))
        problem = next(filter(None, problems), None)
        if problem:
            raise ConfigError(problem)
        return _validated(copy)


FREE_FIELDS = {"name", "description", "seed", "record_heartbeats"}  # no rule reads them together


def _overridden(scenario: Scenario, assignments: Mapping[str, object]) -> Scenario:
    """`scenario` with dotted keys replaced, not validated yet: each value is coerced by its
    field's type and checked by the field's rules in sim.scenario.rules as it comes (an unknown
    key is left to build, which names it with a did-you-mean)."""
    data = to_dict(scenario)
    for dotted, value in assignments.items():
        deep = limits.nesting_problem(value, str(dotted))
        if deep:
            raise ConfigError(deep)
        hint = _hint(dotted)
        if hint is not None:
            value = convert(hint, value, dotted)
            problem = next(filter(None, (r.problem(dotted, value) for r in rules_of(dotted))), None)
            if problem:
                raise ConfigError(problem)
        _assign(data, dotted, value)
    return build(Scenario, data, "")


def _hint(dotted: object) -> object:
    """The type of the field a dotted key names (None when it names none)."""
    cls: object = Scenario
    for part in str(dotted).split(".") if isinstance(dotted, str) else [None]:
        if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)) or part is None:
            return None
        cls = hints_of(cls).get(part)
    return cls


@runtime_checkable
class Settles(Protocol):
    """A queue whose own settings (queue.toml) a scenario takes: sim.db.queue's QueueDefinition."""

    def settle(self, scenario: Scenario) -> tuple[Scenario, Any]: ...


def prepared(
    scenario: Scenario | str | os.PathLike[str],
    overrides: Mapping[str, object] | None = None,
    seed: int | None = None,
    *,
    queue: object = None,
) -> tuple[Scenario, Any]:
    """The preamble of every entry point, validated once, at its end: the scenario (a Scenario, a
    preset name or a TOML path); the settings of `queue` (anything with settle(), a loaded queue
    directory) under the overrides; the overrides; the seed. Returns (the scenario, the queue
    settled), or the `queue` given back as it is when it has no settle()."""
    base = _unchecked(scenario)
    if isinstance(queue, Settles):  # a bad scenario must not be blamed on the queue's settings
        base, queue = queue.settle(validate(base))
    if overrides:
        base = _overridden(base, overrides)
    if seed is not None:
        base = base.replace(seed=seed) if base.validated else replace(base, seed=seed)
    return validate(base), queue


# ---- validation ---------------------------------------------------------------------------------


def validate(scenario: Scenario) -> Scenario:
    """Raise ConfigError (one line) for values a run cannot use; warn for risky ones; mark the
    scenario validated, so that handing it on does not check it again.

    Types were checked when the scenario was built; here: the table of sim.scenario.rules (ranges,
    time values a timestamptz holds on both backends), the rules across fields, the distributions
    and the sizes a run can simulate (sim.scenario.limits).
    """
    if not isinstance(scenario, Scenario):
        raise ConfigError(
            f"scenario: expected a Scenario, a preset name or a TOML path, got {describe(scenario)}"
        )
    if scenario.validated:
        return scenario
    problem = next(_problems(scenario), None) or limits.size_problem(scenario)
    if problem:
        raise ConfigError(problem)
    for message in _doubts(scenario):
        warnings.warn(message, LeaseWarning, stacklevel=2)
    return _validated(scenario)


def _validated(scenario: Scenario) -> Scenario:
    object.__setattr__(scenario, "_validated", True)
    return scenario


_FIELDS = tuple((key, attrgetter(key), rule) for key, rule in FIELD_RULES)
_TIMED = tuple((key, value_of) for key, value_of, rule in _FIELDS if rule.unit == SECONDS)


def _problems(scenario: Scenario) -> Iterator[str]:
    """The line of each rule that breaks, in the order validate reports the first: the table, the
    rules across fields, the faults lists, the expected invariants, the schedule, the time values,
    the distributions."""
    for key, value_of, rule in _FIELDS:
        if not rule.holds(value_of(scenario)):
            yield f"{key}: {rule.message}"
    yield from _across_fields(scenario)
    yield from _item_problems(scenario)
    for i, name in enumerate(scenario.expect):
        if name not in INVARIANTS:
            yield f"expect[{i}]: {name!r} is not one of {', '.join(INVARIANTS)}"
    scheduled, scheduled_times = schedule_rules(scenario)
    yield from (f"{key}: {message}" for holds, key, message in scheduled if not holds)
    for key, seconds in (*_times(scenario), *scheduled_times.items()):
        if seconds > limits.MAX_SECONDS:
            yield too_long(key, seconds)
    for section, keys in DISTRIBUTIONS.items():
        for key in keys:
            yield from getattr(getattr(scenario, section), key).problems(f"{section}.{key}")[:1]


DISTRIBUTIONS = {
    "workload": ("processing", "psp_call", "statement_latency", "redelivery_delay"),
    "faults": ("restart_delay", "pause_duration", "heartbeat_delay", "partition_duration"),
}


def _across_fields(scenario: Scenario) -> Iterator[str]:
    """The rules that tie a field to another: `key: what to set` for each that breaks."""
    p, f = scenario.policy, scenario.faults
    rules = (
        (
            p.prefetch == 1 or p.claim == "skip_locked",
            "policy.prefetch",
            "a batch claim is one SKIP LOCKED statement: set policy.claim = skip_locked",
        ),
        (
            p.rescue == "watcher" or p.watcher,
            "policy.rescue",
            "job runs the watcher's tick as a job: set policy.watcher = true",
        ),
        (
            not (p.stall_check == "two_phase" and p.watcher_gap),
            "policy.watcher_gap",
            "must be 0 with policy.stall_check = two_phase (its passes re-check every row)",
        ),
        (
            p.max_stalls is None or p.stall_check == "two_phase" or p.process_heartbeat_interval,
            "policy.max_stalls",
            "counts the stalls a two-phase stall check or a process prune finds: set "
            "policy.stall_check = two_phase or policy.process_heartbeat_interval > 0",
        ),
        (
            0 <= p.retry_backoff
            and p.retry_backoff * min(p.max_attempts, 10**4) ** 4 <= limits.MAX_SECONDS,
            "policy.retry_backoff",
            "must be >= 0 seconds, with retry_backoff x max_attempts^4 at most 1e9 s",
        ),
        (
            not f.release_loss or f.shutdown == "graceful",
            "faults.release_loss",
            "is the loss of a graceful release: set faults.shutdown = graceful",
        ),
    )
    return (f"{key}: {message}" for holds, key, message in rules if not holds)


def _item_problems(scenario: Scenario) -> Iterator[str]:
    """The entries of the faults lists: a scripted crash names its worker or its job, a worker
    index is below policy.workers, and each field keeps its rules in the table."""
    workers = scenario.policy.workers
    for section, rows in ITEM_RULES.items():
        for i, item in enumerate(getattr(scenario.faults, section)):
            key = f"faults.{section}[{i}]"
            if isinstance(item, ScriptedCrash) and (item.worker is None) == (item.job is None):
                yield f"{key}: " + (
                    "give either worker or job, not both"
                    if item.worker is not None
                    else "give the worker (an index) or the job it crashes holding, one of them"
                )
            worker = getattr(item, "worker", None)
            if worker is not None and not 0 <= worker < workers:
                yield f"{key}.worker: must be a worker index 0..{workers - 1}"
            for name, rule in rows:
                if not rule.holds(getattr(item, name)):
                    yield f"{key}.{name}: {rule.message}"


def _times(scenario: Scenario) -> Iterator[tuple[str, float]]:
    """(key, size in seconds) of every time value of the table and of the faults lists."""
    for key, value_of in _TIMED:
        yield key, abs(value_of(scenario))
    for section, rows in ITEM_RULES.items():
        for i, item in enumerate(getattr(scenario.faults, section)):
            for name, rule in rows:
                if rule.unit == SECONDS:
                    yield f"faults.{section}[{i}].{name}", abs(getattr(item, name))
    steps = scenario.faults.db_clock_steps
    yield "faults.db_clock_steps (all steps together)", sum(abs(s.by) for s in steps)


def _doubts(scenario: Scenario) -> list[str]:
    """Settings that run but likely do not do what was meant: a warning each."""
    p, f = scenario.policy, scenario.faults
    worker_clock = [
        key
        for key, value in (
            ("faults.clock_offset", f.clock_offset),
            ("faults.clock_drift_ppm", f.clock_drift_ppm),
            ("faults.clock_steps", f.clock_steps),
        )
        if value
    ]
    doubts = [
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
    return [message for doubtful, message in doubts if doubtful]


# ---- dict / TOML conversion ---------------------------------------------------------------------


def to_dict(obj: Any) -> dict[str, Any]:
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


def from_dict(data: dict[str, Any]) -> Scenario:
    """Build and validate a Scenario from a nested dict (e.g. parsed TOML)."""
    return validate(build(Scenario, data, ""))


def _assign(data: dict[str, Any], dotted: str, value: object) -> None:
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
    return validate(_parsed(text, source, folder))


def _parsed(text: str, source: str, folder: str | Path | None = None) -> Scenario:
    """loads, not validated yet."""
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
    return build(Scenario, data, "")


def _anchor_csv_paths(node: object, folder: Path) -> None:
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
    return validate(_loaded(path))


def _loaded(path: str | os.PathLike[str]) -> Scenario:
    """load, not validated yet."""
    path = Path(path)
    raw = read_capped(path, "scenario TOML", limits.MAX_TOML_BYTES)
    return _parsed(decode_utf8(raw, path, "TOML"), str(path), folder=path.parent)


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
    return validate(_preset(name))


def _preset(name: str) -> Scenario:
    """preset, not validated yet."""
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
    return _parsed(text, f"preset {name}")


def resolve(name_or_path: str | os.PathLike[str]) -> Scenario:
    """A preset name, or a path to a TOML file."""
    if isinstance(name_or_path, Scenario) or not isinstance(name_or_path, str | os.PathLike):
        raise ConfigError(
            f"scenario: expected a preset name or a TOML path, got {describe(name_or_path)}"
        )
    return validate(_unchecked(name_or_path))


def as_scenario(scenario: Scenario | str | os.PathLike[str]) -> Scenario:
    """What the public entry points accept as a scenario: a Scenario (validated here, since one
    built in code has not been checked yet), a preset name or a TOML path; else ConfigError."""
    return validate(_unchecked(scenario))


def _unchecked(scenario: object) -> Scenario:
    """A Scenario as given, or the preset or TOML file a name or path names, not validated yet;
    else ConfigError."""
    if isinstance(scenario, Scenario):
        return scenario
    if isinstance(scenario, os.PathLike):
        return _loaded(scenario)
    if not isinstance(scenario, str):
        raise ConfigError(
            f"scenario: expected a Scenario, a preset name or a TOML path, got {describe(scenario)}"
        )
    if scenario.endswith(".toml") or "/" in scenario:
        return _loaded(scenario)
    return _preset(scenario)


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
