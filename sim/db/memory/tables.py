"""The memory backend's tables: committed row versions, their indexes and the row locks, and the
row access every named query goes through (the version a transaction sees, an UPDATE's lock and
private copy, the claim and expiry scans).

Indexes are lazy min-heaps over committed rows: an entry is pushed whenever a row becomes
Pending or gets a lease, and is dropped when a scan finds it stale (the row moved on). They keep
claims, heartbeats and the watcher O(log n) in the number of jobs.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Iterator

from sim.db.memory.compact import Ledger, Marker
from sim.db.memory.rows import (
    PENDING,
    PROCESSING,
    JobRow,
    Transaction,
    Versions,
    Wait,
    merge_sorted,
    settle,
)

COMPACT_AT = 4096  # lease-heap size below which stale entries are left for scans to drop


class Tables:
    """The simulated database's contents: job rows, dedup markers, ledger, process rows, and the
    locks open transactions hold on them."""

    def __init__(self) -> None:
        self.jobs: dict[int, JobRow] = {}
        self.pending_heap: list[int] = []  # ids of Pending rows
        self.lease_heap: list[tuple[int, int]] = []  # (lease_until, id) of Processing rows
        self.lease_heap_limit = COMPACT_AT
        self.markers: dict[str, Marker] = {}  # event_id -> its (payload_hash, processed_at) packed
        self.ledger = Ledger()
        self.ledger_ids = itertools.count(1)  # like a sequence: never rolled back
        self.row_locks: dict[int, Transaction] = {}
        self.marker_locks: dict[str, Transaction] = {}
        # Row versions replaced since a waiting lock_next_candidate began: its snapshot. Dropped
        # when that statement ends or its client crashes.
        self.snapshots: list[Versions] = []
        # ids whose row may be stall_marked (only reclaim_stalled marks): a superset, checked on use
        self.maybe_marked: set[int] = set()
        # worker_processes: name -> [started_at, heartbeat_at] (microseconds). The model writes
        # these rows only in autocommit statements, which never wait; see processes_in()
        self.processes: dict[str, list[int]] = {}


# ---- commit and rollback ------------------------------------------------------------------------


def apply(db: Tables, tx: Transaction) -> None:
    """Commit: install new row versions, maintain the indexes, release locks."""
    for row in tx.touched:
        index(db, row)
    snapshots = db.snapshots
    jobs = db.jobs
    for job_id, new in tx.jobs.items():
        old = jobs.get(job_id)
        for before in snapshots:
            before.rows.setdefault(job_id, old)
        jobs[job_id] = new
        index(db, new)
    for event_id in tx.deleted_markers:
        db.markers.pop(event_id, None)
    if tx.markers:
        db.markers.update(tx.markers)
    if tx.ledger:
        db.ledger.extend(tx.ledger)
    release(db, tx)


def discard(db: Tables, tx: Transaction) -> None:
    """Roll back: forget the new versions, release the locks."""
    assert not tx.touched, "no autocommit statement may wait or fail after writing in place"
    release(db, tx)


def release(db: Tables, tx: Transaction) -> None:
    if tx.locked:
        row_locks = db.row_locks
        for job_id in tx.locked:
            del row_locks[job_id]
        tx.locked = set()
    for event_id in tx.markers:
        del db.marker_locks[event_id]
    for event_id in tx.deleted_markers:
        db.marker_locks.pop(event_id, None)


# ---- indexes ------------------------------------------------------------------------------------


def index(db: Tables, row: JobRow) -> None:
    """Push the row's committed state onto the index it belongs to (older entries go stale); a
    row in a final state is settled (its times packed) instead."""
    if row.status == PENDING:
        heapq.heappush(db.pending_heap, row.id)
    elif row.status == PROCESSING:  # then lease_until is set (not narrowed: the commit path)
        heapq.heappush(db.lease_heap, (row.lease_until, row.id))  # type: ignore[misc]
        if len(db.lease_heap) > db.lease_heap_limit:
            compact_leases(db)
    else:
        settle(row)


def compact_leases(db: Tables) -> None:
    """Drop stale lease entries: amortised O(1), and bounded memory when nothing scans expiries."""
    jobs = db.jobs
    live = {
        (until, i)
        for until, i in db.lease_heap
        if (r := jobs.get(i)) is not None and r.status == PROCESSING and r.lease_until == until
    }
    db.lease_heap = list(live)
    heapq.heapify(db.lease_heap)
    db.lease_heap_limit = max(COMPACT_AT, 2 * len(db.lease_heap))


def pending_in_order(db: Tables) -> Iterator[int]:
    """Committed Pending ids, ascending. Entries popped while scanning are pushed back when the
    scan stops, so callers may stop early; stale and duplicate entries are dropped."""
    heap, jobs = db.pending_heap, db.jobs
    taken: list[int] = []
    try:
        while heap:
            job_id = heap[0]
            row = jobs.get(job_id)
            if row is None or row.status != PENDING or (taken and taken[-1] == job_id):
                heapq.heappop(heap)
                continue
            yield job_id  # still on top: a scan that stops here pops nothing
            taken.append(heapq.heappop(heap))
    finally:
        for job_id in taken:
            heapq.heappush(heap, job_id)


def expired_committed(db: Tables, now: int) -> list[tuple[int, int]]:
    """(lease_until, id) of committed Processing rows whose lease ended before `now`, in order."""
    heap = db.lease_heap
    if not heap or heap[0][0] >= now:
        return []  # the claims' usual case: no lease has ended
    jobs = db.jobs
    found: list[tuple[int, int]] = []
    while heap and heap[0][0] < now:
        until, job_id = heapq.heappop(heap)
        row = jobs.get(job_id)
        if row is not None and row.status == PROCESSING and row.lease_until == until:
            if not found or found[-1] != (until, job_id):
                found.append((until, job_id))
    for entry in found:
        heapq.heappush(heap, entry)
    return found


# ---- row access ---------------------------------------------------------------------------------


def visible(db: Tables, tx: Transaction, job_id: int) -> JobRow | None:
    """The version `tx` sees: its own write, else the committed one."""
    return tx.jobs.get(job_id) or db.jobs.get(job_id)


def seen(db: Tables, tx: Transaction, job_id: int) -> JobRow:
    """The version `tx` sees of a row known to exist: an id a scan or an index returned."""
    return tx.jobs.get(job_id) or db.jobs[job_id]


def lock(db: Tables, tx: Transaction, job_id: int) -> None:
    holder = db.row_locks.get(job_id)
    if holder is None:
        db.row_locks[job_id] = tx
        tx.locked.add(job_id)
    elif holder is not tx:
        raise Wait(holder)


def writable(
    db: Tables, tx: Transaction, job_id: int, matches: Callable[[JobRow], bool] | None = None
) -> JobRow | None:
    """An UPDATE's access to one row: None if the version `tx` sees fails `matches` (no lock, no
    wait, as in PostgreSQL); else lock it (waiting on another holder) and return tx's private
    version to modify. On resume the statement re-runs on the newly committed version, which is
    the EvalPlanQual re-check; like PostgreSQL it locks that version first, so the row stays
    locked even if it no longer matches."""
    row = tx.jobs.get(job_id) or db.jobs.get(job_id)
    if row is None:
        return None
    ok = matches is None or matches(row)
    if not ok and tx.resumed_row != job_id:
        return None
    holder = db.row_locks.get(job_id)
    if holder is not None and holder is not tx:
        raise Wait(holder, row=job_id)
    if ok and tx.implicit and not db.snapshots and job_id not in tx.jobs:
        tx.touched.append(row)  # in place: nothing will read the old version
        return row
    lock(db, tx, job_id)
    if not ok:
        return None
    own = tx.jobs.get(job_id)
    if own is None:
        own = tx.jobs[job_id] = row.copy()
    return own


def take(row: JobRow, owner: str, now: int, lease_until: int) -> None:
    """Give the row a lease: Processing, owned by `owner` until `lease_until`, one more attempt."""
    row.status = PROCESSING
    row.lease_owner = owner
    row.lease_until = lease_until
    row.heartbeat_at = now
    row.attempts += 1


# ---- scans --------------------------------------------------------------------------------------


def candidates(
    db: Tables, tx: Transaction, now: int, take_expired: bool, max_attempts: int
) -> Iterator[int]:
    """Claimable job ids in id order: committed Pending merged with expired leases, plus rows `tx`
    itself made claimable. Callers re-check the version `tx` sees."""
    scan: Iterator[int] = pending_in_order(db)
    if take_expired and (lapsed := expired_committed(db, now)):
        scan = merge_sorted(scan, sorted(job_id for _, job_id in lapsed))
    if tx.jobs:
        own = sorted(
            job_id
            for job_id, row in tx.jobs.items()
            if row.claimable(now, take_expired, max_attempts)
        )
        scan = merge_sorted(scan, own)
    return scan


def expired(db: Tables, tx: Transaction, now: int) -> Iterator[int]:
    """Ids of Processing jobs whose lease ended before `now` as `tx` sees them, by (lease_until,
    id)."""
    committed = expired_committed(db, now)
    if not tx.jobs:
        yield from (job_id for _, job_id in committed)
        return
    # a Processing row's lease_until is set (not narrowed: the watcher's scan)
    own: list[tuple[int, int]] = sorted(
        (r.lease_until, r.id)  # type: ignore[misc]
        for r in tx.jobs.values()
        if r.status == PROCESSING and r.lease_until < now  # type: ignore[operator]
    )
    last = None
    for key in heapq.merge(committed, own):
        row = seen(db, tx, key[1])
        if key != last and row.status == PROCESSING and row.lease_until == key[0]:
            yield key[1]
        last = key


def processing_ids(db: Tables, tx: Transaction) -> set[int]:
    """Ids of the Processing jobs `tx` sees (committed ones from the lease index, and its own)."""
    jobs = db.jobs
    ids = {
        job_id
        for until, job_id in db.lease_heap
        if (r := jobs.get(job_id)) is not None and r.status == PROCESSING and r.lease_until == until
    }
    for job_id, row in tx.jobs.items():
        if row.status == PROCESSING:
            ids.add(job_id)
        else:
            ids.discard(job_id)
    return ids


def all_jobs(db: Tables, tx: Transaction) -> Iterator[JobRow]:
    yield from ({**db.jobs, **tx.jobs}).values()
