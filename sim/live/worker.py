"""A live worker process: claims by lease, renews by heartbeat on a thread of its own, completes.

It follows the model's worker (sim/model/worker.py) statement for statement, with real sleeps on
the shared clock. Faults come from outside: the runner SIGKILLs it (crash), SIGSTOPs and SIGCONTs it
(a stop-the-world pause: the heartbeat thread stops too), and writes a partition's end into its slot
(its connections drop). Heartbeat loss and delay it draws itself, from the model's streams.
"""

from __future__ import annotations

import os
import threading

import psycopg

from sim.live.connection import DbUnavailable, LiveConnection
from sim.live.plan import job_plan, stream_name
from sim.rng import Streams


class Lease:
    """The worker's own view of the lease it holds."""

    def __init__(self, job: int, attempt: int, until: float):
        self.job, self.attempt, self.until = job, attempt, until
        self.lost = False
        self.finished = threading.Event()  # set when the job is done (or given up): heartbeats stop


class LiveWorker:
    def __init__(self, scenario, index: int, *, slots, dsn, schema, queries, clock, recorder):
        self.scenario, self.policy, self.faults = scenario, scenario.policy, scenario.faults
        self.index = index
        self.name = f"w{index}"
        self.clock, self.recorder, self.slots = clock, recorder, slots
        _, self.catalog = job_plan(scenario)
        partition = {"slots": slots, "index": index, "partition_mode": self.faults.partition_mode}
        self.db = LiveConnection(dsn, schema, self.name, queries, clock, recorder, **partition)
        self.hb_db = LiveConnection(
            dsn, schema, f"{self.name}/hb", queries, clock, recorder, **partition
        )
        self._psp_dir = os.path.join(os.path.dirname(recorder.path), "psp-keys")

    def _streams(self, incarnation: int) -> None:
        """This process's random sources: the model's streams for the first process, fresh ones after a restart."""
        streams = Streams(self.scenario.seed)

        def stream(base: str):
            return streams.generator(stream_name(base, incarnation))

        i = self.index
        self.phase = (
            float(stream(f"worker/{i}/phase").uniform(0, self.policy.poll_interval))
            if self.policy.random_phase and incarnation == 0
            else 0.0
        )
        self._psp_call = self.scenario.workload.psp_call.sampler(stream(f"worker/{i}/psp"))
        self._hb_delay = self.faults.heartbeat_delay.sampler(stream(f"worker/{i}/hb-delay"))
        self._hb_loss = stream(f"worker/{i}/hb-loss")

    def prepare(self) -> None:
        self.db.open()
        self.hb_db.open()

    # ---- life cycle ---------------------------------------------------------------------------

    def run(self, incarnation: int = 0, start_at: float = 0.0) -> None:
        self._streams(incarnation)
        if incarnation:
            self.clock.sleep_until(start_at)
            self.recorder.add("restart", self.name)
        self.clock.sleep(self.phase)
        poll = self.policy.poll_interval
        while True:
            try:
                claimed = self._claim()
            except DbUnavailable:
                self.recorder.add("db_error", self.name, None, None, "claim")
                self.clock.sleep(poll)
                continue
            if claimed is None:
                self.recorder.add("idle", self.name)
                self.clock.sleep(poll)
                continue
            lease = Lease(*claimed)
            # record first, then tell the runner: a worker the runner sees holding a job has its claim on record
            self.recorder.add("claim", self.name, lease.job, lease.attempt, lease.until)
            self.slots.hold(self.index, lease.job, lease.attempt, lease.until)
            if self.policy.heartbeat:
                threading.Thread(target=self._heartbeat, args=(lease,), daemon=True).start()
            try:
                self._process(lease)
            except DbUnavailable as exc:
                self.recorder.add("db_error", self.name, lease.job, lease.attempt, str(exc))
            lease.finished.set()
            self.slots.release(self.index)

    # ---- claiming -----------------------------------------------------------------------------

    def _claim(self):
        policy, db = self.policy, self.db
        ttl, cap = policy.lease_ttl, policy.max_attempts
        if policy.claim == "skip_locked":
            params = {
                "owner": self.name,
                "take_expired": policy.claim_takes_expired,
                "max_attempts": cap,
            }
            return _claimed(db.run("claim_skip_locked", params, ttl=ttl), params)
        if policy.claim == "select_for_update":
            db.control("BEGIN")
            rows = db.run(
                "lock_next_candidate",
                {"take_expired": policy.claim_takes_expired, "max_attempts": cap},
            )
            if not rows:
                db.control("COMMIT")
                return None
            self.clock.sleep(policy.select_to_update_gap)
            params = {"id": rows[0][0], "owner": self.name, "max_attempts": cap}
            rows = db.run("claim_unconditional", params, ttl=ttl)
            db.control("COMMIT")
            return _claimed(rows, params)
        query = (
            "claim_conditional" if policy.claim == "conditional_update" else "claim_unconditional"
        )
        while True:
            candidates = db.run(
                "select_candidates",
                {
                    "take_expired": policy.claim_takes_expired,
                    "max_attempts": cap,
                    "limit": policy.candidates,
                },
            )
            if not candidates:
                return None
            self.clock.sleep(policy.select_to_update_gap)
            for row in candidates:
                params = {"id": row[0], "owner": self.name, "max_attempts": cap}
                claimed = _claimed(db.run(query, params, ttl=ttl), params)
                if claimed:
                    return claimed
                self.recorder.add("claim_lost", self.name, row[0])

    # ---- processing ---------------------------------------------------------------------------

    def _process(self, lease: Lease) -> None:
        spec = self.catalog[lease.job]
        psp_at = self.scenario.workload.psp_at
        self.clock.sleep(spec.work * psp_at)
        if self._gave_up(lease):
            return
        self._charge(lease, spec)
        self.clock.sleep(spec.work * (1 - psp_at))
        if self._gave_up(lease):
            return
        self._complete(lease, spec)

    def _gave_up(self, lease: Lease) -> bool:
        if lease.lost and self.policy.abandon_on_lost_lease:
            self.recorder.add("abandon", self.name, lease.job, lease.attempt, lease.until)
            return True
        return False

    def _charge(self, lease: Lease, spec) -> None:
        """The PSP call: an idempotency key already seen (by any process) replays instead of charging."""
        outcome = "new"
        if self.policy.idempotency_key:
            os.makedirs(self._psp_dir, exist_ok=True)
            try:
                os.close(
                    os.open(
                        os.path.join(self._psp_dir, spec.event_id),
                        os.O_CREAT | os.O_EXCL | os.O_WRONLY,
                    )
                )
            except FileExistsError:
                outcome = "replay"
        self.recorder.add("psp_charge", self.name, lease.job, lease.attempt, outcome)
        self.clock.sleep(self._psp_call())

    def _complete(self, lease: Lease, spec) -> None:
        """One transaction: [dedup marker], ledger effect, completion (fenced or not)."""
        lease.finished.set()  # no heartbeats while the completion transaction holds the row
        db, job, attempt, name = self.db, lease.job, lease.attempt, self.name
        try:
            db.control("BEGIN")
            apply_effect = True
            if self.policy.dedup:
                marker = db.run(
                    "insert_dedup_marker",
                    {"event_id": spec.event_id, "payload_hash": spec.payload_hash},
                )
                if not marker:
                    apply_effect = False
                    stored = db.run("read_dedup_marker", {"event_id": spec.event_id})
                    if stored and stored[0][1] != spec.payload_hash:
                        self._reject(
                            lease, "payload differs from the first delivery of this event id"
                        )
                        return
            if apply_effect:
                db.run(
                    "insert_ledger_entry",
                    {
                        "job_id": job,
                        "event_id": spec.event_id,
                        "amount_cents": spec.amount_cents,
                        "worker": name,
                        "attempt": attempt,
                    },
                )
            if self.policy.fencing:
                done = db.run("complete_fenced", {"id": job, "owner": name, "attempt": attempt})
            else:
                done = db.run("complete_unfenced", {"id": job})
            if not done:
                db.control("ROLLBACK")
                self.recorder.add("complete_rejected", name, job, attempt, lease.until)
                return
            db.control("COMMIT")
        except psycopg.Error:  # a server error inside the transaction (e.g. a deadlock)
            self._abort()
            self.recorder.add("db_error", name, job, attempt, "complete")
            return
        now = self.clock.now()
        self.recorder.add(
            "effect" if apply_effect else "dedup_skip", name, job, attempt, spec.event_id, t=now
        )
        self.recorder.add("complete", name, job, attempt, lease.until, t=now)

    def _abort(self) -> None:
        try:
            self.db.control("ROLLBACK")
        except (psycopg.Error, DbUnavailable):
            self.db.drop()

    def _reject(self, lease: Lease, reason: str) -> None:
        rows = self.db.run(
            "reject_job_fenced",
            {"id": lease.job, "owner": self.name, "attempt": lease.attempt, "error": reason},
        )
        if rows:
            self.db.control("COMMIT")
            self.recorder.add("payload_conflict", self.name, lease.job, lease.attempt, reason)
        else:
            self.db.control("ROLLBACK")
            self.recorder.add("complete_rejected", self.name, lease.job, lease.attempt, lease.until)

    # ---- heartbeat ----------------------------------------------------------------------------

    def _heartbeat(self, lease: Lease) -> None:
        """Thread: renew the lease every heartbeat_interval until the job is done or the lease lost."""
        interval, ttl = self.policy.heartbeat_interval, self.policy.lease_ttl
        record = self.scenario.record_heartbeats
        name, clock = self.name, self.clock
        while not lease.finished.wait(clock.wall(interval)):
            if self.faults.heartbeat_loss and self._hb_loss.random() < self.faults.heartbeat_loss:
                self.recorder.add("heartbeat_lost", name, lease.job, lease.attempt)
                continue
            clock.sleep(self._hb_delay())
            try:
                rows = self.hb_db.run(
                    "heartbeat", {"id": lease.job, "owner": name, "attempt": lease.attempt}, ttl=ttl
                )
            except DbUnavailable:
                self.recorder.add("db_error", name, lease.job, lease.attempt, "heartbeat")
                if clock.now() >= lease.until:  # cannot renew and the lease ran out: fail safe
                    lease.lost = True
                continue
            except psycopg.Error:
                continue
            if lease.finished.is_set():
                return
            if rows:
                lapsed = lease.until < clock.now()
                lease.until = rows[0][1]
                self.slots.renew(self.index, lease.job, lease.until)
                if record or lapsed:
                    self.recorder.add("heartbeat", name, lease.job, lease.attempt, lease.until)
            else:
                lease.lost = True
                self.recorder.add("heartbeat_rejected", name, lease.job, lease.attempt)
                return


def _claimed(rows, params: dict):
    """(job, attempt, lease_until) of a claim that returned a row; lease_until is what it wrote."""
    return (rows[0][0], rows[0][1], params["lease_until"]) if rows else None
