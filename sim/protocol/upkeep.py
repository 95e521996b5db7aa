"""What keeps a worker's lease and process known to the database: the lease heartbeat, the release
at a graceful shutdown, the failure at the worker-side deadline, and the process row and its
heartbeat (process liveness)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from sim.protocol.failures import DbUnavailable
from sim.protocol.lease import Lease
from sim.protocol.steps import NOW, Delay, Record, Statement, Steps
from sim.protocol.timestamps import to_micros


class LeaseUpkeep:
    """A worker's heartbeat, release and deadline failure (each fenced by owner and attempt).
    hb_delay samples a heartbeat's network delay; hb_loss and release_draw (numpy Generators) are
    the worker's own streams; scripted_delay (sim.scenario.pinned.HeartbeatFault) gives the extra
    delay of a heartbeat sent now, inf when it is lost (None: none scripted)."""

    def __init__(
        self,
        name: str,
        scenario: Any,
        *,
        hb_delay: Callable[[], float],
        hb_loss: np.random.Generator,
        release_draw: np.random.Generator | None = None,
        scripted_delay: Callable[[], float] | None = None,
    ):
        policy = scenario.policy
        self.name = name
        self.ttl = policy.lease_ttl
        self.record_heartbeats = scenario.record_heartbeats
        self.heartbeat_loss = scenario.faults.heartbeat_loss
        self.release_loss = scenario.faults.release_loss
        if self.release_loss and release_draw is None:
            raise ValueError("faults.release_loss > 0 needs the worker's release_loss stream")
        self.hb_delay, self.hb_loss, self.release_draw = hb_delay, hb_loss, release_draw
        self.scripted_delay = scripted_delay
        self.max_attempts = policy.claim_cap
        self.retry_backoff = to_micros(policy.retry_backoff)
        self.cancels = policy.deadline_action == "cancel"

    def renew(self, lease: Lease) -> Steps[bool]:
        """One heartbeat (fenced by owner and attempt). True: renew again after the interval;
        False: stop (the job is done, or the lease is gone)."""
        name, job, attempt = self.name, lease.job, lease.attempt
        loss = self.heartbeat_loss
        scripted = self.scripted_delay() if self.scripted_delay is not None else 0.0
        if scripted == math.inf or (loss and self.hb_loss.random() < loss):
            yield Record("heartbeat_lost", name, job, attempt, None)
            return True
        delay = self.hb_delay() + scripted
        if delay:
            yield Delay(delay)
        step = lease.renewal
        if step is None:
            params = {"id": job, "owner": name, "attempt": attempt}
            ttl = self.ttl if lease.cap is None else (self.ttl, lease.cap)
            step = lease.renewal = Statement("heartbeat", params, job, ttl)
        try:
            rows = yield step
        except DbUnavailable:
            yield Record("db_error", name, job, attempt, "heartbeat")
            if (yield NOW) >= lease.until:  # cannot renew and the lease ran out: fail safe
                lease.lost = True
            return not lease.done
        if lease.done:
            return False
        if rows:
            now = yield NOW
            lapsed = lease.until < now
            lease.extend(rows[0][1])
            if self.record_heartbeats or lapsed:  # a renewal after a lapse shows a false expiry
                yield Record("heartbeat", name, job, attempt, lease.until)
            if lease.cap is not None and lease.until <= now:  # the execution timeout has passed:
                lease.lost = True  # the server has failed this attempt, the worker gives it up
                yield Record("execution_timeout", name, job, attempt, lease.cap)
                return False
            return True
        lease.lost = True
        yield Record("heartbeat_rejected", name, job, attempt, None)
        return False

    def _give_back(self, lease: Lease, **params: Any) -> dict[str, Any]:
        """The parameters of a statement that hands the owner's job back (fenced)."""
        owned = {"id": lease.job, "owner": self.name, "attempt": lease.attempt}
        return {**owned, "max_attempts": self.max_attempts, **params}

    def release(self, lease: Lease) -> Steps[None]:
        """Graceful shutdown: give the job back (fenced) before the process exits; with
        faults.release_loss the release may never reach the database (kombu #1835)."""
        if self.release_loss:
            assert self.release_draw is not None
            if self.release_draw.random() < self.release_loss:
                yield Record("release_lost", self.name, lease.job, lease.attempt, None)
                return
        params = self._give_back(lease)
        try:
            rows = yield Statement("release_job_fenced", params, lease.job)
        except DbUnavailable:
            rows = []
        yield Record("release", self.name, lease.job, lease.attempt, rows[0][1] if rows else None)

    def fail_at_deadline(self, lease: Lease) -> Steps[None]:
        """The worker-side deadline: fail the job for a retry (fenced), the handler running on, or
        stopped first (policy.deadline_action = cancel: the driver has stopped it, its open
        transaction rolled back)."""
        params = self._give_back(lease, retry_backoff=self.retry_backoff)
        name, job, attempt = self.name, lease.job, lease.attempt
        if self.cancels:
            yield Record("cancel", name, job, attempt, None)
        try:
            rows = yield Statement("fail_job_fenced", params, job)
        except DbUnavailable:
            yield Record("db_error", name, job, attempt, "fail_job_fenced")
            return
        yield Record("deadline", name, job, attempt, rows[0][1] if rows else None)


class ProcessRow:
    """Process liveness: the worker process's row and its heartbeat, whatever jobs it holds."""

    def __init__(self, name: str):
        self.name = name
        self._register = Statement("register_process", {"owner": name})
        self._beat = Statement("process_heartbeat", {"owner": name})

    def register(self) -> Steps[bool]:
        """The process writes its row (and first heartbeat): at start, after a restart, and when its
        heartbeat found the row pruned. True: registered."""
        try:
            yield self._register
        except DbUnavailable:
            yield Record("db_error", self.name, None, None, "register_process")
            return False
        yield Record("register", self.name, None, None, None)
        return True

    def beat_process(self) -> Steps[None]:
        """One process heartbeat; a row gone means the prune took this process for dead: it says so
        and registers again (its jobs may have been moved meanwhile)."""
        try:
            rows = yield self._beat
        except DbUnavailable:
            yield Record("db_error", self.name, None, None, "process_heartbeat")
            return
        if not rows:
            yield Record("process_pruned", self.name, None, None, None)
            yield from self.register()
