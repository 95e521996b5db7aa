"""A worker: claims jobs by lease, renews them by heartbeat, calls the PSP, completes them.

The worker is a SimPy process; a crash is an interrupt. Stop-the-world pauses freeze its
progress and its heartbeat (both resume when the pause ends). A rejected heartbeat tells the
worker its lease is gone; it abandons the job at its next checkpoint (or, as a zombie with
abandon_on_lost_lease off, goes on and relies on fencing). With a worker-side deadline the job's
handler runs as a process of its own: at the deadline the worker fails the job for a retry and
moves on, the handler keeping its connection and running to its end (pg-boss #555). A graceful
shutdown releases the job before the worker stops (Solid Queue); a crash leaves it leased.
"""

from __future__ import annotations

import simpy

from sim.db.base import to_micros
from sim.db.errors import DatabaseError
from sim.model.session import DbSession, DbUnavailable


class _CrashPoint(Exception):
    """The worker dies at a scripted point of interest (it cannot interrupt itself)."""


class Lease:
    """The worker's own view of the lease it holds."""

    __slots__ = ("job", "attempt", "until", "lost", "done", "db")

    def __init__(self, job: int, attempt: int, until: float, db: DbSession):
        self.job = job
        self.attempt = attempt
        self.until = until
        self.lost = False
        self.done = False
        self.db = db  # the connection its handler completes on


class Worker:
    def __init__(self, world, index: int, *, skew: float, pauses, partitions):
        self.world = world
        self.env = world.env
        self.name = f"w{index}"
        self.policy = world.scenario.policy
        self.log = world.log
        self.pauses = pauses if pauses else None  # an OutageCalendar with outages, or None
        streams = world.streams
        latency = world.scenario.workload.statement_latency
        partitions = partitions if partitions else None
        self.db = DbSession(
            world,
            self.name,
            latency.sampler(streams.generator(f"latency/{self.name}")),
            skew=skew,
            partitions=partitions,
        )
        self.hb_db = DbSession(
            world,
            f"{self.name}/hb",
            latency.sampler(streams.generator(f"latency/{self.name}/hb")),
            skew=skew,
            partitions=partitions,
        )
        faults = world.scenario.faults
        self._phase = (
            float(streams.generator(f"worker/{index}/phase").uniform(0, self.policy.poll_interval))
            if self.policy.random_phase
            else 0.0
        )
        self._restart_delay = faults.restart_delay.sampler(
            streams.generator(f"worker/{index}/restart")
        )
        self._psp_call = world.scenario.workload.psp_call.sampler(
            streams.generator(f"worker/{index}/psp")
        )
        self._hb_delay = faults.heartbeat_delay.sampler(
            streams.generator(f"worker/{index}/hb-delay")
        )
        self._hb_loss = streams.generator(f"worker/{index}/hb-loss")
        self.up = True
        self.lease: Lease | None = None
        self.heartbeat_proc: simpy.Process | None = None
        self.handler: simpy.Process | None = (
            None  # the job's handler, when it runs as a process (deadline)
        )
        self.orphans: list[
            tuple[simpy.Process, Lease]
        ] = []  # handlers still running past their deadline
        self._sessions = 0  # connections opened for the worker after a deadline
        self.process = self.env.process(self.run())

    # ---- life cycle ---------------------------------------------------------------------------

    def run(self):
        delay = self._phase
        while True:
            try:
                yield self.env.timeout(delay)
                yield from self._serve()
            except (simpy.Interrupt, _CrashPoint) as stop:
                lease = self.lease
                graceful = (
                    isinstance(stop, simpy.Interrupt)
                    and self.world.scenario.faults.shutdown == "graceful"
                )
                self._die("shutdown" if graceful else "crash")
                if graceful and lease is not None:
                    yield from self._release(lease)
                yield self.env.timeout(self._restart_delay())
                self.db.reconnect()
                self.hb_db.reconnect()
                self.up = True
                self.log.add(self.env.now, "restart", self.name)
                delay = 0.0

    def _die(self, kind: str = "crash") -> None:
        lease = self.lease
        self.up = False
        if lease is None:
            self.log.add(self.env.now, kind, self.name)
        else:
            self.log.add(self.env.now, kind, self.name, lease.job, lease.attempt, lease.until)
        if lease is not None:
            lease.done = True
        if self.heartbeat_proc is not None and self.heartbeat_proc.is_alive:
            self.heartbeat_proc.interrupt("crash")
        if self.handler is not None and self.handler.is_alive:
            self.handler.interrupt("crash")
        self.handler = None
        for handler, orphan in self.orphans:  # handlers past their deadline die with the process
            orphan.done = True
            if handler.is_alive:
                handler.interrupt("crash")
            orphan.db.crash()
        self.orphans.clear()
        self.db.crash()
        self.hb_db.crash()
        self.lease = None

    def _release(self, lease: Lease):
        """Graceful shutdown: on a fresh connection, give the job back (fenced) before the process exits."""
        self.db.reconnect()
        try:
            rows = yield from self.db.run(
                "release_job_fenced",
                {
                    "id": lease.job,
                    "owner": self.name,
                    "attempt": lease.attempt,
                    "max_attempts": self.policy.max_attempts,
                },
                job=lease.job,
            )
        except DbUnavailable:
            rows = []
        self.log.add(
            self.env.now,
            "release",
            self.name,
            lease.job,
            lease.attempt,
            rows[0][1] if rows else None,
        )
        self.db.crash()  # the process exits; the restart opens a new connection

    def _serve(self):
        poll = self.policy.poll_interval
        while True:
            try:
                claimed = yield from self._claim()
            except DbUnavailable:
                self.log.add(self.env.now, "db_error", self.name, None, None, "claim")
                yield from self._sleep(poll)
                continue
            if claimed is None:
                self.log.add(self.env.now, "idle", self.name)
                yield from self._sleep(poll)
                continue
            job, attempt, until = claimed
            self.lease = lease = Lease(job, attempt, until, self.db)
            if self.policy.heartbeat:
                # a plain timer, not a process: most jobs end before their first heartbeat is due
                self.env.timeout(self.policy.heartbeat_interval).callbacks.append(
                    lambda _, lease=lease: self._start_heartbeat(lease)
                )
            if self.policy.deadline:
                yield from self._process_within_deadline(lease)
                continue
            try:
                yield from self._process(lease)
            except DbUnavailable as exc:
                self.log.add(self.env.now, "db_error", self.name, job, attempt, str(exc))
            lease.done = True
            self.lease = None

    # ---- worker-side deadline (pg-boss's expireIn in work()) ----------------------------------

    def _process_within_deadline(self, lease: Lease):
        """Run the handler as a process; at the deadline fail the job for a retry and move on,
        leaving the handler running on its own connection (the slot is freed, the work is not)."""
        self.handler = handler = self.env.process(self._handler(lease))
        yield handler | self.env.timeout(self.policy.deadline)
        self.lease = self.handler = None
        if not handler.is_alive:
            return
        self.orphans.append((handler, lease))
        self._sessions += 1
        self.db = DbSession(
            self.world,
            f"{self.name}/{self._sessions}",
            self.db.latency,
            skew=self.db.skew,
            partitions=self.db.partitions,
        )
        params = {
            "id": lease.job,
            "owner": self.name,
            "attempt": lease.attempt,
            "max_attempts": self.policy.max_attempts,
            "retry_backoff": to_micros(self.policy.retry_backoff),
        }
        try:
            rows = yield from self.db.run("fail_job_fenced", params, job=lease.job)
        except DbUnavailable:
            self.log.add(
                self.env.now, "db_error", self.name, lease.job, lease.attempt, "fail_job_fenced"
            )
            return
        self.log.add(
            self.env.now,
            "deadline",
            self.name,
            lease.job,
            lease.attempt,
            rows[0][1] if rows else None,
        )

    def _handler(self, lease: Lease):
        """Process: the job's handler; a crash point in a handler past its deadline kills the worker too."""
        try:
            yield from self._process(lease)
        except DbUnavailable as exc:
            self.log.add(self.env.now, "db_error", self.name, lease.job, lease.attempt, str(exc))
        except _CrashPoint:
            if lease is self.lease:
                raise
            if self.up:
                self.process.interrupt("crash")
        except (simpy.Interrupt, DatabaseError):
            pass  # the worker died under it
        finally:
            lease.done = True
            if any(
                orphan is lease for _, orphan in self.orphans
            ):  # past its deadline: close its connection
                self.orphans = [(h, orphan) for h, orphan in self.orphans if orphan is not lease]
                lease.db.crash()

    # ---- time, frozen by pauses ---------------------------------------------------------------

    def _busy(self, work: float) -> simpy.Timeout:
        """The event that ends `work` seconds of progress; stop-the-world pauses stretch it."""
        if self.pauses:
            return self.env.timeout(self.pauses.work_end(self.env.now, work) - self.env.now)
        return self.env.timeout(work)

    def _thaw(self):
        """Generator: if a pause is in progress, nothing runs until it ends."""
        if self.pauses:
            end = self.pauses.end_of(self.env.now)
            if end is not None:
                yield self.env.timeout(end - self.env.now)

    def _sleep(self, seconds: float):
        yield self.env.timeout(seconds)
        if self.pauses:
            yield from self._thaw()

    # ---- claiming -----------------------------------------------------------------------------

    def _claim(self):
        """Generator: returns (job, attempt, lease_until) or None when nothing could be claimed."""
        strategy = self.policy.claim
        if strategy == "skip_locked":
            params = {
                "owner": self.name,
                "take_expired": self.policy.claim_takes_expired,
                "max_attempts": self.policy.max_attempts,
            }
            rows = yield from self.db.run("claim_skip_locked", params, ttl=self.policy.lease_ttl)
            return self._claimed(rows, params)
        if strategy == "select_for_update":
            return (yield from self._claim_select_for_update())
        while True:
            candidates = yield from self.db.run(
                "select_candidates",
                {
                    "take_expired": self.policy.claim_takes_expired,
                    "max_attempts": self.policy.max_attempts,
                    "limit": self.policy.candidates,
                },
            )
            if not candidates:
                return None
            if self.policy.select_to_update_gap:
                yield self._busy(self.policy.select_to_update_gap)
            for row in candidates:
                query = (
                    "claim_conditional"
                    if strategy == "conditional_update"
                    else "claim_unconditional"
                )
                params = {
                    "id": row[0],
                    "owner": self.name,
                    "max_attempts": self.policy.max_attempts,
                }
                rows = yield from self.db.run(query, params, job=row[0], ttl=self.policy.lease_ttl)
                if rows:
                    return self._claimed(rows, params)
                self.log.add(self.env.now, "claim_lost", self.name, row[0])

    def _claim_select_for_update(self):
        self.db.begin()
        rows = yield from self.db.run(
            "lock_next_candidate",
            {
                "take_expired": self.policy.claim_takes_expired,
                "max_attempts": self.policy.max_attempts,
            },
        )
        if not rows:
            yield from self.db.commit()
            return None
        job = rows[0][0]
        if self.policy.select_to_update_gap:
            yield self._busy(self.policy.select_to_update_gap)
        params = {"id": job, "owner": self.name, "max_attempts": self.policy.max_attempts}
        rows = yield from self.db.run(
            "claim_unconditional", params, job=job, ttl=self.policy.lease_ttl
        )
        yield from self.db.commit()
        return self._claimed(rows, params)

    def _claimed(self, rows, params: dict):
        """The claim's outcome; lease_until is the value the statement wrote."""
        if not rows:
            return None
        job, attempt = rows[0]
        until = params["lease_until"]
        self.log.add(self.env.now, "claim", self.name, job, attempt, until)
        return job, attempt, until

    # ---- processing ---------------------------------------------------------------------------

    def _process(self, lease: Lease):
        spec = self.world.catalog[lease.job]
        psp_at = self.world.scenario.workload.psp_at
        yield self._busy(spec.work * psp_at)
        if self._gave_up(lease):
            return
        yield from self._charge(lease, spec)
        yield self._busy(spec.work * (1 - psp_at))
        if self._gave_up(lease):
            return
        yield from self._complete(lease, spec)

    def _gave_up(self, lease: Lease) -> bool:
        if lease.lost and self.policy.abandon_on_lost_lease:
            self.log.add(self.env.now, "abandon", self.name, lease.job, lease.attempt, lease.until)
            return True
        return False

    def _charge(self, lease: Lease, spec):
        key = spec.event_id if self.policy.idempotency_key else None
        self.world.psp.charge(self.name, lease.job, lease.attempt, key)
        yield self.env.timeout(self._psp_call())
        if self.pauses:
            yield from self._thaw()
        self._crash_point("after_psp")

    def _complete(self, lease: Lease, spec):
        """One transaction: [dedup marker], ledger effect, completion (fenced or not)."""
        lease.done = True  # no heartbeats while the completion transaction holds the row
        db, job, attempt = lease.db, lease.job, lease.attempt
        db.begin()
        apply_effect = True
        if self.policy.dedup:
            marker = yield from db.run(
                "insert_dedup_marker",
                {"event_id": spec.event_id, "payload_hash": spec.payload_hash},
                job=job,
            )
            if marker:
                self._crash_point("after_marker")
            else:
                apply_effect = False
                stored = yield from db.run(
                    "read_dedup_marker", {"event_id": spec.event_id}, job=job
                )
                if stored and stored[0][1] != spec.payload_hash:
                    yield from self._reject(
                        lease, "payload differs from the first delivery of this event id"
                    )
                    return
        if apply_effect:
            yield from db.run(
                "insert_ledger_entry",
                {
                    "job_id": job,
                    "event_id": spec.event_id,
                    "amount_cents": spec.amount_cents,
                    "worker": self.name,
                    "attempt": attempt,
                },
                job=job,
            )
        if self.policy.fencing:
            done = yield from db.run(
                "complete_fenced", {"id": job, "owner": self.name, "attempt": attempt}, job=job
            )
        else:
            done = yield from db.run("complete_unfenced", {"id": job}, job=job)
        if not done:
            yield from db.rollback()
            self.log.add(self.env.now, "complete_rejected", self.name, job, attempt, lease.until)
            return
        yield from db.commit()
        now = self.env.now
        if apply_effect:
            self.log.add(now, "effect", self.name, job, attempt, spec.event_id)
        else:
            self.log.add(now, "dedup_skip", self.name, job, attempt, spec.event_id)
        self.log.add(now, "complete", self.name, job, attempt, lease.until)

    def _crash_point(self, point: str) -> None:
        if self.world.crash_points.configs and self.world.crash_points.fires(point):
            raise _CrashPoint(point)

    def _reject(self, lease: Lease, reason: str):
        db = lease.db
        rows = yield from db.run(
            "reject_job_fenced",
            {"id": lease.job, "owner": self.name, "attempt": lease.attempt, "error": reason},
            job=lease.job,
        )
        if rows:
            yield from db.commit()
            self.log.add(
                self.env.now, "payload_conflict", self.name, lease.job, lease.attempt, reason
            )
        else:
            yield from db.rollback()
            self.log.add(
                self.env.now, "complete_rejected", self.name, lease.job, lease.attempt, lease.until
            )

    # ---- heartbeat ----------------------------------------------------------------------------

    def _start_heartbeat(self, lease: Lease) -> None:
        if not lease.done:
            self.heartbeat_proc = self.env.process(self._heartbeat(lease, self.heartbeat_proc))

    def _heartbeat(self, lease: Lease, previous: simpy.Process | None):
        """Process: renew the lease now and every heartbeat_interval until the job is done or the lease lost."""
        interval, ttl = self.policy.heartbeat_interval, self.policy.lease_ttl
        faults = self.world.scenario.faults
        record = self.world.scenario.record_heartbeats
        try:
            yield from self._thaw()
            if previous is not None and previous.is_alive:
                yield previous  # the last lease's heartbeat statement is still in flight
            while not lease.done:
                if faults.heartbeat_loss and self._hb_loss.random() < faults.heartbeat_loss:
                    self.log.add(
                        self.env.now, "heartbeat_lost", self.name, lease.job, lease.attempt
                    )
                else:
                    delay = self._hb_delay()
                    if delay:
                        yield self.env.timeout(delay)
                    try:
                        rows = yield from self.hb_db.run(
                            "heartbeat",
                            {"id": lease.job, "owner": self.name, "attempt": lease.attempt},
                            job=lease.job,
                            ttl=ttl,
                        )
                    except DbUnavailable:
                        self.log.add(
                            self.env.now,
                            "db_error",
                            self.name,
                            lease.job,
                            lease.attempt,
                            "heartbeat",
                        )
                        rows = None
                        if (
                            self.hb_db.now() >= lease.until
                        ):  # cannot renew and the lease ran out: fail safe
                            lease.lost = True
                    if lease.done:
                        return
                    if rows:
                        lapsed = lease.until < self.hb_db.now()
                        lease.until = rows[0][1]
                        if (
                            record or lapsed
                        ):  # a renewal after a lapse is always kept: it shows a false expiry
                            self.log.add(
                                self.env.now,
                                "heartbeat",
                                self.name,
                                lease.job,
                                lease.attempt,
                                lease.until,
                            )
                    elif rows is not None:
                        lease.lost = True
                        self.log.add(
                            self.env.now, "heartbeat_rejected", self.name, lease.job, lease.attempt
                        )
                        return
                yield from self._sleep(interval)
        except simpy.Interrupt:
            return
        except DatabaseError:
            return  # the connection died with the worker
