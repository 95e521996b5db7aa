"""The lease protocol, once: what a worker and the stuck watcher send to the database, in which
order, and what they record, for every claim strategy, completion, heartbeat and watcher tick.

Each protocol function is a generator of *steps*. It yields a step, receives its result (or has
its error thrown in) and goes on, so one text runs under two drivers, as SimPy's real-time
environment runs the same processes on the wall clock: sim.model.driver plays the steps in
simulated time (statements on a DbSession, work frozen by pauses), sim.live_mode.driver as blocking
calls on a real connection and sleeps on the shared clock. A step is a plain tuple whose first
item says what to do (one tuple per step, built once where it can be):

  (STATEMENT, name, params, job, ttl)  run a named statement; the driver binds `now` when it
                                       executes, and lease_until = now + ttl (bind_clock) -> rows;
                                       a ttl (seconds, cap) caps lease_until at cap
  BEGIN, COMMIT, ROLLBACK              transaction control (BEGIN travels with the first statement;
                                       ROLLBACK never fails: a dead connection has nothing open)
  (WORK, seconds)                      the process computes: a stop-the-world pause stretches it
  (WAIT, seconds)                      the process sleeps; it goes on once no pause holds it
  (DELAY, seconds)                     time passes outside the process (the network holds a message)
  (CHARGE, key)                        the PSP charges the card -> "new", or "replay" for a key seen
  (RECORD, kind, worker, job, attempt, detail)  one event record, stamped with the driver's time
                                       (the arguments of EventLog.add and the live Recorder.add)
  NOW                                  -> the client's clock (a worker's own, skew included)
  (CRASH_POINT, point)                 a scripted fault may kill the process here

Errors reach the protocol as the driver met them: DbUnavailable (no connection: a partition),
StatementError (the server refused a statement), and the driver's own (a crash) pass through.
"""

from __future__ import annotations

import math

from sim.db.base import to_micros
from sim.db.errors import DbUnavailable, StatementError

(
    STATEMENT,
    RECORD,
    WORK,
    WAIT,
    DELAY,
    BEGIN_OP,
    COMMIT_OP,
    ROLLBACK_OP,
    CHARGE,
    NOW_OP,
    CRASH_POINT,
) = range(11)
BEGIN, COMMIT, ROLLBACK, NOW = (BEGIN_OP,), (COMMIT_OP,), (ROLLBACK_OP,), (NOW_OP,)
PAYLOAD_DIFFERS = "payload differs from the first delivery of this event id"
MAX_STALLS = 1_000_000  # bound as max_stalls when there is no stall budget: never reached


def bind_clock(params: dict, now: float, ttl: float | tuple[float, float] | None = None) -> None:
    """The time binding of every time-dependent statement: `now` is the client's clock when the
    statement executes (never the server's now()), and a lease it writes ends at now + ttl, or at
    min(now + ttl, cap) for a ttl given as (ttl, cap): a lease under an execution timeout."""
    params["now"] = now
    if ttl is not None:
        if isinstance(ttl, tuple):
            params["lease_until"] = min(now + ttl[0], ttl[1])
        else:
            params["lease_until"] = now + ttl


class Lease:
    """The worker's own view of the lease it holds (the heartbeat renews `until`)."""

    __slots__ = ("job", "attempt", "until", "lost", "done", "renewal", "cap", "past_deadline")

    def __init__(self, job: int, attempt: int, until: float):
        self.job = job
        self.attempt = attempt
        self.until = until
        self.lost = False  # a heartbeat found it gone (or could not renew it in time)
        self.done = False  # the job is finished or given up: no more heartbeats
        self.past_deadline = False  # the worker-side deadline passed with the handler running
        self.renewal: tuple | None = None  # the heartbeat statement's step, built at the first beat
        self.cap: float | None = None  # claim + execution_timeout: no renewal goes past it

    def finish(self) -> None:
        """No more heartbeats: the job is done, or its completion transaction holds the row."""
        self.done = True

    def extend(self, until: float) -> None:
        """A heartbeat renewed the lease to `until`."""
        self.until = until


class WorkerProtocol:
    """One worker's statement sequences. `catalog[job]` gives the job's spec (work, event, amount);
    psp_call, hb_delay (samplers), hb_loss and release_loss (numpy Generators; release_loss only
    with faults.release_loss > 0) are the worker's own streams."""

    def __init__(
        self,
        name: str,
        scenario,
        catalog,
        *,
        psp_call,
        hb_delay,
        hb_loss,
        release_loss=None,
        lease=Lease,
        scripted_delay=None,
    ):
        policy = scenario.policy
        self.name = name
        self.policy = policy
        self.catalog = catalog
        self.psp_at = scenario.workload.psp_at
        self.record_heartbeats = scenario.record_heartbeats
        self.heartbeat_loss = scenario.faults.heartbeat_loss
        self.crash_points = bool(scenario.faults.crash_points)  # else no point can fire
        self.abandon = policy.abandon_on_lost_lease
        self.idempotency_key = policy.idempotency_key
        self.background = policy.completion == "background"  # the effect commits before completion
        self.drops_late = policy.deadline_action == "drop"  # a result past the deadline is dropped
        self.cancels = policy.deadline_action == "cancel"
        self.psp_call, self.hb_delay, self.hb_loss = psp_call, hb_delay, hb_loss
        # scripted heartbeat faults (sim.scenario.pinned.HeartbeatFault): the extra delay of a
        # heartbeat sent now, inf when it is lost; None: none scripted
        self.scripted_delay = scripted_delay
        self.release_loss = scenario.faults.release_loss
        if self.release_loss and release_loss is None:
            raise ValueError("faults.release_loss > 0 needs the worker's release_loss stream")
        self.release_draw = release_loss
        self.lease_type = lease
        self.ttl = policy.lease_ttl
        self.timeout = policy.execution_timeout  # 0: none
        claim_ttl = min(self.ttl, self.timeout) if self.timeout else self.ttl
        cap = policy.claim_cap  # max_attempts, plus the stall budget if there is one
        self.max_attempts = cap
        self.gap = policy.select_to_update_gap
        take = policy.claim_takes_expired
        # the claim's statements with their parameters, built once (the driver binds now into them)
        self._skip_locked = (
            STATEMENT,
            "claim_skip_locked",
            {"owner": name, "take_expired": take, "max_attempts": cap},
            None,
            claim_ttl,
        )
        self._lock_next = (
            STATEMENT,
            "lock_next_candidate",
            {"take_expired": take, "max_attempts": cap},
            None,
            None,
        )
        self._candidates = (
            STATEMENT,
            "select_candidates",
            {"take_expired": take, "max_attempts": cap, "limit": policy.candidates},
            None,
            None,
        )
        self._by_id = (
            "claim_conditional" if policy.claim == "conditional_update" else "claim_unconditional"
        )
        self._claim_ttl = claim_ttl
        self._poll_wait = (WAIT, policy.poll_interval)
        self._idle = (RECORD, "idle", name, None, None, None)
        self._claim_failed = (RECORD, "db_error", name, None, None, "claim")
        self._batch = (
            STATEMENT,
            "claim_batch",
            {"owner": name, "take_expired": take, "max_attempts": cap, "limit": policy.prefetch},
            None,
            claim_ttl,
        )
        self._register = (STATEMENT, "register_process", {"owner": name}, None, None)
        self._process_beat = (STATEMENT, "process_heartbeat", {"owner": name}, None, None)
        self.claim = {  # the policy's claim strategy (conditional_update, read_then_write: by id)
            "skip_locked": self.claim_skip_locked,
            "select_for_update": self.claim_select_for_update,
        }.get(policy.claim, self.claim_read_then_write)

    # ---- claiming -----------------------------------------------------------------------------

    def poll(self):
        """One turn of the worker's loop: the Lease it claimed (recorded), or None once it has
        recorded why not (nothing to claim, or no database) and waited a poll interval."""
        try:
            lease = yield from self.claim()
        except DbUnavailable:
            yield self._claim_failed
            yield self._poll_wait
            return None
        if lease is None:
            yield self._idle
            yield self._poll_wait
            return None
        yield (RECORD, "claim", self.name, lease.job, lease.attempt, lease.until)
        return lease

    def poll_batch(self):
        """A prefetching worker's poll (policy.prefetch > 1): the leases of up to `prefetch` jobs
        claimed at once, each recorded, oldest first; or [] once it has recorded why not and waited
        a poll interval. Every lease starts now, the buffered ones too."""
        step = self._batch
        try:
            rows = yield step
        except DbUnavailable:
            yield self._claim_failed
            yield self._poll_wait
            return []
        if not rows:
            yield self._idle
            yield self._poll_wait
            return []
        leases = [self._claimed([row], step[2]) for row in rows]
        for lease in leases:
            yield (RECORD, "claim", self.name, lease.job, lease.attempt, lease.until)
        return leases

    def claim_skip_locked(self):
        """One statement takes the next claimable job, skipping rows other claims hold locked."""
        step = self._skip_locked
        return self._claimed((yield step), step[2])

    def claim_select_for_update(self):
        """Lock the next candidate (FOR UPDATE), then write the lease, in one transaction."""
        yield BEGIN
        rows = yield self._lock_next
        if not rows:
            yield COMMIT
            return None
        job = rows[0][0]
        if self.gap:
            yield (WORK, self.gap)
        params = {"id": job, "owner": self.name, "max_attempts": self.max_attempts}
        rows = yield (STATEMENT, "claim_unconditional", params, job, self._claim_ttl)
        yield COMMIT
        return self._claimed(rows, params)

    def claim_read_then_write(self):
        """Read candidates, then claim each by id: conditionally (the seed's UPDATE ... WHERE,
        re-checked on the row) or unconditionally (read-then-write: a lost update)."""
        query, name = self._by_id, self.name
        while True:
            candidates = yield self._candidates
            if not candidates:
                return None
            if self.gap:
                yield (WORK, self.gap)
            for row in candidates:
                job = row[0]
                params = {"id": job, "owner": name, "max_attempts": self.max_attempts}
                rows = yield (STATEMENT, query, params, job, self._claim_ttl)
                if rows:
                    return self._claimed(rows, params)
                yield (RECORD, "claim_lost", name, job, None, None)

    def _claimed(self, rows, params: dict) -> Lease | None:
        """The lease a claim statement returned; its lease_until is the value the statement
        wrote."""
        if not rows:
            return None
        job, attempt = rows[0]
        lease = self.lease_type(job, attempt, params["lease_until"])
        if self.timeout:
            lease.cap = params["now"] + self.timeout
        return lease

    # ---- processing ---------------------------------------------------------------------------

    def handle(self, lease: Lease):
        """The job's handler: work up to the PSP call, charge, work the rest, complete; give up at
        a checkpoint once the lease is known lost (abandon_on_lost_lease). A database lost on the
        way is recorded, not raised."""
        name, job, attempt = self.name, lease.job, lease.attempt
        spec = self.catalog[job]
        try:
            yield (WORK, spec.work * self.psp_at)
            if lease.lost and self.abandon:
                yield (RECORD, "abandon", name, job, attempt, lease.until)
                return
            outcome = yield (CHARGE, spec.event_id if self.idempotency_key else None)
            yield (RECORD, "psp_charge", name, job, attempt, outcome)
            yield (WAIT, self.psp_call())
            if self.crash_points:
                yield (CRASH_POINT, "after_psp")
            yield (WORK, spec.work * (1 - self.psp_at))
            if lease.lost and self.abandon:  # abandon_on_lost_lease: give up at a checkpoint
                yield (RECORD, "abandon", name, job, attempt, lease.until)
                return
            yield from self.complete(lease, spec)
        except DbUnavailable as exc:
            yield (RECORD, "db_error", name, job, attempt, str(exc))

    # ---- completion: effect and completion in one transaction, or the completion after it -----

    def complete(self, lease: Lease, spec):
        """One transaction: [dedup marker], ledger effect, completion (fenced or not). A server
        error inside it rolls it back and is recorded. policy.completion = background: the
        transaction commits the effect alone and the completion follows in a statement of its own
        (the background completer of River, pg-boss, graphile-worker, Oban; its batching delay is
        not modelled), so a refused completion undoes nothing: the effect was committed.

        A result that comes after the worker-side deadline with policy.deadline_action = drop is
        dropped where the worker would send it: the completing transaction is not run (the
        effect commits with the completion), or, in the background, the handler's own
        transaction commits its effect and the completion is not sent."""
        lease.finish()  # no heartbeats while the completion transaction holds the row
        name, job, attempt = self.name, lease.job, lease.attempt
        if lease.past_deadline and self.drops_late and not self.background:
            yield (RECORD, "late_result", name, job, attempt, "dropped")
            return
        try:
            yield BEGIN
            applied = yield from self.apply_effect(lease, spec)
            if applied is None:
                return  # a payload conflict: rejected (or refused) inside the transaction
            if not self.background:
                done = yield self.completion(lease)
                if not done:
                    yield ROLLBACK
                    yield (RECORD, "complete_rejected", name, job, attempt, lease.until)
                    return
            yield COMMIT
        except StatementError:
            yield ROLLBACK
            yield (RECORD, "db_error", name, job, attempt, "complete")
            return
        yield (RECORD, "effect" if applied else "dedup_skip", name, job, attempt, spec.event_id)
        if lease.past_deadline and self.drops_late and self.background:
            yield (RECORD, "late_result", name, job, attempt, "dropped")
            return
        if self.background:
            try:
                done = yield self.completion(lease)
            except StatementError:
                yield (RECORD, "db_error", name, job, attempt, "complete")
                return
            if not done:
                yield (RECORD, "complete_rejected", name, job, attempt, lease.until)
                return
        yield (RECORD, "complete", name, job, attempt, lease.until)

    def apply_effect(self, lease: Lease, spec):
        """Inside the open transaction: the dedup marker (if used), then the ledger row unless the
        marker says this event was applied already. True: applied; False: a duplicate, skipped;
        None: another payload under the same event id, and the job was rejected for it."""
        job = lease.job
        if self.policy.dedup:
            marker = yield (
                STATEMENT,
                "insert_dedup_marker",
                {"event_id": spec.event_id, "payload_hash": spec.payload_hash},
                job,
                None,
            )
            if marker:
                if self.crash_points:
                    yield (CRASH_POINT, "after_marker")
            else:
                stored = yield (
                    STATEMENT,
                    "read_dedup_marker",
                    {"event_id": spec.event_id},
                    job,
                    None,
                )
                if stored and stored[0][1] != spec.payload_hash:
                    yield from self.reject(lease, PAYLOAD_DIFFERS)
                    return None
                return False
        yield (
            STATEMENT,
            "insert_ledger_entry",
            {
                "job_id": job,
                "event_id": spec.event_id,
                "amount_cents": spec.amount_cents,
                "worker": self.name,
                "attempt": lease.attempt,
            },
            job,
            None,
        )
        return True

    def completion(self, lease: Lease) -> tuple:
        """The completion statement's step: fenced by owner and attempt, or by id alone."""
        job = lease.job
        if self.policy.fencing:
            params = {"id": job, "owner": self.name, "attempt": lease.attempt}
            return (STATEMENT, "complete_fenced", params, job, None)
        return (STATEMENT, "complete_unfenced", {"id": job}, job, None)

    def reject(self, lease: Lease, reason: str):
        """Same event id, another payload: the job goes Dead (fenced), committed with the marker."""
        name, job, attempt = self.name, lease.job, lease.attempt
        params = {"id": job, "owner": name, "attempt": attempt, "error": reason}
        rows = yield (STATEMENT, "reject_job_fenced", params, job, None)
        if rows:
            yield COMMIT
            yield (RECORD, "payload_conflict", name, job, attempt, reason)
        else:
            yield ROLLBACK
            yield (RECORD, "complete_rejected", name, job, attempt, lease.until)

    # ---- process liveness ---------------------------------------------------------------------

    def register(self):
        """The process writes its row (and first heartbeat): at start, after a restart, and when its
        heartbeat found the row pruned. True: registered."""
        try:
            yield self._register
        except DbUnavailable:
            yield (RECORD, "db_error", self.name, None, None, "register_process")
            return False
        yield (RECORD, "register", self.name, None, None, None)
        return True

    def beat_process(self):
        """One process heartbeat; a row gone means the prune took this process for dead: it says so
        and registers again (its jobs may have been moved meanwhile)."""
        try:
            rows = yield self._process_beat
        except DbUnavailable:
            yield (RECORD, "db_error", self.name, None, None, "process_heartbeat")
            return
        if not rows:
            yield (RECORD, "process_pruned", self.name, None, None, None)
            yield from self.register()

    # ---- heartbeat, release, deadline ---------------------------------------------------------

    def renew(self, lease: Lease):
        """One heartbeat (fenced by owner and attempt). True: renew again after the interval;
        False: stop (the job is done, or the lease is gone)."""
        name, job, attempt = self.name, lease.job, lease.attempt
        loss = self.heartbeat_loss
        scripted = self.scripted_delay() if self.scripted_delay is not None else 0.0
        if scripted == math.inf or (loss and self.hb_loss.random() < loss):
            yield (RECORD, "heartbeat_lost", name, job, attempt, None)
            return True
        delay = self.hb_delay() + scripted
        if delay:
            yield (DELAY, delay)
        step = lease.renewal
        if step is None:
            params = {"id": job, "owner": name, "attempt": attempt}
            ttl = self.ttl if lease.cap is None else (self.ttl, lease.cap)
            step = lease.renewal = (STATEMENT, "heartbeat", params, job, ttl)
        try:
            rows = yield step
        except DbUnavailable:
            yield (RECORD, "db_error", name, job, attempt, "heartbeat")
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
                yield (RECORD, "heartbeat", name, job, attempt, lease.until)
            if lease.cap is not None and lease.until <= now:  # the execution timeout has passed:
                lease.lost = True  # the server has failed this attempt, the worker gives it up
                yield (RECORD, "execution_timeout", name, job, attempt, lease.cap)
                return False
            return True
        lease.lost = True
        yield (RECORD, "heartbeat_rejected", name, job, attempt, None)
        return False

    def _give_back(self, lease: Lease, **params) -> dict:
        """The parameters of a statement that hands the owner's job back (fenced)."""
        owned = {"id": lease.job, "owner": self.name, "attempt": lease.attempt}
        return {**owned, "max_attempts": self.max_attempts, **params}

    def release(self, lease: Lease):
        """Graceful shutdown: give the job back (fenced) before the process exits; with
        faults.release_loss the release may never reach the database (kombu #1835)."""
        if self.release_loss and self.release_draw.random() < self.release_loss:
            yield (RECORD, "release_lost", self.name, lease.job, lease.attempt, None)
            return
        params = self._give_back(lease)
        try:
            rows = yield (STATEMENT, "release_job_fenced", params, lease.job, None)
        except DbUnavailable:
            rows = []
        yield (RECORD, "release", self.name, lease.job, lease.attempt, rows[0][1] if rows else None)

    def fail_at_deadline(self, lease: Lease):
        """The worker-side deadline: fail the job for a retry (fenced), the handler running on, or
        stopped first (policy.deadline_action = cancel: the driver has stopped it, its open
        transaction rolled back)."""
        params = self._give_back(lease, retry_backoff=to_micros(self.policy.retry_backoff))
        name, job, attempt = self.name, lease.job, lease.attempt
        if self.cancels:
            yield (RECORD, "cancel", name, job, attempt, None)
        try:
            rows = yield (STATEMENT, "fail_job_fenced", params, job, None)
        except DbUnavailable:
            yield (RECORD, "db_error", name, job, attempt, "fail_job_fenced")
            return
        yield (RECORD, "deadline", name, job, attempt, rows[0][1] if rows else None)


class WatcherProtocol:
    """The stuck watcher's tick: requeue (or kill) Processing jobs whose lease expired.

    By default one statement finds and requeues them, re-checking each row as it updates it. With
    a watcher_gap it reads the stuck jobs first and updates each by id later, whatever the job
    became meanwhile: River's JobRescuer before PR #1373 (issue #1302)."""

    name = "watcher"

    def __init__(self, policy):
        max_attempts = policy.max_attempts if policy.watcher_action == "requeue" else 0
        backoff = to_micros(policy.retry_backoff)  # microseconds x attempts^4
        self.gap = policy.watcher_gap
        self.batch = policy.watcher_batch
        self._stuck = {"stuck_after": policy.lease_ttl}  # the stuck age, for a rescue by age
        self._rescue = {"max_attempts": max_attempts, "retry_backoff": backoff, **self._stuck}
        params = {"max_attempts": max_attempts, "limit": policy.watcher_batch}
        self._prune = None
        if policy.process_heartbeat_interval:  # process liveness: prune, and move the orphans
            stalls = MAX_STALLS if policy.max_stalls is None else policy.max_stalls
            prune = {
                "stale_after": to_micros(policy.process_stale_after),
                "dead": policy.prune_action == "dead",
                "max_attempts": policy.claim_cap,
                "max_stalls": stalls,
                "limit": policy.watcher_batch,
                "retry_backoff": backoff,
            }
            self._prune = (STATEMENT, "prune_processes", prune, None, None)
        self.sweeps_leases = policy.sweeps_leases
        if policy.stall_check == "two_phase":  # the stall budget, if any, apart from the attempts
            stalls = MAX_STALLS if policy.max_stalls is None else policy.max_stalls
            params = {
                **params,
                "max_stalls": stalls,
                "max_attempts": max_attempts and policy.claim_cap,
            }
            self._requeue = (
                STATEMENT,
                "reclaim_stalled",
                {**params, "retry_backoff": backoff},
                None,
                None,
            )
        else:
            self._requeue = (
                STATEMENT,
                "requeue_expired",
                {**params, "retry_backoff": backoff, **self._stuck},
                None,
                None,
            )

    def tick(self):
        """One tick; the jobs it moved are recorded (a lost connection moves none)."""
        rows = []
        try:
            if not self.sweeps_leases:
                pass
            elif self.gap:
                stuck = yield (STATEMENT, "select_stuck_jobs", dict(self._stuck), None, None)
                yield (WAIT, self.gap)
                for job, *_ in stuck[: self.batch]:
                    params = {"id": job, **self._rescue}
                    rows += yield (STATEMENT, "rescue_job", params, job, None)
            else:
                rows = yield self._requeue
            if self._prune is not None:
                rows = rows + (yield self._prune)
        except DbUnavailable:
            pass
        yield (RECORD, "watcher_tick", "watcher", None, None, len(rows))
        for job, status, _owner, attempts in rows:
            yield (RECORD, "requeue", "watcher", job, attempts, status)
