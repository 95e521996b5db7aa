"""A claimed job's handler and its completion: work up to the PSP call, charge, work the rest, then
the effect and the completion in one transaction (or the completion after it, in the background),
with the dedup marker and the payload check when the policy keeps one."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sim.protocol.failures import DbUnavailable, StatementError
from sim.protocol.lease import Lease
from sim.protocol.steps import (
    BEGIN,
    COMMIT,
    ROLLBACK,
    Charge,
    CrashAt,
    Record,
    Statement,
    Steps,
    Wait,
    Work,
)

PAYLOAD_DIFFERS = "payload differs from the first delivery of this event id"


class Completion:
    """One worker's handler and completion. `catalog[job]` gives the job's spec (work, event,
    amount); psp_call samples how long the PSP call takes."""

    def __init__(self, name: str, scenario: Any, catalog: Any, psp_call: Callable[[], float]):
        policy = scenario.policy
        self.name = name
        self.policy = policy
        self.catalog = catalog
        self.psp_call = psp_call
        self.psp_at = scenario.workload.psp_at
        self.crash_points = bool(scenario.faults.crash_points)  # else no point can fire
        self.abandon = policy.abandon_on_lost_lease
        self.idempotency_key = policy.idempotency_key
        self.background = policy.completion == "background"  # the effect commits before completion
        self.drops_late = policy.deadline_action == "drop"  # a result past the deadline is dropped
        self.dedup = policy.dedup
        self.fencing = policy.fencing
        self._charge = Charge(None)  # the PSP call without an idempotency key

    def handle(self, lease: Lease) -> Steps[None]:
        """The job's handler: work up to the PSP call, charge, work the rest, complete; give up at
        a checkpoint once the lease is known lost (abandon_on_lost_lease). A database lost on the
        way is recorded, not raised."""
        name, job, attempt = self.name, lease.job, lease.attempt
        spec = self.catalog[job]
        try:
            yield Work(spec.work * self.psp_at)
            if lease.lost and self.abandon:
                yield Record("abandon", name, job, attempt, lease.until)
                return
            outcome = yield Charge(spec.event_id) if self.idempotency_key else self._charge
            yield Record("psp_charge", name, job, attempt, outcome)
            yield Wait(self.psp_call())
            if self.crash_points:
                yield CrashAt("after_psp")
            yield Work(spec.work * (1 - self.psp_at))
            if lease.lost and self.abandon:  # abandon_on_lost_lease: give up at a checkpoint
                yield Record("abandon", name, job, attempt, lease.until)
                return
            yield from self.complete(lease, spec)
        except DbUnavailable as exc:
            yield Record("db_error", name, job, attempt, str(exc))

    def complete(self, lease: Lease, spec: Any) -> Steps[None]:
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
            yield Record("late_result", name, job, attempt, "dropped")
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
                    yield Record("complete_rejected", name, job, attempt, lease.until)
                    return
            yield COMMIT
        except StatementError:
            yield ROLLBACK
            yield Record("db_error", name, job, attempt, "complete")
            return
        yield Record("effect" if applied else "dedup_skip", name, job, attempt, spec.event_id)
        if lease.past_deadline and self.drops_late and self.background:
            yield Record("late_result", name, job, attempt, "dropped")
            return
        if self.background:
            try:
                done = yield self.completion(lease)
            except StatementError:
                yield Record("db_error", name, job, attempt, "complete")
                return
            if not done:
                yield Record("complete_rejected", name, job, attempt, lease.until)
                return
        yield Record("complete", name, job, attempt, lease.until)

    def apply_effect(self, lease: Lease, spec: Any) -> Steps[bool | None]:
        """Inside the open transaction: the dedup marker (if used), then the ledger row unless the
        marker says this event was applied already. True: applied; False: a duplicate, skipped;
        None: another payload under the same event id, and the job was rejected for it."""
        job = lease.job
        if self.dedup:
            digest = spec.payload_hash  # made on demand: once here, not again for the comparison
            marker = yield Statement(
                "insert_dedup_marker",
                {"event_id": spec.event_id, "payload_hash": digest},
                job,
            )
            if marker:
                if self.crash_points:
                    yield CrashAt("after_marker")
            else:
                stored = yield Statement("read_dedup_marker", {"event_id": spec.event_id}, job)
                if stored and stored[0][1] != digest:
                    yield from self.reject(lease, PAYLOAD_DIFFERS)
                    return None
                return False
        yield Statement(
            "insert_ledger_entry",
            {
                "job_id": job,
                "event_id": spec.event_id,
                "amount_cents": spec.amount_cents,
                "worker": self.name,
                "attempt": lease.attempt,
            },
            job,
        )
        return True

    def completion(self, lease: Lease) -> Statement:
        """The completion statement's step: fenced by owner and attempt, or by id alone."""
        job = lease.job
        if self.fencing:
            params = {"id": job, "owner": self.name, "attempt": lease.attempt}
            return Statement("complete_fenced", params, job)
        return Statement("complete_unfenced", {"id": job}, job)

    def reject(self, lease: Lease, reason: str) -> Steps[None]:
        """Same event id, another payload: the job goes Dead (fenced), committed with the marker."""
        name, job, attempt = self.name, lease.job, lease.attempt
        params = {"id": job, "owner": name, "attempt": attempt, "error": reason}
        rows = yield Statement("reject_job_fenced", params, job)
        if rows:
            yield COMMIT
            yield Record("payload_conflict", name, job, attempt, reason)
        else:
            yield ROLLBACK
            yield Record("complete_rejected", name, job, attempt, lease.until)
