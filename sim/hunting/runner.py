"""Run one schedule and say which invariants it broke: the hunt's hot path.

On the simulated database a schedule runs straight from its Scope (no TOML, no re-validation, no
DataFrames) and stops as soon as nothing can change any more: every job is Completed or Dead, no
worker holds one, every fault is over, and no status has changed for longer than any process can
sit between reading a job and writing it. From there on Lease Lab's own statements only poll and
find nothing, so the verdict is the one the whole horizon would give (a test compares the two).
A queue's own SQL (PostgreSQL) may do anything later, so there a run always goes to its horizon,
and sim.check judges it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sim.db.inspect import final_tables
from sim.db.memory import MemoryBackend
from sim.hunting.space import Schedule, Scope
from sim.hunting.verdict import TERMINAL, broken
from sim.model.world import build

if TYPE_CHECKING:
    from sim.invariants import Report
    from sim.results import Run

# records of every status a worker or the watcher writes (and the effects that go with them)
_CHANGES = ("claim", "complete", "payload_conflict", "requeue", "release", "deadline", "effect")


@dataclass
class Outcome:
    """What one run of a schedule showed: violations per invariant (of the scope's invariants),
    where it stopped, how many same-instant ties it met, and, when asked, its statements as they
    reached the database (time, client, query) and its records."""

    broken: Counter
    stopped_at: float
    ties: int
    records: int = 0  # event records up to where the run stopped
    sent: list | None = None
    events: list | None = None

    @property
    def bad(self) -> bool:
        return bool(self.broken)


class _Quiet(Exception):
    """Raised by the monitor process: nothing can change any more, stop the run here."""


def execute(
    scope: Scope, schedule: Schedule, *, record: bool = False, early: bool = True
) -> Outcome:
    """Run `schedule` on the simulated database; `record` keeps what reached the database and
    the event records (the grid reads its anchors from them; nothing follows a settled run).
    `early`: stop once settled (False runs to the horizon: what tests compare it with)."""
    scenario = scope.fast_scenario(schedule)
    world = build(scenario, MemoryBackend())
    arrivals = world.arrivals
    if record and arrivals is not None:
        arrivals.sent = []
    env = world.env
    if early and _may_stop_early(scenario):
        env.process(_monitor(world, schedule))
    try:
        env.run(until=schedule.horizon)
        stopped = schedule.horizon
    except _Quiet:
        stopped = env.now
    log = world.log
    clocks = {name: w.db.clock for w in world.workers for name in w.names if w.db.clock is not None}
    tables = final_tables(world.backend)
    found = broken(log.records_but("idle"), scenario, tables, clocks, log.last_time("idle"))
    wanted = Counter({k: n for k, n in found.items() if k in scope.invariants})
    return Outcome(
        wanted,
        stopped,
        arrivals.ties if arrivals is not None else 0,
        len(log),
        arrivals.sent if record and arrivals is not None else None,
        list(log) if record else None,
    )


def _may_stop_early(scenario) -> bool:
    """Only Lease Lab's own statements and a watcher process: their later behaviour is known."""
    return scenario.policy.rescue == "watcher"


def _settle_time(scenario) -> float:
    """The longest a process can sit between reading a job and writing it, faults aside: a
    claim's read-to-write gap, the watcher's, and a statement round trip per row either handles."""
    p, w = scenario.policy, scenario.workload
    latency = w.statement_latency.quantile(0.5)
    rows = p.candidates + min(p.watcher_batch, w.jobs * 2) + 10
    return p.select_to_update_gap + p.watcher_gap + rows * latency + 1e-3


def _faults_over(schedule: Schedule) -> float:
    return max((f.at + f.duration for f in schedule.faults), default=0.0)


def _monitor(world, schedule: Schedule):
    """Process: every horizon/16, see whether the run is settled; once it is, look again a
    read-to-write gap later, and raise _Quiet if it still is, with no status change between."""
    env = world.env
    settle = _settle_time(world.scenario)
    step = max(settle, schedule.horizon / 16)
    over = _faults_over(schedule)
    while True:
        yield env.timeout(step)
        seen = _changes_if_settled(world, over)
        if seen is None:
            continue
        yield env.timeout(settle)
        if _changes_if_settled(world, over) == seen:
            raise _Quiet


def _changes_if_settled(world, faults_over: float) -> int | None:
    """The number of status-change records, if the run is settled now; else None."""
    if world.env.now < faults_over:
        return None
    producer = world.producer
    if producer is None or producer.is_alive:
        return None
    for worker in world.workers:
        if worker.lease is not None or worker.buffer or worker.orphans or worker.handler:
            return None
    rows = world.backend.jobs
    if len(rows) != len(world.catalog) or any(r.status not in TERMINAL for r in rows.values()):
        return None
    log = world.log
    return sum(log.count(kind) for kind in _CHANGES)


# ---- authoritative replays -----------------------------------------------------------------------


@dataclass
class Replay:
    """A schedule replayed as `sim run` plays its scenario file, and judged by sim.check."""

    run: Run
    report: Report
    broken: Counter  # violations per invariant (of the scope's invariants)


def replay(scope: Scope, schedule: Schedule, *, postgres: bool = False) -> Replay:
    """Run the schedule's validated scenario to its horizon on the simulated database, or on
    PostgreSQL (`postgres`, or always for a queue's own SQL), and judge it with sim.check."""
    from sim.invariants import check as judge
    from sim.runner import make_backend, run

    scenario = scope.scenario(schedule)
    if scope.sql is None and not postgres:
        result = run(scenario, backend="memory")
    else:
        backend = make_backend("postgres", dsn=scope.dsn, sql=scope.sql)
        try:
            result = run(scenario, backend=backend)
        finally:
            backend.close()
        if scope.sql is not None:
            scope.sql.check_jobs_table(result.tables["jobs"])  # a status it does not know
    report = judge(result)
    broken = Counter(v.invariant for v in report.violations if v.invariant in scope.invariants)
    return Replay(result, report, broken)


def check(scope: Scope, schedule: Schedule) -> Counter:
    """The invariants a schedule breaks: the fast screen on the simulated database, sim.check
    on PostgreSQL for a queue's own SQL."""
    if scope.sql is None:
        return execute(scope, schedule).broken
    return replay(scope, schedule).broken
