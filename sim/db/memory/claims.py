"""The claim statements of the memory backend: inserting a job, the candidate scans and the
claims of each strategy (conditional, unconditional, SKIP LOCKED, batch, lock-then-update).

One function per named query in sql/queries.sql, with its name; sim.db.memory.backend binds
them as MemoryBackend's methods."""

from __future__ import annotations

import itertools

from sim.db.base import Rows, to_micros
from sim.db.errors import LockNotAvailableError, UniqueViolationError
from sim.db.memory.rows import (
    JobRow,
    Transaction,
    Versions,
    Wait,
    merge_sorted,
    seconds,
)
from sim.db.memory.tables import (
    Tables,
    candidates,
    lock,
    seen,
    take,
    visible,
    writable,
)


def insert_job(
    db: Tables, tx: Transaction, *, id: int, event_id: str, payload: str, now: float
) -> Rows:
    holder = db.row_locks.get(id)
    if holder is not None and holder is not tx and id in holder.jobs:
        raise Wait(holder)  # the key's row is being written; a mere row lock does not wait
    if visible(db, tx, id) is not None:
        raise UniqueViolationError(
            "insert_job", f"duplicate key value violates unique constraint (id)=({id})"
        )
    row = JobRow(id, event_id, payload, to_micros(now))
    if not tx.implicit:  # an autocommit insert commits before any other session can meet its lock
        lock(db, tx, id)
    tx.jobs[id] = row
    return []


def select_candidates(
    db: Tables, tx: Transaction, *, now: float, take_expired: bool, max_attempts: int, limit: int
) -> Rows:
    now = to_micros(now)
    out: Rows = []
    for job_id in candidates(db, tx, now, take_expired, max_attempts):
        if len(out) >= limit:
            break
        row = seen(db, tx, job_id)
        if row.claimable(now, take_expired, max_attempts):
            out.append(
                (row.id, row.status, row.lease_owner, seconds(row.lease_until), row.attempts)
            )
    return out


def claim_conditional(
    db: Tables,
    tx: Transaction,
    *,
    id: int,
    owner: str,
    now: float,
    lease_until: float,
    max_attempts: int,
) -> Rows:
    now = to_micros(now)
    row = writable(db, tx, id, lambda r: r.claimable(now, True, max_attempts))
    if row is None:
        return []
    take(row, owner, now, to_micros(lease_until))
    return [(row.id, row.attempts)]


def claim_unconditional(
    db: Tables,
    tx: Transaction,
    *,
    id: int,
    owner: str,
    now: float,
    lease_until: float,
    max_attempts: int,
) -> Rows:
    row = writable(db, tx, id, lambda r: r.attempts < max_attempts)
    if row is None:
        return []
    take(row, owner, to_micros(now), to_micros(lease_until))
    return [(row.id, row.attempts)]


def claim_skip_locked(
    db: Tables,
    tx: Transaction,
    *,
    owner: str,
    now: float,
    lease_until: float,
    take_expired: bool,
    max_attempts: int,
) -> Rows:
    now_us = to_micros(now)
    for job_id in candidates(db, tx, now_us, take_expired, max_attempts):
        holder = db.row_locks.get(job_id)
        if holder is not None and holder is not tx:
            continue
        row = writable(db, tx, job_id, lambda r: r.claimable(now_us, take_expired, max_attempts))
        if row is not None:  # the scan stops here: it changed the index it was reading
            take(row, owner, now_us, to_micros(lease_until))
            return [(row.id, row.attempts)]
    return []


def claim_batch(
    db: Tables,
    tx: Transaction,
    *,
    owner: str,
    now: float,
    lease_until: float,
    take_expired: bool,
    max_attempts: int,
    limit: int,
) -> Rows:
    now_us = to_micros(now)
    picked: list[int] = []
    for job_id in candidates(db, tx, now_us, take_expired, max_attempts):
        if len(picked) >= limit:
            break
        holder = db.row_locks.get(job_id)
        if holder is not None and holder is not tx:
            continue
        if seen(db, tx, job_id).claimable(now_us, take_expired, max_attempts):
            picked.append(job_id)
    rows = []
    for job_id in picked:  # chosen first: taking a job changes the index the scan reads
        row = writable(db, tx, job_id)
        assert row is not None  # a picked row exists, and no `matches` can refuse it
        take(row, owner, now_us, to_micros(lease_until))
        rows.append((row.id, row.attempts))
    return rows


def lock_next_candidate(
    db: Tables,
    tx: Transaction,
    *,
    now: float,
    take_expired: bool,
    max_attempts: int,
    _resume_at: int | None = None,
    _before: Versions | None = None,
) -> Rows:
    now_us = to_micros(now)
    scan = candidates(db, tx, now_us, take_expired, max_attempts)
    if _resume_at is not None:  # the row we waited for, then the statement's snapshot after it
        assert _before is not None  # a Wait resumes the statement with both
        later = (i for i in scan if i > _resume_at and i not in _before.rows)
        older = sorted(
            i
            for i, r in _before.rows.items()
            if i > _resume_at and r is not None and r.claimable(now_us, take_expired, max_attempts)
        )
        scan = itertools.chain([_resume_at], merge_sorted(later, older))
    for job_id in scan:
        if job_id != _resume_at and (_before is None or job_id not in _before.rows):
            # the scan's own version must match before it locks or waits (a Pending row may be
            # out of attempts or not yet due); rows from the snapshot were checked above
            if not seen(db, tx, job_id).claimable(now_us, take_expired, max_attempts):
                continue
        holder = db.row_locks.get(job_id)
        if holder is not None and holder is not tx:
            if _before is None:
                _before = Versions()
                db.snapshots.append(_before)
            raise Wait(holder, {"_resume_at": job_id, "_before": _before})
        lock(db, tx, job_id)
        row = seen(db, tx, job_id)
        if row.claimable(now_us, take_expired, max_attempts):
            return [(row.id, row.attempts)]
        # EvalPlanQual: the new version no longer matches; it stays locked, as in PostgreSQL
    return []


def lock_job_nowait(db: Tables, tx: Transaction, *, id: int) -> Rows:
    row = visible(db, tx, id)
    if row is None:
        return []
    holder = db.row_locks.get(id)
    if holder is not None and holder is not tx:
        raise LockNotAvailableError(
            "lock_job_nowait", 'could not obtain lock on row in relation "payment_jobs"'
        )
    lock(db, tx, id)
    return [(row.id, row.status)]
