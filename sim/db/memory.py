"""MemoryBackend: a simulated PostgreSQL at READ COMMITTED, faithful where the lessons live.

Committed rows live in dicts; a transaction's writes are private new row versions until commit.
Row locks are held to commit/rollback. An UPDATE (or FOR UPDATE) of a row locked by another
transaction returns Blocked if the version it sees matches its WHERE (a row that does not match
is skipped without waiting or locking, as in PostgreSQL); on resume it re-runs against the newly
committed version, which is PostgreSQL's EvalPlanQual re-check for these single-table
statements. SKIP LOCKED skips, NOWAIT
raises 55P03, ON CONFLICT waits on an uncommitted insert of the same key. A plain SELECT never
waits and reads committed versions. Indexes (lazy heaps) keep claims, heartbeats and the watcher
O(log n) in the number of jobs.

One method per named query in sql/queries.sql, with the same name (tests assert the name sets
are equal). A resumed `lock_next_candidate` continues on the snapshot of its start, as
PostgreSQL's scan does, from the versions `_apply` keeps aside while it waits.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Iterator
from types import MappingProxyType

from sim.db.base import MICROS, Blocked, ClientTable, Rows, to_micros
from sim.db.errors import (
    ClientStateError,
    DeadlockDetectedError,
    LockNotAvailableError,
    StatementError,
    TransactionAbortedError,
    UniqueViolationError,
)
from sim.db.queries import get_query

PENDING, PROCESSING, COMPLETED, DEAD = "Pending", "Processing", "Completed", "Dead"
_COMPACT_AT = 4096  # lease-heap size below which stale entries are left for scans to drop


class JobRow:
    """One version of a payment_jobs row; times are integer microseconds."""

    __slots__ = (
        "id",
        "event_id",
        "payload",
        "status",
        "lease_owner",
        "lease_until",
        "attempts",
        "heartbeat_at",
        "created_at",
        "completed_at",
        "last_error",
        "run_after",
        "stalls",
        "stall_marked",
    )

    def __init__(self, id, event_id, payload, created_at):
        self.id = id
        self.event_id = event_id
        self.payload = payload
        self.status = PENDING
        self.lease_owner = None
        self.lease_until = None
        self.attempts = 0
        self.heartbeat_at = None
        self.created_at = created_at
        self.completed_at = None
        self.last_error = None
        self.run_after = None
        self.stalls = 0
        self.stall_marked = False

    def copy(self) -> JobRow:
        new = JobRow.__new__(JobRow)
        new.id, new.event_id, new.payload, new.status = (
            self.id,
            self.event_id,
            self.payload,
            self.status,
        )
        new.lease_owner, new.lease_until, new.attempts = (
            self.lease_owner,
            self.lease_until,
            self.attempts,
        )
        new.heartbeat_at, new.created_at, new.completed_at = (
            self.heartbeat_at,
            self.created_at,
            self.completed_at,
        )
        new.last_error, new.run_after = self.last_error, self.run_after
        new.stalls, new.stall_marked = self.stalls, self.stall_marked
        return new

    def claimable(self, now: int, take_expired: bool, max_attempts: int) -> bool:
        """Pending and due, or (when take_expired) Processing with an expired lease; attempts left."""
        if self.attempts >= max_attempts:
            return False
        if self.status == PENDING:
            return self.run_after is None or self.run_after <= now
        return take_expired and self.status == PROCESSING and self.lease_until < now

    def retry(self, max_attempts: int, error: str, run_after: int | None, backoff: int = 0) -> None:
        """Back to Pending, due after backoff x attempts^4 (or Dead when out of attempts)."""
        self.status = DEAD if self.attempts >= max_attempts else PENDING
        self.last_error = error
        if run_after is not None:
            self.run_after = run_after + backoff * self.attempts**4

    def owned_by(self, owner: str, attempt: int) -> bool:
        return self.status == PROCESSING and self.lease_owner == owner and self.attempts == attempt


def _read_only_transaction() -> Transaction:
    """What an autocommit SELECT runs in: no writes, locks or markers of its own, and none allowed."""
    tx = Transaction("", implicit=True)
    tx.jobs, tx.markers = MappingProxyType({}), MappingProxyType({})
    tx.locked, tx.deleted_markers, tx.ledger, tx.touched = frozenset(), frozenset(), (), ()
    return tx


def _seconds(micros: int | None) -> float | None:
    return None if micros is None else micros / MICROS


class Transaction:
    """Private state of one open transaction: new row versions, locks, pending inserts."""

    __slots__ = (
        "client",
        "jobs",
        "locked",
        "markers",
        "deleted_markers",
        "ledger",
        "aborted",
        "resumed_row",
        "implicit",
        "touched",
    )

    def __init__(self, client: str, implicit: bool = False):
        self.client = client
        # A single autocommit statement: it updates committed rows in place (no copy) when nothing
        # needs their old versions; `touched` lists them for re-indexing when it ends.
        self.implicit = implicit
        self.touched: list[JobRow] = []
        self.jobs: dict[int, JobRow] = {}  # new versions of rows this transaction wrote
        self.locked: set[int] = set()  # job ids locked (written or FOR UPDATE)
        self.markers: dict[str, tuple] = {}  # processed_events rows inserted, not yet committed
        self.deleted_markers: set[str] = set()
        self.ledger: list[tuple] = []
        self.aborted = False
        self.resumed_row: int | None = None  # the job row the running statement waited for


_NO_TRANSACTION = _read_only_transaction()


class _Client:
    __slots__ = ("tx", "crashed", "pending", "waits_for", "snapshot")

    def __init__(self):
        self.tx: Transaction | None = None
        self.crashed = False
        self.pending: Callable[[], Rows | Blocked] | None = None
        self.waits_for: Transaction | None = None  # the holder of the pending statement's lock
        self.snapshot: _Versions | None = None  # kept for the pending statement, if it needs one


class _Versions:
    """The committed versions (None: not yet inserted) of the job rows replaced since a statement
    started: the snapshot a waiting lock_next_candidate continues on."""

    __slots__ = ("rows",)

    def __init__(self):
        self.rows: dict[int, JobRow | None] = {}


class _Wait(Exception):
    """Raised inside a statement when it must wait for `holder`'s transaction.

    `resume` holds extra keyword arguments with which the statement continues where it stopped.
    """

    def __init__(self, holder: Transaction, resume: dict | None = None, row: int | None = None):
        self.holder = holder
        self.resume = resume or {}
        self.row = row


class MemoryBackend(ClientTable):
    """The simulated PostgreSQL. Not thread-safe; driven by one SimPy environment."""

    name = "memory"
    _new_client = _Client

    def __init__(self):
        self.jobs: dict[int, JobRow] = {}
        # Lazy min-heaps over committed rows: an entry is pushed whenever a row becomes Pending or
        # gets a lease, and is dropped when a scan finds it stale (the row moved on).
        self.pending_heap: list[int] = []  # ids of Pending rows
        self.lease_heap: list[tuple[int, int]] = []  # (lease_until, id) of Processing rows
        self._lease_heap_limit = _COMPACT_AT
        self.markers: dict[str, tuple] = {}  # event_id -> (event_id, payload_hash, processed_at)
        self.ledger: list[tuple] = []
        self._ledger_ids = itertools.count(1)  # like a sequence: never rolled back
        self.row_locks: dict[int, Transaction] = {}
        self.marker_locks: dict[str, Transaction] = {}
        self._clients: dict[str, _Client] = {}
        # Row versions replaced since a waiting lock_next_candidate began: its snapshot. Dropped
        # when that statement ends or its client crashes.
        self._snapshots: list[_Versions] = []
        self._dispatch: dict[str, tuple] = {}  # query name -> (Query, bound method)
        # ids whose row may be stall_marked (only reclaim_stalled marks): a superset, checked on use
        self._maybe_marked: set[int] = set()
        # worker_processes: name -> [started_at, heartbeat_at] (microseconds). The model writes these
        # rows only in autocommit statements, which never wait; see _processes_in()
        self.processes: dict[str, list[int]] = {}

    # ---- connections and transactions -------------------------------------------------------

    def begin(self, client: str) -> None:
        state = self._client(client, "BEGIN")
        if state.tx is not None:
            raise ClientStateError(f"client {client} is already in a transaction")
        state.tx = Transaction(client)

    def commit(self, client: str) -> None:
        state = self._client(client, "COMMIT")
        tx = state.tx
        if tx is None:
            raise ClientStateError(f"client {client} has no transaction to commit")
        state.tx = None
        if tx.aborted:
            self._release(tx)
        else:
            self._apply(tx)

    def rollback(self, client: str) -> None:
        state = self._client(client, "ROLLBACK")
        if state.tx is not None:
            self._release(state.tx)
            state.tx = None

    def crash(self, client: str) -> None:
        state = self._clients.get(client)
        if state is None or state.crashed:
            return
        if state.tx is not None:
            self._release(state.tx)
        if state.snapshot is not None:
            self._drop_snapshot(state)
        state.tx = None
        state.pending = None
        state.crashed = True

    def _drop_snapshot(self, state: _Client) -> None:
        self._snapshots.remove(state.snapshot)
        state.snapshot = None

    def in_transaction(self, client: str) -> bool:
        state = self._clients.get(client)
        return state is not None and state.tx is not None

    def close(self) -> None:
        self._clients.clear()

    def _apply(self, tx: Transaction) -> None:
        """Commit: install new row versions, maintain the indexes, release locks."""
        for row in tx.touched:
            self._index(row)
        snapshots = self._snapshots
        for job_id, new in tx.jobs.items():
            old = self.jobs.get(job_id)
            for before in snapshots:
                before.rows.setdefault(job_id, old)
            self.jobs[job_id] = new
            self._index(new)
        for event_id in tx.deleted_markers:
            self.markers.pop(event_id, None)
        if tx.markers:
            self.markers.update(tx.markers)
        if tx.ledger:
            self.ledger.extend(tx.ledger)
        self._release(tx)

    def _discard(self, tx: Transaction) -> None:
        """Roll back: forget the new versions, release the locks."""
        assert not tx.touched, "no autocommit statement may wait or fail after writing in place"
        self._release(tx)

    def _release(self, tx: Transaction) -> None:
        if tx.locked:
            for job_id in tx.locked:
                del self.row_locks[job_id]
            tx.locked = set()
        for event_id in tx.markers:
            del self.marker_locks[event_id]
        for event_id in tx.deleted_markers:
            self.marker_locks.pop(event_id, None)

    def _index(self, row: JobRow) -> None:
        """Push the row's committed state onto the index it belongs to (older entries go stale)."""
        if row.status == PENDING:
            heapq.heappush(self.pending_heap, row.id)
        elif row.status == PROCESSING:
            heapq.heappush(self.lease_heap, (row.lease_until, row.id))
            if len(self.lease_heap) > self._lease_heap_limit:
                self._compact_leases()

    def _compact_leases(self) -> None:
        """Drop stale lease entries: amortised O(1), and bounded memory when nothing scans expiries."""
        jobs = self.jobs
        live = {
            (until, i)
            for until, i in self.lease_heap
            if (r := jobs.get(i)) is not None and r.status == PROCESSING and r.lease_until == until
        }
        self.lease_heap = list(live)
        heapq.heapify(self.lease_heap)
        self._lease_heap_limit = max(_COMPACT_AT, 2 * len(self.lease_heap))

    def _pending_in_order(self) -> Iterator[int]:
        """Committed Pending ids, ascending. Entries popped while scanning are pushed back when
        the scan stops, so callers may stop early; stale and duplicate entries are dropped."""
        heap, jobs, taken = self.pending_heap, self.jobs, []
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

    def _expired_committed(self, now: int) -> list[tuple[int, int]]:
        """(lease_until, id) of committed Processing rows whose lease ended before `now`, in order."""
        heap, jobs, found = self.lease_heap, self.jobs, []
        while heap and heap[0][0] < now:
            until, job_id = heapq.heappop(heap)
            row = jobs.get(job_id)
            if row is not None and row.status == PROCESSING and row.lease_until == until:
                if not found or found[-1] != (until, job_id):
                    found.append((until, job_id))
        for entry in found:
            heapq.heappush(heap, entry)
        return found

    # ---- statement dispatch -------------------------------------------------------------------

    def execute(self, client: str, query: str, params: dict) -> Rows | Blocked:
        entry = self._dispatch.get(query)
        if entry is None:
            entry = self._dispatch[query] = (get_query(query), getattr(self, query))
        state = self._clients.get(client)
        if state is None or state.crashed:
            state = self._client(client, query)  # raises the right error
        if state.pending is not None:
            raise ClientStateError(
                f"client {client} still has a blocked statement; resume it first"
            )
        entry[0].check(params)
        if state.tx is None and entry[0].read_only:
            return entry[1](
                _NO_TRANSACTION, **params
            )  # autocommit SELECT: nothing to apply or release
        if state.tx is not None and state.tx.aborted:
            raise TransactionAbortedError(
                query, "current transaction is aborted, commands ignored until end of transaction"
            )
        return self._run(client, state, query, entry[1], params)

    def resume(self, client: str) -> Rows | Blocked:
        state = self._client(client, "resume")
        step = state.pending
        if step is None:
            raise ClientStateError(f"client {client} has no blocked statement to resume")
        state.pending = None
        return step()

    def _run(
        self,
        client: str,
        state: _Client,
        query: str,
        method: Callable,
        params: dict,
        resumed_row: int | None = None,
    ) -> Rows | Blocked:
        """Run `method` in the client's transaction, or in its own one that commits at once."""
        tx = state.tx
        implicit = tx is None
        if implicit:
            tx = Transaction(client, implicit=True)
        tx.resumed_row = resumed_row
        try:
            rows = method(tx, **params)
        except _Wait as wait:
            if not self._closes_cycle(client, wait.holder):
                if implicit:
                    self._discard(tx)  # nothing of this single statement is kept while it waits
                resumed, row = {**params, **wait.resume}, wait.row
                state.pending = lambda: self._run(client, state, query, method, resumed, row)
                state.waits_for = wait.holder
                state.snapshot = resumed.get("_before")
                return Blocked(client, query, wait.holder.client)
            error: StatementError = DeadlockDetectedError(query, "deadlock detected")
        except StatementError as exc:
            error = exc
        else:
            if implicit:
                self._apply(tx)
            if state.snapshot is not None:
                self._drop_snapshot(state)
            return rows
        if state.snapshot is not None:
            self._drop_snapshot(state)
        self._discard(tx)  # PostgreSQL rolls back at the error: writes discarded, locks released
        if not implicit:  # the block stays open, aborted, until COMMIT or ROLLBACK
            state.tx = Transaction(client)
            state.tx.aborted = True
        raise error

    def _closes_cycle(self, client: str, holder: Transaction) -> bool:
        """Would `client` waiting on `holder` close a cycle of waits? PostgreSQL's deadlock
        detector then fails one statement of the cycle; here always the one closing it."""
        seen = set()
        while holder.client not in seen:
            if holder.client == client:
                return True
            seen.add(holder.client)
            state = self._clients[holder.client]
            if state.tx is not holder or state.pending is None:
                return False  # that transaction has ended, or its client is not waiting
            holder = state.waits_for
        return False

    # ---- row access helpers -------------------------------------------------------------------

    def _visible(self, tx: Transaction, job_id: int) -> JobRow | None:
        """The version `tx` sees: its own write, else the committed one."""
        return tx.jobs.get(job_id) or self.jobs.get(job_id)

    def _lock(self, tx: Transaction, job_id: int) -> None:
        holder = self.row_locks.get(job_id)
        if holder is None:
            self.row_locks[job_id] = tx
            tx.locked.add(job_id)
        elif holder is not tx:
            raise _Wait(holder)

    def _writable(
        self, tx: Transaction, job_id: int, matches: Callable[[JobRow], bool] | None = None
    ) -> JobRow | None:
        """An UPDATE's access to one row: None if the version `tx` sees fails `matches` (no lock,
        no wait, as in PostgreSQL); else lock it (waiting on another holder) and return tx's
        private version to modify. On resume the statement re-runs on the newly committed
        version, which is the EvalPlanQual re-check; like PostgreSQL it locks that version
        first, so the row stays locked even if it no longer matches."""
        row = tx.jobs.get(job_id) or self.jobs.get(job_id)
        if row is None:
            return None
        ok = matches is None or matches(row)
        if not ok and tx.resumed_row != job_id:
            return None
        holder = self.row_locks.get(job_id)
        if holder is not None and holder is not tx:
            raise _Wait(holder, row=job_id)
        if ok and tx.implicit and not self._snapshots and job_id not in tx.jobs:
            tx.touched.append(row)  # in place: nothing will read the old version
            return row
        self._lock(tx, job_id)
        if not ok:
            return None
        own = tx.jobs.get(job_id)
        if own is None:
            own = tx.jobs[job_id] = row.copy()
        return own

    def _candidates(
        self, tx: Transaction, now: int, take_expired: bool, max_attempts: int
    ) -> Iterator[int]:
        """Claimable job ids in id order: committed Pending merged with expired leases, plus rows
        `tx` itself made claimable. Callers re-check the version `tx` sees."""
        scan: Iterator[int] = self._pending_in_order()
        if take_expired:
            expired = sorted(job_id for _, job_id in self._expired_committed(now))
            if expired:
                scan = _merge_sorted(scan, expired)
        if tx.jobs:
            own = sorted(
                job_id
                for job_id, row in tx.jobs.items()
                if row.claimable(now, take_expired, max_attempts)
            )
            scan = _merge_sorted(scan, own)
        return scan

    def _expired(self, tx: Transaction, now: int) -> Iterator[int]:
        """Ids of Processing jobs whose lease ended before `now` as `tx` sees them, by (lease_until, id)."""
        committed = self._expired_committed(now)
        if not tx.jobs:
            yield from (job_id for _, job_id in committed)
            return
        own = sorted(
            (r.lease_until, r.id)
            for r in tx.jobs.values()
            if r.status == PROCESSING and r.lease_until < now
        )
        last = None
        for key in heapq.merge(committed, own):
            row = self._visible(tx, key[1])
            if key != last and row.status == PROCESSING and row.lease_until == key[0]:
                yield key[1]
            last = key

    @staticmethod
    def _take(row: JobRow, owner: str, now: int, lease_until: int) -> None:
        row.status = PROCESSING
        row.lease_owner = owner
        row.lease_until = lease_until
        row.heartbeat_at = now
        row.attempts += 1

    # ---- named queries (one method each, same names as sql/queries.sql) ------------------------

    def insert_job(self, tx: Transaction, *, id, event_id, payload, now) -> Rows:
        holder = self.row_locks.get(id)
        if holder is not None and holder is not tx and id in holder.jobs:
            raise _Wait(holder)  # the key's row is being written; a mere row lock does not wait
        if self._visible(tx, id) is not None:
            raise UniqueViolationError(
                "insert_job", f"duplicate key value violates unique constraint (id)=({id})"
            )
        row = JobRow(id, event_id, payload, to_micros(now))
        self._lock(tx, id)
        tx.jobs[id] = row
        return []

    def select_candidates(self, tx: Transaction, *, now, take_expired, max_attempts, limit) -> Rows:
        now = to_micros(now)
        out = []
        for job_id in self._candidates(tx, now, take_expired, max_attempts):
            if len(out) >= limit:
                break
            row = self._visible(tx, job_id)
            if row.claimable(now, take_expired, max_attempts):
                out.append(
                    (row.id, row.status, row.lease_owner, _seconds(row.lease_until), row.attempts)
                )
        return out

    def claim_conditional(
        self, tx: Transaction, *, id, owner, now, lease_until, max_attempts
    ) -> Rows:
        now = to_micros(now)
        row = self._writable(tx, id, lambda r: r.claimable(now, True, max_attempts))
        if row is None:
            return []
        self._take(row, owner, now, to_micros(lease_until))
        return [(row.id, row.attempts)]

    def claim_unconditional(
        self, tx: Transaction, *, id, owner, now, lease_until, max_attempts
    ) -> Rows:
        row = self._writable(tx, id, lambda r: r.attempts < max_attempts)
        if row is None:
            return []
        self._take(row, owner, to_micros(now), to_micros(lease_until))
        return [(row.id, row.attempts)]

    def claim_skip_locked(
        self, tx: Transaction, *, owner, now, lease_until, take_expired, max_attempts
    ) -> Rows:
        now_us = to_micros(now)
        for job_id in self._candidates(tx, now_us, take_expired, max_attempts):
            holder = self.row_locks.get(job_id)
            if holder is not None and holder is not tx:
                continue
            row = self._writable(
                tx, job_id, lambda r: r.claimable(now_us, take_expired, max_attempts)
            )
            if row is not None:  # the scan stops here: it changed the index it was reading
                self._take(row, owner, now_us, to_micros(lease_until))
                return [(row.id, row.attempts)]
        return []

    def claim_batch(
        self, tx: Transaction, *, owner, now, lease_until, take_expired, max_attempts, limit
    ) -> Rows:
        now_us = to_micros(now)
        picked = []
        for job_id in self._candidates(tx, now_us, take_expired, max_attempts):
            if len(picked) >= limit:
                break
            holder = self.row_locks.get(job_id)
            if holder is not None and holder is not tx:
                continue
            if self._visible(tx, job_id).claimable(now_us, take_expired, max_attempts):
                picked.append(job_id)
        rows = []
        for job_id in picked:  # chosen first: taking a job changes the index the scan reads
            row = self._writable(tx, job_id)
            self._take(row, owner, now_us, to_micros(lease_until))
            rows.append((row.id, row.attempts))
        return rows

    def lock_next_candidate(
        self, tx: Transaction, *, now, take_expired, max_attempts, _resume_at=None, _before=None
    ) -> Rows:
        now_us = to_micros(now)
        scan = self._candidates(tx, now_us, take_expired, max_attempts)
        if _resume_at is not None:  # the row we waited for, then the statement's snapshot after it
            later = (i for i in scan if i > _resume_at and i not in _before.rows)
            older = sorted(
                i
                for i, r in _before.rows.items()
                if i > _resume_at
                and r is not None
                and r.claimable(now_us, take_expired, max_attempts)
            )
            scan = itertools.chain([_resume_at], _merge_sorted(later, older))
        for job_id in scan:
            if job_id != _resume_at and (_before is None or job_id not in _before.rows):
                # the scan's own version must match before it locks or waits (a Pending row may be
                # out of attempts or not yet due); rows from the snapshot were checked above
                if not self._visible(tx, job_id).claimable(now_us, take_expired, max_attempts):
                    continue
            holder = self.row_locks.get(job_id)
            if holder is not None and holder is not tx:
                if _before is None:
                    _before = _Versions()
                    self._snapshots.append(_before)
                raise _Wait(holder, {"_resume_at": job_id, "_before": _before})
            self._lock(tx, job_id)
            row = self._visible(tx, job_id)
            if row.claimable(now_us, take_expired, max_attempts):
                return [(row.id, row.attempts)]
            # EvalPlanQual: the new version no longer matches; it stays locked, as in PostgreSQL
        return []

    def lock_job_nowait(self, tx: Transaction, *, id) -> Rows:
        row = self._visible(tx, id)
        if row is None:
            return []
        holder = self.row_locks.get(id)
        if holder is not None and holder is not tx:
            raise LockNotAvailableError(
                "lock_job_nowait", 'could not obtain lock on row in relation "payment_jobs"'
            )
        self._lock(tx, id)
        return [(row.id, row.status)]

    def heartbeat(self, tx: Transaction, *, id, owner, attempt, now, lease_until) -> Rows:
        row = self._writable(tx, id, lambda r: r.owned_by(owner, attempt))
        if row is None:
            return []
        row.lease_until = to_micros(lease_until)
        row.heartbeat_at = to_micros(now)
        return [(row.id, _seconds(row.lease_until))]

    def complete_fenced(self, tx: Transaction, *, id, owner, attempt, now) -> Rows:
        row = self._writable(tx, id, lambda r: r.owned_by(owner, attempt))
        if row is None:
            return []
        row.status = COMPLETED
        row.completed_at = to_micros(now)
        return [(row.id,)]

    def complete_unfenced(self, tx: Transaction, *, id, now) -> Rows:
        row = self._writable(tx, id)
        if row is None:
            return []
        row.status = COMPLETED
        row.completed_at = to_micros(now)
        return [(row.id,)]

    def reject_job_fenced(self, tx: Transaction, *, id, owner, attempt, now, error) -> Rows:
        row = self._writable(tx, id, lambda r: r.owned_by(owner, attempt))
        if row is None:
            return []
        row.status = DEAD
        row.completed_at = to_micros(now)
        row.last_error = error
        return [(row.id,)]

    def requeue_expired(
        self, tx: Transaction, *, now, max_attempts, limit, retry_backoff, stuck_after
    ) -> Rows:
        """stuck_after is not read: Lease Lab's watcher compares lease_until with now."""
        now_us = to_micros(now)
        out = []
        for job_id in self._expired(tx, now_us):
            if len(out) >= limit:
                break
            holder = self.row_locks.get(job_id)
            if holder is not None and holder is not tx:
                continue
            out.append(job_id)
        rows = []
        for job_id in out:
            row = self._writable(tx, job_id)
            row.retry(max_attempts, "lease expired", now_us, retry_backoff)
            rows.append((row.id, row.status, row.lease_owner, row.attempts))
        rows.sort()
        return rows

    def reclaim_stalled(
        self, tx: Transaction, *, now, max_attempts, max_stalls, limit, retry_backoff
    ) -> Rows:
        now_us = to_micros(now)
        stalled = []
        for job_id in self._expired(tx, now_us):
            if len(stalled) >= limit:
                break
            if not self._visible(tx, job_id).stall_marked:
                continue
            holder = self.row_locks.get(job_id)
            if holder is not None and holder is not tx:
                continue
            stalled.append(job_id)
        marking = sorted(
            job_id
            for job_id in self._maybe_marked | self._processing_ids(tx)
            if job_id not in stalled
            and ((row := self._visible(tx, job_id)).stall_marked or row.status == PROCESSING)
            and self.row_locks.get(job_id) in (None, tx)
        )
        rows = []
        for job_id in stalled:
            row = self._writable(tx, job_id)
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
            row = self._writable(tx, job_id)
            row.stall_marked = row.status == PROCESSING
        self._maybe_marked = {
            j for j in self._maybe_marked.union(marking) if self._visible(tx, j).stall_marked
        }
        rows.sort()
        return rows

    def _processing_ids(self, tx: Transaction) -> set[int]:
        """Ids of the Processing jobs `tx` sees (committed ones from the lease index, and its own)."""
        jobs = self.jobs
        ids = {
            job_id
            for until, job_id in self.lease_heap
            if (r := jobs.get(job_id)) is not None
            and r.status == PROCESSING
            and r.lease_until == until
        }
        for job_id, row in tx.jobs.items():
            if row.status == PROCESSING:
                ids.add(job_id)
            else:
                ids.discard(job_id)
        return ids

    def _processes_in(self, tx: Transaction, query: str) -> dict[str, list[int]]:
        """The process rows, for an autocommit statement: the model never writes them inside a
        transaction, and the simulated database neither versions nor locks them."""
        if not tx.implicit:
            raise ClientStateError(
                f"{query}: worker_processes rows are written in autocommit only in the memory backend"
            )
        return self.processes

    def register_process(self, tx: Transaction, *, owner, now) -> Rows:
        now_us = to_micros(now)
        self._processes_in(tx, "register_process")[owner] = [now_us, now_us]
        return [(owner,)]

    def process_heartbeat(self, tx: Transaction, *, owner, now) -> Rows:
        row = self._processes_in(tx, "process_heartbeat").get(owner)
        if row is None:
            return []
        row[1] = to_micros(now)
        return [(owner,)]

    def prune_processes(
        self,
        tx: Transaction,
        *,
        now,
        stale_after,
        dead,
        max_attempts,
        max_stalls,
        limit,
        retry_backoff,
    ) -> Rows:
        processes = self._processes_in(tx, "prune_processes")
        now_us = to_micros(now)
        cutoff = now_us - stale_after
        orphaned = []
        for job_id in sorted(self._processing_ids(tx)):
            if len(orphaned) >= limit:
                break
            process = processes.get(self._visible(tx, job_id).lease_owner)
            if process is not None and process[1] >= cutoff:
                continue
            holder = self.row_locks.get(job_id)
            if holder is not None and holder is not tx:
                continue
            orphaned.append(job_id)
        for name in [n for n, (_, beat) in processes.items() if beat < cutoff]:
            del processes[name]
        rows = []
        for job_id in orphaned:
            row = self._writable(tx, job_id)
            killed = dead or row.stalls >= max_stalls
            row.retry(0 if killed else max_attempts, "process gone", now_us, retry_backoff)
            row.stalls += 1
            rows.append((row.id, row.status, row.lease_owner, row.attempts))
        return rows

    def rescue_job(
        self, tx: Transaction, *, id, now, max_attempts, retry_backoff, stuck_after
    ) -> Rows:
        row = self._writable(tx, id)
        if row is None:
            return []
        row.retry(max_attempts, "lease expired", to_micros(now), retry_backoff)
        return [(row.id, row.status, row.lease_owner, row.attempts)]

    def fail_job_fenced(
        self, tx: Transaction, *, id, owner, attempt, now, max_attempts, retry_backoff
    ) -> Rows:
        row = self._writable(tx, id, lambda r: r.owned_by(owner, attempt))
        if row is None:
            return []
        row.retry(max_attempts, "deadline exceeded", to_micros(now), retry_backoff)
        return [(row.id, row.status, row.attempts)]

    def release_job_fenced(self, tx: Transaction, *, id, owner, attempt, max_attempts) -> Rows:
        row = self._writable(tx, id, lambda r: r.owned_by(owner, attempt))
        if row is None:
            return []
        row.retry(max_attempts, "released at shutdown", None)
        return [(row.id, row.status, row.attempts)]

    def select_stuck_jobs(self, tx: Transaction, *, now, stuck_after) -> Rows:
        now_us = to_micros(now)
        rows = (self._visible(tx, job_id) for job_id in sorted(self._expired(tx, now_us)))
        return [(r.id, r.lease_owner, _seconds(r.lease_until), r.attempts) for r in rows]

    def insert_dedup_marker(self, tx: Transaction, *, event_id, payload_hash, now) -> Rows:
        if event_id in tx.markers:
            return []
        holder = self.marker_locks.get(event_id)
        if holder is not None and holder is not tx:
            raise _Wait(holder)  # an uncommitted insert of the same key: wait for it
        if event_id in self.markers and event_id not in tx.deleted_markers:
            return []
        self.marker_locks[event_id] = tx
        tx.markers[event_id] = (event_id, payload_hash, to_micros(now))
        return [(event_id,)]

    def read_dedup_marker(self, tx: Transaction, *, event_id) -> Rows:
        row = tx.markers.get(event_id) or self.markers.get(event_id)
        if row is None or (event_id in tx.deleted_markers and event_id not in tx.markers):
            return []
        return [(row[0], row[1], _seconds(row[2]))]

    def purge_dedup_markers(self, tx: Transaction, *, before, _seen=None) -> Rows:
        if _seen is None:  # the rows the statement sees; a resumed one re-checks only these
            before_us = to_micros(before)
            _seen = [
                (e, r)
                for e, r in self.markers.items()
                if r[2] < before_us and e not in tx.deleted_markers
            ]
            _seen += [(e, r) for e, r in tx.markers.items() if r[2] < before_us]
        # EvalPlanQual: a marker deleted (or deleted and inserted anew) meanwhile is skipped
        doomed = sorted(
            e for e, r in _seen if self.markers.get(e) is r and e not in tx.deleted_markers
        )
        own = [e for e, r in _seen if tx.markers.get(e) is r]  # this transaction's inserts
        for event_id in doomed:
            holder = self.marker_locks.get(event_id)
            if holder is not None and holder is not tx:
                raise _Wait(holder, {"_seen": _seen})
        for event_id in doomed:
            self.marker_locks[event_id] = tx
            tx.deleted_markers.add(event_id)
        for event_id in own:  # the key stays locked until the transaction ends
            del tx.markers[event_id]
            tx.deleted_markers.add(event_id)
        return [(e,) for e in sorted(doomed + own)]

    def insert_ledger_entry(
        self, tx: Transaction, *, job_id, event_id, amount_cents, worker, attempt, now
    ) -> Rows:
        entry_id = next(self._ledger_ids)
        tx.ledger.append(
            (entry_id, job_id, event_id, amount_cents, worker, attempt, to_micros(now))
        )
        return [(entry_id,)]

    def count_jobs_by_status(self, tx: Transaction) -> Rows:
        counts: dict[str, int] = {}
        for row in self._all_jobs(tx):
            counts[row.status] = counts.get(row.status, 0) + 1
        return sorted(counts.items())

    def dump_jobs(self, tx: Transaction) -> Rows:
        return [
            (
                r.id,
                r.event_id,
                r.payload,
                r.status,
                r.lease_owner,
                _seconds(r.lease_until),
                r.attempts,
                _seconds(r.heartbeat_at),
                _seconds(r.created_at),
                _seconds(r.completed_at),
                r.last_error,
            )
            for r in sorted(self._all_jobs(tx), key=lambda r: r.id)
        ]

    def dump_processed_events(self, tx: Transaction) -> Rows:
        merged = {**self.markers, **tx.markers}
        for event_id in tx.deleted_markers - tx.markers.keys():
            merged.pop(event_id, None)
        return [(e, h, _seconds(t)) for e, h, t in sorted(merged.values())]

    def dump_ledger(self, tx: Transaction) -> Rows:
        return [row[:-1] + (_seconds(row[-1]),) for row in sorted([*self.ledger, *tx.ledger])]

    def _all_jobs(self, tx: Transaction) -> Iterator[JobRow]:
        yield from ({**self.jobs, **tx.jobs}).values()


def _merge_sorted(a, b) -> Iterator[int]:
    """Merge two ascending id sequences without duplicates."""
    last = None
    for job_id in heapq.merge(a, b):
        if job_id != last:
            yield job_id
            last = job_id
