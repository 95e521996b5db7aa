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

from sim import protocol


class HandlerCancelled(Exception):
    """A handler's steps stop: its worker cancelled it at the deadline (deadline_action =
    cancel). Nothing more of it is sent or recorded."""


class LiveDriver:
    """Runs protocol generators on the wall clock; `psp_dir` holds the PSP's idempotency keys;
    `crash_point(point)` (if given) ends the process when a scripted crash fires there."""

    def __init__(self, clock, recorder, psp_dir: str | None = None, crash_point=None):
        self.clock, self.recorder, self.psp_dir = clock, recorder, psp_dir
        self.crash_point = crash_point

    def run(self, steps, db, cancelled=None):
        """Play `steps` with statements on connection `db`; returns what they return. An error a
        step meets is thrown into the protocol at that step, as `yield from` would. `cancelled`
        (a threading.Event): once set, the steps stop at once with HandlerCancelled (a sleep is
        cut short; a statement's error is the cancellation's, not the protocol's to record)."""
        clock, add = self.clock, self.recorder.add
        value = error = None
        while True:
            try:
                step = steps.send(value) if error is None else steps.throw(error)
            except StopIteration as done:
                return done.value
            value = error = None
            if cancelled is not None and cancelled.is_set():
                steps.close()
                raise HandlerCancelled
            op = step[0]
            try:
                if op == protocol.STATEMENT:
                    value = db.run(step[1], step[2], ttl=step[4])
                elif op == protocol.RECORD:
                    add(clock.now(), step[1], step[2], step[3], step[4], step[5])
                elif op in (protocol.WORK, protocol.WAIT, protocol.DELAY):
                    if cancelled is None:
                        clock.sleep(step[1])
                    elif cancelled.wait(clock.wall(max(step[1], 0.0))):
                        steps.close()
                        raise HandlerCancelled
                elif op == protocol.BEGIN_OP:
                    db.control("BEGIN")
                elif op == protocol.COMMIT_OP:
                    db.control("COMMIT")
                elif op == protocol.ROLLBACK_OP:
                    db.abort()
                elif op == protocol.CHARGE:
                    value = self.charge(step[1])
                elif op == protocol.NOW_OP:
                    value = db.now()
                elif op == protocol.CRASH_POINT:
                    if self.crash_point is not None:
                        self.crash_point(step[1])
                else:
                    raise ValueError(f"unknown protocol step {step!r}")
            except HandlerCancelled:
                raise
            except Exception as exc:  # a lost connection, a server error
                if cancelled is not None and cancelled.is_set():
                    steps.close()
                    raise HandlerCancelled from None
                error = exc

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
