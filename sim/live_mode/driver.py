"""Plays the lease protocol's steps (sim.protocol) as blocking calls, for one live process.

A statement runs on the LiveConnection given; work, sleeps and network delays are sleeps on the
shared clock (a stop-the-world pause is a real SIGSTOP: it needs no modelling here); a record
is written at the clock's now; the client's own clock (NOW) is its connection's, offset
included; a PSP idempotency key is a file created exclusively in a folder every process of the
run shares, so a key seen by any process replays; a crash point asks the worker's callback,
which ends the process when a scripted crash fires there.
"""

from __future__ import annotations

import os

from sim.protocol import steps as step_types


class HandlerCancelled(Exception):
    """A handler's steps stop: its worker cancelled it at the deadline (deadline_action =
    cancel). Nothing more of it is sent or recorded."""


class LiveDriver:
    """Runs protocol generators on the wall clock; `psp_dir` holds the PSP's idempotency keys;
    `crash_point(point)` (if given) ends the process when a scripted crash fires there."""

    def __init__(self, clock, recorder, psp_dir: str | None = None, crash_point=None):
        self.clock, self.recorder, self.psp_dir = clock, recorder, psp_dir
        self.crash_point = crash_point

    def play(self, steps, db, cancelled=None):
        """Play `steps` with statements on connection `db`; returns what they return. An error a
        step meets is thrown into the protocol at that step, as `yield from` would. `cancelled`
        (a threading.Event): once set, the steps stop at once with HandlerCancelled (a sleep is
        cut short; a statement's error is the cancellation's, not the protocol's to record)."""
        clock, add = self.clock, self.recorder.add

        def sleep(step):
            clock.sleep(step.seconds)

        handlers = {
            step_types.Statement: lambda step: db.execute(step.name, step.params, ttl=step.ttl),
            step_types.Record: lambda step: add(
                clock.now(), step.kind, step.worker, step.job, step.attempt, step.detail
            ),
            step_types.Work: sleep,
            step_types.Wait: sleep,
            step_types.Delay: sleep,
            step_types.Begin: lambda _: db.control("BEGIN"),
            step_types.Commit: lambda _: db.control("COMMIT"),
            step_types.Rollback: lambda _: db.abort(),
            step_types.Charge: lambda step: self.charge(step.key),
            step_types.Now: lambda _: db.now(),
            step_types.CrashAt: self._crash_at,
        }
        if cancelled is not None:
            handlers = _cancellable(handlers, cancelled, clock)
        return step_types.play(steps, handlers)

    def _crash_at(self, step: step_types.CrashAt) -> None:
        if self.crash_point is not None:
            self.crash_point(step.point)

    def charge(self, key: str | None) -> str:
        """The PSP call: an idempotency key already seen (by any process) replays."""
        if key is None:
            return "new"
        assert self.psp_dir is not None, "a driver that charges needs psp_dir"
        os.makedirs(self.psp_dir, exist_ok=True)
        try:
            os.close(os.open(os.path.join(self.psp_dir, key), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            return "replay"
        return "new"


def _cancellable(handlers, cancelled, clock):
    """`handlers` that stop the steps with HandlerCancelled once `cancelled` is set: before a step,
    during a sleep (cut short), and in place of the error of a step that failed meanwhile."""

    def guard(handler):
        def guarded(step):
            if cancelled.is_set():
                raise HandlerCancelled
            try:
                return handler(step)
            except Exception:
                if cancelled.is_set():
                    raise HandlerCancelled from None
                raise

        return guarded

    def sleep(step):
        if cancelled.wait(clock.wall(max(step.seconds, 0.0))):
            raise HandlerCancelled

    guarded = {kind: guard(handler) for kind, handler in handlers.items()}
    return {**guarded, step_types.Work: sleep, step_types.Wait: sleep, step_types.Delay: sleep}
