"""The lock waits of PostgresBackend's clients, settled in the simulation's order.

Determinism. The driver runs one statement at a time, so a wait is reported only once its holder
waits for the driver (idle in its transaction, or blocked itself), and a statement that would
close a cycle of waits is cancelled at once and fails with 40P01, as in MemoryBackend, instead of
leaving the victim to PostgreSQL's wall-clock deadlock timer. When a transaction ends, PostgreSQL
wakes all of its waiters at once and lets them race for the row (two UPDATEs queued on one row
both chase its new version); the simulation resumes them one by one, in the order they began to
wait. On a server running on this machine (the embedded one, or a local DSN whose server
processes this user may signal), the driver reproduces that order: before a transaction can
release locks (its COMMIT, ROLLBACK or crash, or any statement inside it, which could fail), the
server processes of its waiters are paused with SIGSTOP, each only while it sleeps in its lock
wait (stopped inside epoll_wait, so holding none of the server's internal locks), and each goes
on (SIGCONT) only when it is resumed, finishing or waiting again before anything else runs. A
paused waiter granted a row's tuple lock heads that row's queue; statements queued behind it are
reported waiting for its holder. On a remote server pausing is impossible: waiters are then
settled at once in the order they began to wait, which PostgreSQL usually, but not always,
follows; set LEASELAB_PAUSE_WAITERS=0 to get that behaviour locally. A process killed with
SIGKILL while waiters are paused leaves them paused: the next start on the server continues and
ends them (sim.db.leftovers).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import time

import psycopg
from psycopg import abc as psycopg_abc
from psycopg import pq

from sim.db.base import Rows
from sim.db.processes import asleep_in_epoll, process_state

log = logging.getLogger("sim.db.postgres")

FIRST_WAIT_S = 0.0005  # a statement usually finishes well within this; only waits pay it
MAX_WAIT_S = 0.05  # longest pause between two lock checks of one statement

_BLOCKERS = """
WITH w AS (SELECT locktype, relation, page, tuple FROM pg_locks
           WHERE pid = %(pid)s AND NOT granted LIMIT 1)
SELECT b.pid, coalesce(a.state, ''), coalesce(a.wait_event_type, ''), (SELECT locktype FROM w),
       EXISTS (SELECT FROM pg_locks l JOIN w ON w.locktype = 'tuple' AND l.relation = w.relation
               AND l.page = w.page AND l.tuple = w.tuple
               WHERE l.pid = b.pid AND l.granted AND l.locktype = 'tuple')
FROM unnest(pg_blocking_pids(%(pid)s)) AS b(pid) LEFT JOIN pg_stat_activity a ON a.pid = b.pid
ORDER BY b.pid
"""
_CANCEL = "SELECT pg_cancel_backend(%s)"


class _Client:
    """One simulated client: its connection (opened lazily) and transaction state."""

    __slots__ = (
        "conn",
        "pg",
        "fd",
        "tx",
        "pid",
        "prepared",
        "in_tx",
        "begun",
        "crashed",
        "pending",
        "holder",
        "due",
        "piped",
        "cancelled",
        "frozen",
        "signals",
        "since",
        "order",
    )

    def __init__(self) -> None:
        self.conn: psycopg.Connection | None = None
        self.pg: pq.abc.PGconn | None = None
        self.fd = -1
        self.tx: psycopg_abc.Transformer | None = None
        self.pid = 0
        self.prepared: set[bytes] = set()
        self.in_tx = False  # BEGIN issued by the model
        self.begun = False  # ... and sent to the server
        self.crashed = False
        self.pending: str | None = None  # the query that returned Blocked, still on the server
        self.holder: str | None = None  # ... and the client whose transaction it waits for
        self.due = False  # ... which has ended: the statement is to be resumed
        self.piped = False  # the statement in flight went in a pipeline with its BEGIN
        self.cancelled = False  # its statement was cancelled to break a deadlock
        self.frozen = False  # its server process is paused (SIGSTOP)
        self.signals = False  # we may pause its server process
        self.since = 0.0  # when the statement in flight was sent (time.monotonic)
        self.order = 0  # when it began to wait: waiters are settled in this order

    def libpq(self) -> pq.abc.PGconn:
        """The connection's libpq interface; the client is connected (PostgresBackend._open)."""
        assert self.pg is not None, "the client is not connected"
        return self.pg

    def transformer(self) -> psycopg_abc.Transformer:
        """The connection's psycopg Transformer (dumps parameters, loads rows)."""
        assert self.tx is not None, "the client is not connected"
        return self.tx


class LockWaits:
    """PostgresBackend's lock-wait analysis (pg_blocking_pids) and the pausing of waiters; the
    attributes and methods below the annotations are the backend's."""

    _clients: dict[str, _Client]
    _pids: dict[int, str]
    _locktype: str

    def admin(
        self, statement: psycopg_abc.QueryNoTemplate, params: psycopg_abc.Params | None = None
    ) -> Rows:
        raise NotImplementedError

    def _poll(self, state: _Client, timeout: float) -> bool:
        raise NotImplementedError

    def _cancel(self, state: _Client) -> None:
        """Break a deadlock at the statement closing the cycle, as MemoryBackend does, instead of
        leaving PostgreSQL's detector to pick a victim by wall-clock wait time."""
        if not state.cancelled:
            state.cancelled = True
            self.admin(_CANCEL, (state.pid,))

    def _lock_holder(self, pid: int) -> tuple[int, bool] | None:
        """(backend pid, is it waiting itself) of the transaction holding the lock `pid` waits
        for, once that transaction waits for the driver: idle in it, or waiting on a lock. None
        while `pid` does not wait or its holder is still running. A wait for a row's tuple lock
        (others queued ahead for the same row) is followed to the head of that queue, and from
        there to the row's holder."""
        seen = set()
        while pid not in seen:
            seen.add(pid)
            rows = self.admin(_BLOCKERS, {"pid": pid})
            if len(seen) == 1:
                self._locktype = rows[0][3] or "" if rows else ""
            if not rows and len(seen) > 1:
                return self._paused_head(pid)
            if rows and rows[0][3] == "tuple":
                heads = [p for p, _, _, _, head in rows if head] or [
                    p for p, _, wait, _, _ in rows if wait == "Lock"
                ]
                if not heads:
                    return None
                pid = heads[0]
                continue
            stable = sorted(
                (self._pids[p], p, wait == "Lock")
                for p, activity, wait, _, _ in rows
                if p in self._pids
                and (activity.startswith("idle in transaction") or wait == "Lock")
            )
            return stable[0][1:] if stable else None
        return None

    def _paused_head(self, pid: int) -> tuple[int, bool] | None:
        """The head of a row's queue waits for nothing: it is one of our paused waiters, granted
        the row's tuple lock while paused. Its own holder is the row's holder. If that holder has
        already ended (a direct caller has not resumed the waiter yet; the simulation resumes at
        once), let the waiter go on now, as PostgreSQL would have, and look again later."""
        head = self._clients.get(self._pids.get(pid, ""))
        if head is None or not head.frozen or head.holder is None:
            return None
        if head.due:
            self._thaw(head)
            return None
        holder = self._clients.get(head.holder)
        if holder is None or holder.conn is None:
            return None
        return holder.pid, holder.pending is not None

    def _waits_on(self, pid: int, target: int) -> bool:
        """Does the chain of lock waits starting at `pid` reach `target`?"""
        seen = set()
        while pid not in seen:
            seen.add(pid)
            found = self._lock_holder(pid)
            if found is None:
                return False
            pid, waiting = found
            if pid == target:
                return True
            if not waiting:
                return False
        return False

    # ---- waiters: paused while their holder ends, let go one by one ---------------------------

    def _freeze_waiters_of(self, holder: str) -> None:
        """Pause the server processes of the statements waiting on `holder`'s transaction, which
        is about to end (or may end, by an error): each goes on when the simulation resumes it."""
        for state in self._clients.values():
            if state.holder == holder and not state.frozen and state.signals:
                state.frozen = self._pause(state.pid)
                state.signals = state.frozen

    @staticmethod
    def _pause(pid: int) -> bool:
        """SIGSTOP a waiting server process, but only where it sleeps in its lock wait (stopped
        inside epoll_wait, so holding none of the server's internal locks); a process caught
        elsewhere (just woken, say) is let go and tried again a moment later."""
        for attempt in range(50):
            try:
                os.kill(pid, signal.SIGSTOP)
            except OSError:
                return False
            deadline = time.monotonic() + 0.05
            while process_state(pid) not in ("T", "") and time.monotonic() < deadline:
                time.sleep(0)  # a signal takes effect when its target next runs
            if asleep_in_epoll(pid):
                return True
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGCONT)
            time.sleep(0.0001 * (attempt + 1))
        log.warning("could not pause server process %d in its lock wait", pid)
        return False

    def _thaw(self, state: _Client) -> None:
        if state.frozen:
            state.frozen = False
            with contextlib.suppress(OSError):
                os.kill(state.pid, signal.SIGCONT)

    def _thaw_all(self) -> bool:
        frozen = [s for s in self._clients.values() if s.frozen]
        for state in frozen:
            self._thaw(state)
            state.signals = False
        return bool(frozen)

    def _holder_gone(self, client: str) -> None:
        """`client`'s transaction ended (its locks are released): its waiters are due."""
        for state in self._clients.values():
            if state.holder == client:
                state.due = True
        self._settle_waiters()

    def _settle_waiters(self) -> None:
        """After locks were released, let waiters that could not be paused run, in the order they
        began to wait, until they finish or wait again (best effort: see the module docstring)."""
        waiting = sorted(
            (s.order, c)
            for c, s in self._clients.items()
            if s.pending is not None and not s.signals and s.conn is not None
        )
        for _, client in waiting:
            state = self._clients[client]
            give_up = time.monotonic() + MAX_WAIT_S * 20
            while not self._poll(state, FIRST_WAIT_S):
                if self._lock_holder(state.pid) is not None or time.monotonic() > give_up:
                    break  # waiting again (or on someone else): its resume will tell
