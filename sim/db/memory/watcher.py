"""The memory backend's watcher and rescue statements: expired leases requeued, stalled jobs
reclaimed, a stuck job rescued, and the worker_processes rows that orphan a dead process's jobs.

One function per named query in sql/queries.sql, with its name; sim.db.memory.backend binds
them as MemoryBackend's methods."""

from __future__ import annotations

from sim.db.base import Rows, to_micros
from sim.db.errors import ClientStateError
from sim.db.memory.rows import (
    PROCESSING,
    Transaction,
    seconds,
)
from sim.db.memory.tables import (
    Tables,
    expired,
    processing_ids,
    seen,
    writable,
)


def requeue_expired(
    db: Tables,
    tx: Transaction,
    *,
    now: float,
    max_attempts: int,
    limit: int,
    retry_backoff: int,
    stuck_after: float,
) -> Rows:
    """stuck_after is not read: Lease Lab's watcher compares lease_until with now."""
    now_us = to_micros(now)
    out: list[int] = []
    for job_id in expired(db, tx, now_us):
        if len(out) >= limit:
            break
        holder = db.row_locks.get(job_id)
        if holder is not None and holder is not tx:
            continue
        out.append(job_id)
    rows = []
    for job_id in out:
        row = writable(db, tx, job_id)
        assert row is not None  # an expired row exists, and no `matches` can refuse it
        row.retry(max_attempts, "lease expired", now_us, retry_backoff)
        rows.append((row.id, row.status, row.lease_owner, row.attempts))
    rows.sort()
    return rows


def reclaim_stalled(
    db: Tables,
    tx: Transaction,
    *,
    now: float,
    max_attempts: int,
    max_stalls: int,
    limit: int,
    retry_backoff: int,
) -> Rows:
    now_us = to_micros(now)
    stalled: list[int] = []
    for job_id in expired(db, tx, now_us):
        if len(stalled) >= limit:
            break
        if not seen(db, tx, job_id).stall_marked:
            continue
        holder = db.row_locks.get(job_id)
        if holder is not None and holder is not tx:
            continue
        stalled.append(job_id)
    marking = sorted(
        job_id
        for job_id in db.maybe_marked | processing_ids(db, tx)
        if job_id not in stalled
        and ((version := seen(db, tx, job_id)).stall_marked or version.status == PROCESSING)
        and db.row_locks.get(job_id) in (None, tx)
    )
    rows = []
    for job_id in stalled:
        row = writable(db, tx, job_id)
        assert row is not None  # a stalled row exists, and no `matches` can refuse it
        over = row.stalls >= max_stalls
        row.retry(
            max_attempts if not over else 0,
            "stalled more than max_stalls times" if over else "stalled",
            now_us,
            retry_backoff,
        )
        row.stalls += 1
        row.stall_marked = False
        rows.append((row.id, row.status, row.lease_owner, row.attempts))
    for job_id in marking:
        row = writable(db, tx, job_id)
        assert row is not None  # a row to mark exists, and no `matches` can refuse it
        row.stall_marked = row.status == PROCESSING
    db.maybe_marked = {j for j in db.maybe_marked.union(marking) if seen(db, tx, j).stall_marked}
    rows.sort()
    return rows


def select_stuck_jobs(db: Tables, tx: Transaction, *, now: float, stuck_after: float) -> Rows:
    now_us = to_micros(now)
    rows = (seen(db, tx, job_id) for job_id in sorted(expired(db, tx, now_us)))
    return [(r.id, r.lease_owner, seconds(r.lease_until), r.attempts) for r in rows]


def rescue_job(
    db: Tables,
    tx: Transaction,
    *,
    id: int,
    now: float,
    max_attempts: int,
    retry_backoff: int,
    stuck_after: float,
) -> Rows:
    row = writable(db, tx, id)
    if row is None:
        return []
    row.retry(max_attempts, "lease expired", to_micros(now), retry_backoff)
    return [(row.id, row.status, row.lease_owner, row.attempts)]


def processes_in(db: Tables, tx: Transaction, query: str) -> dict[str, list[int]]:
    """The process rows, for an autocommit statement: the model never writes them inside a
    transaction, and the simulated database neither versions nor locks them."""
    if not tx.implicit:
        raise ClientStateError(
            f"{query}: worker_processes rows are written in autocommit only in the memory backend"
        )
    return db.processes


def register_process(db: Tables, tx: Transaction, *, owner: str, now: float) -> Rows:
    now_us = to_micros(now)
    processes_in(db, tx, "register_process")[owner] = [now_us, now_us]
    return [(owner,)]


def process_heartbeat(db: Tables, tx: Transaction, *, owner: str, now: float) -> Rows:
    row = processes_in(db, tx, "process_heartbeat").get(owner)
    if row is None:
        return []
    row[1] = to_micros(now)
    return [(owner,)]


def prune_processes(
    db: Tables,
    tx: Transaction,
    *,
    now: float,
    stale_after: int,
    dead: bool,
    max_attempts: int,
    max_stalls: int,
    limit: int,
    retry_backoff: int,
) -> Rows:
    processes = processes_in(db, tx, "prune_processes")
    now_us = to_micros(now)
    cutoff = now_us - stale_after
    orphaned: list[int] = []
    for job_id in sorted(processing_ids(db, tx)):
        if len(orphaned) >= limit:
            break
        # a Processing row always has an owner (not narrowed: the prune's scan)
        process = processes.get(seen(db, tx, job_id).lease_owner)  # type: ignore[arg-type]
        if process is not None and process[1] >= cutoff:
            continue
        holder = db.row_locks.get(job_id)
        if holder is not None and holder is not tx:
            continue
        orphaned.append(job_id)
    for name in [n for n, (_, beat) in processes.items() if beat < cutoff]:
        del processes[name]
    rows = []
    for job_id in orphaned:
        row = writable(db, tx, job_id)
        assert row is not None  # an orphaned row exists, and no `matches` can refuse it
        killed = dead or row.stalls >= max_stalls
        row.retry(0 if killed else max_attempts, "process gone", now_us, retry_backoff)
        row.stalls += 1
        rows.append((row.id, row.status, row.lease_owner, row.attempts))
    return rows
