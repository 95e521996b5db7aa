"""How statements reach the database when a scenario schedules it (sim.scenario.pinned): after a
database stall ends, and, among those that reach it at the same simulated instant, in a pinned order
of clients instead of the order SimPy happened to wake them. Whoever is served first also queues
first for a row lock (sim.model.session's TxRegistry wakes waiters in the order they began to wait),
so the order reaches the lock queue of either backend. By default a run has no Arrivals and its
statements go straight through.
"""

from __future__ import annotations

from collections.abc import Iterable

import simpy

from sim.model.faults import OutageCalendar
from sim.model.waits import Waits
from sim.scenario import Scenario
from sim.scenario.dists import Dist
from sim.scenario.pinned import DbStall

LAST = 1 << 30  # the rank of a client the order does not list: after every listed one


class Arrivals:
    """Database stalls and the same-instant order of one run; `ties` counts the instants at which
    two or more statements arrived together (PCT's change points are numbered by them). With
    `sent` set to a list, every arrival is recorded there as (time, client, query)."""

    def __init__(
        self,
        env: simpy.Environment,
        stalls: Iterable[DbStall] = (),
        order: Iterable[str] | None = None,
        changes: Iterable[int] = (),
        latency: Dist | None = None,
    ):
        self.env = env
        # with a constant latency > 0 a statement arriving now was sent earlier, so one that finds
        # nothing else scheduled at this instant is alone in it and goes straight through
        self.alone_ok = latency is not None and latency.kind == "constant" and latency.value > 0
        self.stalls = (
            OutageCalendar([(s.at, s.at + s.duration) for s in stalls]) if stalls else None
        )
        self.ordered = order is not None
        self.rank = {client: i for i, client in enumerate(order or ())}
        self.changes = frozenset(changes)
        self.ties = 0
        self.sent: list[tuple[float, str, str]] | None = None
        self._batch: list[tuple[int, int, str, simpy.Event]] = []

    @classmethod
    def of(cls, env: simpy.Environment, scenario: Scenario) -> Arrivals | None:
        """The scenario's Arrivals, or None when it schedules neither stalls nor an order."""
        pinned, stalls = scenario.pinned, scenario.faults.db_stalls
        order = pinned.order if pinned is not None else None
        if not stalls and order is None:
            return None
        changes = pinned.order_changes if pinned is not None else ()
        return cls(env, stalls, order, changes, scenario.workload.statement_latency)

    def straight_through(self, client: str, query: str) -> bool:
        """Does `client`'s statement reach the database now, with no stall to wait out and no
        turn to take? Then it is recorded as reach() would and True; else reach() is to be
        played. The driver's test, so that most statements need no generator of their own: the
        tests reach() makes, written out again here because a call per statement costs the hunt
        about 2% (reach() is the slow path; tests/hunting hold the two to the same outcomes)."""
        env = self.env
        if self.stalls is not None and self.stalls.end_of(env.now) is not None:
            return False
        if self.ordered and not (self.alone_ok and not self._batch and env.peek() > env.now):
            return False
        if self.sent is not None:
            self.sent.append((env.now, client, query))
        return True

    def reach(self, client: str, query: str) -> Waits[None]:
        """Generator: `client`'s statement (or COMMIT, ROLLBACK) reaches the database: it waits
        out a stall, then its turn among the statements arriving at this instant."""
        env = self.env
        if self.stalls is not None:
            end = self.stalls.end_of(env.now)
            if end is not None:
                yield env.timeout(end - env.now)
        if self.sent is not None:
            self.sent.append((env.now, client, query))
        if not self.ordered or (self.alone_ok and not self._batch and env.peek() > env.now):
            return
        turn = env.event()
        batch = self._batch
        if not batch:  # the first at this instant: serve the batch once all have arrived
            env.timeout(0).callbacks.append(self._serve)
        batch.append((self.rank.get(client, LAST), len(batch), client, turn))
        yield turn

    def _serve(self, _event: simpy.Event) -> None:
        """Wake the statements that arrived at this instant, in order (a stable sort by rank)."""
        batch, self._batch = sorted(self._batch), []
        if len(batch) > 1:
            self.ties += 1
            if self.ties in self.changes:  # PCT: the client served first drops to last
                first = batch[0][2]
                self.rank[first] = max(LAST, *self.rank.values()) + 1
        for _rank, _seq, _client, turn in batch:
            turn.succeed()
