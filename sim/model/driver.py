"""Plays the lease protocol's steps (sim.protocol) in simulated time, for one SimPy process.

A statement runs on the DbSession given (one round trip, lock waits in simulated time); work is
frozen by the worker's stop-the-world pauses and a sleep ends only once no pause holds the
process; a record goes into the run's event log at the current simulated instant.
"""

from __future__ import annotations

from sim.protocol import (
    BEGIN_OP,
    CHARGE,
    COMMIT_OP,
    CRASH_POINT,
    DELAY,
    NOW_OP,
    RECORD,
    ROLLBACK_OP,
    STATEMENT,
    WAIT,
    WORK,
)


class CrashPointReached(Exception):
    """The worker dies at a scripted point of interest (it cannot interrupt itself)."""


class Driver:
    """Runs protocol generators for one process of `world`; `pauses` is its OutageCalendar or
    None."""

    __slots__ = ("env", "log", "psp", "crash_points", "pauses")

    def __init__(self, world, pauses=None):
        self.env = world.env
        self.log = world.log
        self.psp = world.psp
        self.crash_points = world.crash_points
        self.pauses = pauses if pauses else None

    def run(self, steps, db):
        """Generator: play `steps` with statements on session `db`; returns what they return.
        An error a step meets is thrown into the protocol at that step, as `yield from` would."""
        env, add, pauses = self.env, self.log.add, self.pauses
        send, throw, statement = steps.send, steps.throw, db.run
        resume, value = send, None
        while True:
            try:
                step = resume(value)
            except StopIteration as done:
                return done.value
            resume, value = send, None
            op = step[0]
            try:  # the most frequent steps first
                if op == STATEMENT:
                    value = yield from statement(step[1], step[2], step[3], step[4])
                elif op == RECORD:
                    add(env.now, step[1], step[2], step[3], step[4], step[5])
                elif op == WORK:
                    if pauses:
                        yield env.timeout(pauses.work_end(env.now, step[1]) - env.now)
                    else:
                        yield env.timeout(step[1])
                elif op == WAIT:
                    yield env.timeout(step[1])
                    if pauses:
                        yield from self.thaw()
                elif op == COMMIT_OP:
                    yield from db.commit()
                elif op == BEGIN_OP:
                    db.begin()
                elif op == CHARGE:
                    value = self.psp.charge(step[1])
                elif op == NOW_OP:
                    value = db.now()
                elif op == ROLLBACK_OP:
                    yield from db.rollback()
                elif op == DELAY:
                    yield env.timeout(step[1])
                elif op == CRASH_POINT:
                    points = self.crash_points
                    if points.configs and points.fires(step[1]):
                        raise CrashPointReached(step[1])
                else:
                    raise ValueError(f"unknown protocol step {step!r}")
            except Exception as exc:  # a crash (Interrupt), a lost connection, a server error
                resume, value = throw, exc

    # ---- time, frozen by pauses ---------------------------------------------------------------

    def thaw(self):
        """Generator: if a pause is in progress, nothing runs until it ends."""
        if self.pauses:
            end = self.pauses.end_of(self.env.now)
            if end is not None:
                yield self.env.timeout(end - self.env.now)

    def sleep(self, seconds: float):
        """Generator: sleep `seconds`, then wait out a pause in progress."""
        yield self.env.timeout(seconds)
        if self.pauses:
            yield from self.thaw()
