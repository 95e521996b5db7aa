"""The memory backend's statements of a lease's owner: heartbeat, and ending it by completing,
rejecting, failing or releasing the job (fenced by owner and attempt, or not).

One function per named query in sql/queries.sql, with its name; sim.db.memory.backend binds
them as MemoryBackend's methods."""

from __future__ import annotations

from sim.db.base import Rows, to_micros
from sim.db.memory.rows import (
    COMPLETED,
    DEAD,
    Transaction,
    seconds,
)
from sim.db.memory.tables import (
    Tables,
    writable,
)


def heartbeat(
    db: Tables,
    tx: Transaction,
    *,
    id: int,
    owner: str,
    attempt: int,
    now: float,
    lease_until: float,
) -> Rows:
    row = writable(db, tx, id, lambda r: r.owned_by(owner, attempt))
    if row is None:
        return []
    row.lease_until = to_micros(lease_until)
    row.heartbeat_at = to_micros(now)
    return [(row.id, seconds(row.lease_until))]


def complete_fenced(
    db: Tables, tx: Transaction, *, id: int, owner: str, attempt: int, now: float
) -> Rows:
    row = writable(db, tx, id, lambda r: r.owned_by(owner, attempt))
    if row is None:
        return []
    row.status = COMPLETED
    row.completed_at = to_micros(now)
    return [(row.id,)]


def complete_unfenced(db: Tables, tx: Transaction, *, id: int, now: float) -> Rows:
    row = writable(db, tx, id)
    if row is None:
        return []
    row.status = COMPLETED
    row.completed_at = to_micros(now)
    return [(row.id,)]


def reject_job_fenced(
    db: Tables, tx: Transaction, *, id: int, owner: str, attempt: int, now: float, error: str
) -> Rows:
    row = writable(db, tx, id, lambda r: r.owned_by(owner, attempt))
    if row is None:
        return []
    row.status = DEAD
    row.completed_at = to_micros(now)
    row.last_error = error
    return [(row.id,)]


def fail_job_fenced(
    db: Tables,
    tx: Transaction,
    *,
    id: int,
    owner: str,
    attempt: int,
    now: float,
    max_attempts: int,
    retry_backoff: int,
) -> Rows:
    row = writable(db, tx, id, lambda r: r.owned_by(owner, attempt))
    if row is None:
        return []
    row.retry(max_attempts, "deadline exceeded", to_micros(now), retry_backoff)
    return [(row.id, row.status, row.attempts)]


def release_job_fenced(
    db: Tables, tx: Transaction, *, id: int, owner: str, attempt: int, max_attempts: int
) -> Rows:
    row = writable(db, tx, id, lambda r: r.owned_by(owner, attempt))
    if row is None:
        return []
    row.retry(max_attempts, "released at shutdown", None)
    return [(row.id, row.status, row.attempts)]
