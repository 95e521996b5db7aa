"""DbSession: one simulated client's connection, seen from SimPy.

Each statement costs one sampled round-trip latency and takes effect at one instant, with the
simulated clock bound as `now`. A statement that waits on a row lock yields until the holding
client's transaction ends in simulated time. It goes on at that very instant, before anything
else happens in the simulation, as PostgreSQL wakes a lock's waiters the moment their holder
commits, rolls back or dies; when several wait for one transaction, in the order they began to
wait. Partitions make statements fail (or hang until healed).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import Any, Protocol

import simpy

from sim.db.base import Backend, Blocked, Rows
from sim.db.errors import DbUnavailable, StatementError
from sim.db.queries import load_queries
from sim.model.arrivals import Arrivals
from sim.model.clock import DbClock, WorkerClock
from sim.model.events import EventLog
from sim.model.faults import OutageCalendar
from sim.model.waits import Waits
from sim.protocol import bind_clock
from sim.protocol.steps import Ttl
from sim.scenario import Scenario

__all__ = ["DbSession", "DbUnavailable", "TxRegistry"]

_USES_NOW = frozenset(q.name for q in load_queries().values() if q.uses_clock)


class TxRegistry:
    """Who waits for which client's open transaction. When it ends (commit, rollback, crash, or
    an error inside it) its waiters are resumed at once, in the order they began to wait."""

    def __init__(self, env: simpy.Environment):
        self.env = env
        self._waiting: dict[str, list[tuple[DbSession, simpy.Event]]] = {}

    def wait(self, session: DbSession, holder: str, resumed: simpy.Event) -> None:
        """`session`'s statement (whose outcome fires `resumed`) waits for `holder`'s
        transaction."""
        self._waiting.setdefault(holder, []).append((session, resumed))

    def ended(self, client: str) -> None:
        for session, resumed in self._waiting.pop(client, ()):
            session._holder_ended(client, resumed)


class SessionWorld(Protocol):
    """What a connection reads of its run (sim.model.world.World)."""

    @property
    def env(self) -> simpy.Environment: ...
    @property
    def scenario(self) -> Scenario: ...
    @property
    def backend(self) -> Backend: ...
    @property
    def db_clock(self) -> DbClock | None: ...
    @property
    def arrivals(self) -> Arrivals | None: ...
    @property
    def statement_counts(self) -> defaultdict[str, int]: ...
    @property
    def tx(self) -> TxRegistry: ...
    @property
    def log(self) -> EventLog: ...


class DbSession:
    """The connection of one client (a worker, its heartbeat, the watcher, the producer)."""

    def __init__(
        self,
        world: SessionWorld,
        client: str,
        latency: Callable[[], float],
        *,
        clock: WorkerClock | None = None,
        partitions: OutageCalendar | None = None,
    ):
        self.world = world
        self.env = world.env
        self.backend = world.backend
        self.client = client
        self.latency = latency
        self.clock = clock  # the worker's own WorkerClock (policy.clock = worker), or None
        # the clock its statements bind: its own, else the database's (stepped, or true time)
        self._binding: WorkerClock | None = clock if clock is not None else world.db_clock
        self.partitions = partitions  # an OutageCalendar, or None
        self.arrivals = world.arrivals  # sim.model.arrivals: stalls, same-instant order; or None
        self.counts = world.statement_counts
        # no partition between the round trip and the server: the driver plays statements inline
        # (with Arrivals, those that go straight through: Arrivals.straight_through)
        self.direct = partitions is None
        self.broken = False  # connection lost in a partition; reconnect when healed
        self._begin = False  # BEGIN issued, to be sent with the transaction's first statement
        self._resumed: simpy.Event | None = None  # fires when a waiting statement has gone on
        self._holders: list[str] = []  # the transactions it has waited for, in order
        self.backend.connect(client)

    def now(self) -> float:
        """This client's clock: the DB clock, or the worker's own when worker clocks are used."""
        clock = self._binding
        return self.env.now if clock is None else clock.at(self.env.now)

    def execute(
        self, query: str, params: dict[str, Any], job: int | None = None, ttl: Ttl = None
    ) -> Waits[Rows]:
        """Generator: send one statement, return its rows. The clock is bound at execution
        (sim.protocol.bind_clock: `now`, and lease_until = now + ttl)."""
        yield self.env.timeout(self.latency())
        if self.partitions is not None:
            yield from self._cross_partition(self.partitions, query)
        if self.arrivals is not None:
            yield from self.arrivals.reach(self.client, query)
        outcome = self.send(query, params, ttl)
        if type(outcome) is Blocked:  # type(), not __class__: mypy narrows on it
            outcome = yield from self.wait(outcome, job)
        return outcome

    def send(self, query: str, params: dict[str, Any], ttl: Ttl = None) -> Rows | Blocked:
        """The statement reaches the server now (its round trip done): its rows, or Blocked."""
        if query in _USES_NOW:
            clock = self._binding
            bind_clock(params, self.env.now if clock is None else clock.at(self.env.now), ttl)
        self.counts[query] += 1
        if self._begin:
            self._begin = False
            self.backend.begin(self.client)
        try:
            return self.backend.execute(self.client, query, params)
        except StatementError:
            self._failed()
            raise

    def _failed(self) -> None:
        """A statement failed inside a transaction: the server rolled back to the error and released
        its locks at once (the block stays open, aborted), so whoever waited on them goes on."""
        if self.backend.in_transaction(self.client):
            self.world.tx.ended(self.client)

    def wait(self, blocked: Blocked, job: int | None) -> Waits[Rows]:
        """Generator: wait until the statement has gone on past every holder; its outcome."""
        start = self.env.now
        self._holders = [blocked.holder]
        self._resumed = event = self.env.event()
        self.world.tx.wait(self, blocked.holder, event)
        try:
            outcome: Rows = yield event
        finally:  # done, or interrupted (the worker died): no longer waiting either way
            self._resumed = None
        self.world.log.add(
            self.env.now,
            "lock_wait",
            self.client,
            job,
            None,
            f"{'>'.join(self._holders)}:{self.env.now - start:.6f}",
        )
        return outcome

    def _holder_ended(self, holder: str, event: simpy.Event) -> None:
        """The transaction this session's statement waits for has ended: collect the outcome now
        (rows, an error, or a wait on the next holder)."""
        if event is not self._resumed or self._holders[-1] != holder:
            return  # that statement was abandoned: the waiting process died
        try:
            outcome = self.backend.resume(self.client)
        except StatementError as exc:
            self._resumed = None
            self._failed()
            event.defused = True  # raised in the waiting process, not in the environment
            event.fail(exc)
            return
        if type(outcome) is Blocked:
            self._holders.append(outcome.holder)
            self.world.tx.wait(self, outcome.holder, event)
        else:
            self._resumed = None
            event.succeed(outcome)

    def _cross_partition(self, partitions: OutageCalendar, query: str) -> Waits[None]:
        healed = partitions.end_of(self.env.now)
        if healed is not None:
            if self.world.scenario.faults.partition_mode == "hang":
                yield self.env.timeout(healed - self.env.now)
            else:
                self._lose_connection()
                raise DbUnavailable(query)
        if self.broken:
            self.backend.connect(self.client)
            self.broken = False

    def _lose_connection(self) -> None:
        self._begin = False
        if not self.broken:
            self.backend.crash(self.client)  # the server rolls back what the connection had open
            self.world.tx.ended(self.client)
            self.broken = True

    def begin(self) -> None:
        """BEGIN travels with the first statement of the transaction: no round trip of its own
        (and none at all while a partition keeps the connection down)."""
        self._begin = True

    def commit(self) -> Waits[None]:
        """Generator: COMMIT (one round trip)."""
        yield self.env.timeout(self.latency())
        if self.partitions is not None:
            yield from self._cross_partition(self.partitions, "COMMIT")
        if self.arrivals is not None:
            yield from self.arrivals.reach(self.client, "commit")
        self.send_commit()

    def send_commit(self) -> None:
        """COMMIT reaches the server now (its round trip done)."""
        self.counts["commit"] += 1
        if self._begin:
            self._begin = False  # an empty transaction: nothing reached the server
        else:
            self.backend.commit(self.client)
        self.world.tx.ended(self.client)

    def rollback(self) -> Waits[None]:
        """Generator: ROLLBACK (one round trip)."""
        yield self.env.timeout(self.latency())
        if self.arrivals is not None:
            yield from self.arrivals.reach(self.client, "rollback")
        self.counts["rollback"] += 1
        if self._begin:
            self._begin = False
        elif not self.broken:
            self.backend.rollback(self.client)
        self.world.tx.ended(self.client)

    def crash(self) -> None:
        """The process died: the server rolls back its transaction and releases its locks now."""
        self._begin = False
        self.backend.crash(self.client)
        self.world.tx.ended(self.client)

    def reconnect(self) -> None:
        self._begin = False
        self.backend.connect(self.client)
        self.broken = False
