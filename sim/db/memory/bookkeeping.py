"""The memory backend's bookkeeping statements: dedup markers (processed_events), the ledger,
and the counts and dumps a run reads at its end.

One function per named query in sql/queries.sql, with its name; sim.db.memory.backend binds
them as MemoryBackend's methods."""

from __future__ import annotations

from sim.db.base import Rows, to_micros
from sim.db.memory.compact import Marker, marker_hash, marker_time, pack_marker
from sim.db.memory.rows import (
    Transaction,
    Wait,
    seconds,
)
from sim.db.memory.tables import (
    Tables,
    all_jobs,
)


def insert_dedup_marker(
    db: Tables, tx: Transaction, *, event_id: str, payload_hash: str, now: float
) -> Rows:
    if event_id in tx.markers:
        return []
    holder = db.marker_locks.get(event_id)
    if holder is not None and holder is not tx:
        raise Wait(holder)  # an uncommitted insert of the same key: wait for it
    if event_id in db.markers and event_id not in tx.deleted_markers:
        return []
    db.marker_locks[event_id] = tx
    tx.own_markers()[event_id] = pack_marker(payload_hash, to_micros(now))
    return [(event_id,)]


def read_dedup_marker(db: Tables, tx: Transaction, *, event_id: str) -> Rows:
    row = tx.markers.get(event_id) or db.markers.get(event_id)
    if row is None or (event_id in tx.deleted_markers and event_id not in tx.markers):
        return []
    return [(event_id, marker_hash(row), seconds(marker_time(row)))]


def purge_dedup_markers(
    db: Tables, tx: Transaction, *, before: float, _seen: list[tuple[str, Marker]] | None = None
) -> Rows:
    if _seen is None:  # the rows the statement sees; a resumed one re-checks only these
        before_us = to_micros(before)
        _seen = [
            (e, r)
            for e, r in db.markers.items()
            if marker_time(r) < before_us and e not in tx.deleted_markers
        ]
        _seen += [(e, r) for e, r in tx.markers.items() if marker_time(r) < before_us]
    # EvalPlanQual: a marker deleted (or deleted and inserted anew) meanwhile is skipped
    doomed = sorted(e for e, r in _seen if db.markers.get(e) is r and e not in tx.deleted_markers)
    own = [e for e, r in _seen if tx.markers.get(e) is r]  # this transaction's inserts
    for event_id in doomed:
        holder = db.marker_locks.get(event_id)
        if holder is not None and holder is not tx:
            raise Wait(holder, {"_seen": _seen})
    deleted = tx.own_deleted_markers() if doomed or own else tx.deleted_markers
    for event_id in doomed:
        db.marker_locks[event_id] = tx
        deleted.add(event_id)
    for event_id in own:  # the key stays locked until the transaction ends
        del tx.markers[event_id]
        deleted.add(event_id)
    return [(e,) for e in sorted(doomed + own)]


def insert_ledger_entry(
    db: Tables,
    tx: Transaction,
    *,
    job_id: int,
    event_id: str,
    amount_cents: int,
    worker: str,
    attempt: int,
    now: float,
) -> Rows:
    entry_id = next(db.ledger_ids)
    entry = (entry_id, job_id, event_id, amount_cents, worker, attempt, to_micros(now))
    tx.own_ledger().append(entry)
    return [(entry_id,)]


def count_jobs_by_status(db: Tables, tx: Transaction) -> Rows:
    counts: dict[str, int] = {}
    for row in all_jobs(db, tx):
        counts[row.status] = counts.get(row.status, 0) + 1
    return sorted(counts.items())


def dump_jobs(db: Tables, tx: Transaction) -> Rows:
    return [
        (
            r.id,
            r.event_id,
            r.payload,
            r.status,
            r.lease_owner,
            seconds(r.lease_until),
            r.attempts,
            seconds(r.heartbeat_at),
            seconds(r.created_at),
            seconds(r.completed_at),
            r.last_error,
        )
        for r in sorted(all_jobs(db, tx), key=lambda r: r.id)
    ]


def dump_processed_events(db: Tables, tx: Transaction) -> Rows:
    merged = {**db.markers, **tx.markers}
    for event_id in tx.deleted_markers - tx.markers.keys():
        merged.pop(event_id, None)
    return [(e, marker_hash(m), seconds(marker_time(m))) for e, m in sorted(merged.items())]


def dump_ledger(db: Tables, tx: Transaction) -> Rows:
    return [row[:-1] + (seconds(row[-1]),) for row in sorted([*db.ledger, *tx.ledger])]
