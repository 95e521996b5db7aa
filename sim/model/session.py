"""DbSession: one simulated client's connection, seen from SimPy.

Each statement costs one sampled round-trip latency and takes effect at one instant, with the
simulated clock bound as `now`. A statement that waits on a row lock yields until the holding
client's transaction ends in simulated time, then collects its real outcome from the backend.
Partitions make statements fail (or hang until healed).
"""

from __future__ import annotations

from collections import Counter

import simpy

from sim.db.base import Blocked
from sim.db.queries import load_queries


class DbUnavailable(Exception):
    """The worker cannot reach the database (partition); the connection is lost."""


_USES_NOW = frozenset(q.name for q in load_queries().values() if "now" in q.param_names)


class TxRegistry:
    """SimPy events that fire when a client's open transaction ends (commit, rollback, crash)."""

    def __init__(self, env: simpy.Environment):
        self.env = env
        self._waiting: dict[str, simpy.Event] = {}

    def ended_event(self, client: str) -> simpy.Event:
        event = self._waiting.get(client)
        if event is None:
            event = self._waiting[client] = self.env.event()
        return event

    def ended(self, client: str) -> None:
        event = self._waiting.pop(client, None)
        if event is not None:
            event.succeed()


class DbSession:
    """The connection of one client (a worker, its heartbeat, the watcher, the producer)."""

    def __init__(self, world, client: str, latency, *, skew: float = 0.0, partitions=None):
        self.world = world
        self.env = world.env
        self.backend = world.backend
        self.client = client
        self.latency = latency
        self.skew = skew
        self.partitions = partitions  # an OutageCalendar, or None
        self.counts: Counter = world.statement_counts
        self.broken = False  # connection lost in a partition; reconnect when healed
        self.backend.connect(client)

    def now(self) -> float:
        """This client's clock: the DB clock, plus the worker's skew when worker clocks are used."""
        return self.env.now + self.skew

    def run(self, query: str, params: dict, *, job: int | None = None, ttl: float | None = None):
        """Generator: send one statement, return its rows. `now` (and lease_until = now + ttl) are bound at execution."""
        yield self.env.timeout(self.latency())
        if self.partitions is not None:
            yield from self._cross_partition(query)
        if query in _USES_NOW:
            now = self.env.now + self.skew
            params["now"] = now
            if ttl is not None:
                params["lease_until"] = now + ttl
        self.counts[query] += 1
        outcome = self.backend.execute(self.client, query, params)
        if outcome.__class__ is Blocked:
            outcome = yield from self._wait(outcome, job)
        return outcome

    def _wait(self, blocked: Blocked, job: int | None):
        start = self.env.now
        holders = []
        while blocked.__class__ is Blocked:
            holders.append(blocked.holder)
            yield self.world.tx.ended_event(blocked.holder)
            blocked = self.backend.resume(self.client)
        self.world.log.add(self.env.now, "lock_wait", self.client, job, None,
                           f"{'>'.join(holders)}:{self.env.now - start:.6f}")
        return blocked

    def _cross_partition(self, query: str):
        healed = self.partitions.end_of(self.env.now)
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
        if not self.broken:
            self.backend.crash(self.client)  # the server rolls back what the connection had open
            self.world.tx.ended(self.client)
            self.broken = True

    def begin(self) -> None:
        """BEGIN travels with the first statement of the transaction: no round trip of its own."""
        self.backend.begin(self.client)

    def commit(self):
        """Generator: COMMIT (one round trip)."""
        yield self.env.timeout(self.latency())
        if self.partitions is not None:
            yield from self._cross_partition("COMMIT")
        self.counts["commit"] += 1
        self.backend.commit(self.client)
        self.world.tx.ended(self.client)

    def rollback(self):
        """Generator: ROLLBACK (one round trip)."""
        yield self.env.timeout(self.latency())
        self.counts["rollback"] += 1
        if not self.broken:
            self.backend.rollback(self.client)
        self.world.tx.ended(self.client)

    def crash(self) -> None:
        """The process died: the server rolls back its transaction and releases its locks now."""
        self.backend.crash(self.client)
        self.world.tx.ended(self.client)

    def reconnect(self) -> None:
        self.backend.connect(self.client)
        self.broken = False
