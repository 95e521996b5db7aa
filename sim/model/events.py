"""The event log: one record type with a `kind` field, appended by every model process.

Kinds (worker is a worker name like "w0", "watcher" or "producer"; job is the job id or None):
  enqueue            job enqueued; detail = event id
  claim              a lease begins; attempt = attempts after the claim; detail = lease_until
  claim_lost         the claim statement returned no row (someone else has the job)
  idle               a poll found nothing to claim (the worker sleeps poll_interval)
  lock_wait          a statement waited on a row lock; detail = "holder:seconds"
  heartbeat          lease renewed; detail = new lease_until (omitted if record_heartbeats=False)
  heartbeat_rejected the fenced heartbeat found the lease gone (worker learns it lost the job)
  heartbeat_lost     the heartbeat never reached the DB (fault)
  db_error           a statement failed (partition); detail = query name
  psp_charge         the PSP charged the card; detail = "new" or "replay" (idempotency key seen)
  effect             a ledger row committed (the DB effect); detail = event id
  dedup_skip         the dedup marker existed: effect not applied again; detail = event id
  payload_conflict   same event id, other payload: rejected by policy (job -> Dead)
  complete           completion committed
  complete_rejected  fenced completion refused (not the owner of this attempt any more)
  abandon            the worker dropped the job after learning its lease was lost
  crash / restart    a worker died / came back (new connection)
  pause_start / pause_end, partition_start / partition_end
  watcher_tick       the watcher ran; detail = number of jobs it requeued or killed
  requeue            the watcher moved a job; attempt = attempts; detail = new status (Pending/Dead)
"""

from __future__ import annotations

from typing import NamedTuple


class Event(NamedTuple):
    t: float
    kind: str
    worker: str | None = None
    job: int | None = None
    attempt: int | None = None
    detail: object = None


COLUMNS = list(Event._fields)
