"""The lease protocol, once: what a worker and the stuck watcher send to the database, in which
order, and what they record, for every claim strategy, completion, heartbeat and watcher tick.

Each protocol function is a generator of *steps* (sim.protocol.steps: one class per kind). It
yields a step, receives its result (or has its error thrown in) and goes on, so one text runs
under two drivers, as SimPy's real-time environment runs the same processes on the wall clock:
sim.model.driver plays the steps in simulated time (statements on a DbSession, work frozen by
pauses), sim.live_mode.driver as blocking calls on a real connection and sleeps on the shared
clock. Which named statements a policy's steps may send is derived here too (.statements).

Errors reach the protocol as the driver met them: DbUnavailable (no connection: a partition),
StatementError (the server refused a statement), and the driver's own (a crash) pass through.

Parts: steps (the vocabulary and the blocking trampoline), lease, claims, completion, upkeep
(heartbeat, release, deadline, process row), worker (WorkerProtocol, which composes them),
watcher (WatcherProtocol), statements (what each step may send), streams (the random sources),
failures (what a statement can end in) and timestamps (seconds as timestamptz microseconds): the
protocol needs nothing from sim.db, whose backends play it.
"""

from sim.protocol.completion import PAYLOAD_DIFFERS
from sim.protocol.lease import Lease
from sim.protocol.statements import statements_sent
from sim.protocol.steps import (
    BEGIN,
    COMMIT,
    NOW,
    ROLLBACK,
    Charge,
    CrashAt,
    Delay,
    Record,
    Statement,
    Step,
    Wait,
    Work,
    bind_clock,
    play,
)
from sim.protocol.watcher import MAX_STALLS, WatcherProtocol
from sim.protocol.worker import WorkerProtocol

__all__ = [
    "BEGIN",
    "COMMIT",
    "MAX_STALLS",
    "NOW",
    "PAYLOAD_DIFFERS",
    "ROLLBACK",
    "Charge",
    "CrashAt",
    "Delay",
    "Lease",
    "Record",
    "Statement",
    "Step",
    "Wait",
    "WatcherProtocol",
    "Work",
    "WorkerProtocol",
    "bind_clock",
    "play",
    "statements_sent",
]
