"""MemoryBackend: a simulated PostgreSQL at READ COMMITTED, faithful where the lessons live.

Committed rows live in dicts; a transaction's writes are private new row versions until commit.
Row locks are held to commit/rollback. An UPDATE (or FOR UPDATE) of a row locked by another
transaction returns Blocked if the version it sees matches its WHERE (a row that does not match
is skipped without waiting or locking, as in PostgreSQL); on resume it re-runs against the newly
committed version, which is PostgreSQL's EvalPlanQual re-check for these single-table
statements. SKIP LOCKED skips, NOWAIT raises 55P03, ON CONFLICT waits on an uncommitted insert of
the same key. A plain SELECT never waits and reads committed versions.

This module keeps the sessions: transactions, statement dispatch, waits and deadlocks. The tables,
their indexes and row access are sim.db.memory.tables; the named queries, one function each with
the query's name (tests assert the name sets are equal), are grouped by job in claims, leases,
watcher and bookkeeping, and bound here as methods. A resumed `lock_next_candidate` continues on
the snapshot of its start, as PostgreSQL's scan does, from the versions `apply` keeps aside while
it waits.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sim.db.base import Blocked, ClientTable, Rows
from sim.db.errors import (
    ClientStateError,
    DeadlockDetectedError,
    StatementError,
    TransactionAbortedError,
)
from sim.db.memory import bookkeeping, claims, leases, watcher
from sim.db.memory.rows import NO_TRANSACTION, Client, Transaction, Versions, Wait
from sim.db.memory.tables import Tables, apply, discard, release
from sim.db.queries import get_query

# a named query's dispatch: its parameter check, whether it is read-only, the method that runs it
Dispatch = tuple[Callable[[dict[str, Any]], None], bool, Callable[..., Rows]]


class MemoryBackend(Tables, ClientTable[Client]):
    """The simulated PostgreSQL. Not thread-safe; driven by one SimPy environment."""

    name = "memory"
    _new_client = Client

    def __init__(self) -> None:
        super().__init__()
        self._clients: dict[str, Client] = {}
        self._dispatch: dict[str, Dispatch] = {}  # by query name

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
            release(self, tx)
        else:
            apply(self, tx)

    def rollback(self, client: str) -> None:
        state = self._client(client, "ROLLBACK")
        if state.tx is not None:
            release(self, state.tx)
            state.tx = None

    def crash(self, client: str) -> None:
        state = self._clients.get(client)
        if state is None or state.crashed:
            return
        if state.tx is not None:
            release(self, state.tx)
        if state.snapshot is not None:
            self._drop_snapshot(state, state.snapshot)
        state.tx = None
        state.pending = None
        state.crashed = True

    def _drop_snapshot(self, state: Client, snapshot: Versions) -> None:
        self.snapshots.remove(snapshot)
        state.snapshot = None

    def in_transaction(self, client: str) -> bool:
        state = self._clients.get(client)
        return state is not None and state.tx is not None

    def close(self) -> None:
        self._clients.clear()

    # ---- statement dispatch -------------------------------------------------------------------

    def execute(self, client: str, query: str, params: dict[str, Any]) -> Rows | Blocked:
        entry = self._dispatch.get(query)
        if entry is None:
            q = get_query(query)
            entry = self._dispatch[query] = (q.check, q.read_only, getattr(self, query))
        check, read_only, method = entry
        state = self._clients.get(client)
        if state is None or state.crashed:
            state = self._client(client, query)  # raises the right error
        if state.pending is not None:
            raise ClientStateError(
                f"client {client} still has a blocked statement; resume it first"
            )
        check(params)
        tx = state.tx
        if tx is None:
            if read_only:
                return method(NO_TRANSACTION, **params)  # autocommit SELECT: nothing to apply
        elif tx.aborted:
            raise TransactionAbortedError(
                query, "current transaction is aborted, commands ignored until end of transaction"
            )
        return self._run(client, state, query, method, params)

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
        state: Client,
        query: str,
        method: Callable[..., Rows],
        params: dict[str, Any],
        resumed_row: int | None = None,
    ) -> Rows | Blocked:
        """Run `method` in the client's transaction, or in its own one that commits at once."""
        tx = state.tx
        implicit = tx is None
        if tx is None:
            tx = Transaction(client, implicit=True)
        tx.resumed_row = resumed_row
        try:
            rows = method(tx, **params)
        except Wait as wait:
            if not self._closes_cycle(client, wait.holder):
                if implicit:
                    discard(self, tx)  # nothing of this single statement is kept while it waits
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
                apply(self, tx)
            if state.snapshot is not None:
                self._drop_snapshot(state, state.snapshot)
            return rows
        if state.snapshot is not None:
            self._drop_snapshot(state, state.snapshot)
        discard(self, tx)  # PostgreSQL rolls back at the error: writes discarded, locks released
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
            assert state.waits_for is not None  # set with every pending statement
            holder = state.waits_for
        return False

    # ---- named queries (one function each, same names as sql/queries.sql) ------------------------

    insert_job = claims.insert_job
    select_candidates = claims.select_candidates
    claim_conditional = claims.claim_conditional
    claim_unconditional = claims.claim_unconditional
    claim_skip_locked = claims.claim_skip_locked
    claim_batch = claims.claim_batch
    lock_next_candidate = claims.lock_next_candidate
    lock_job_nowait = claims.lock_job_nowait
    heartbeat = leases.heartbeat
    complete_fenced = leases.complete_fenced
    complete_unfenced = leases.complete_unfenced
    reject_job_fenced = leases.reject_job_fenced
    fail_job_fenced = leases.fail_job_fenced
    release_job_fenced = leases.release_job_fenced
    requeue_expired = watcher.requeue_expired
    reclaim_stalled = watcher.reclaim_stalled
    select_stuck_jobs = watcher.select_stuck_jobs
    rescue_job = watcher.rescue_job
    register_process = watcher.register_process
    process_heartbeat = watcher.process_heartbeat
    prune_processes = watcher.prune_processes
    insert_dedup_marker = bookkeeping.insert_dedup_marker
    read_dedup_marker = bookkeeping.read_dedup_marker
    purge_dedup_markers = bookkeeping.purge_dedup_markers
    insert_ledger_entry = bookkeeping.insert_ledger_entry
    count_jobs_by_status = bookkeeping.count_jobs_by_status
    dump_jobs = bookkeeping.dump_jobs
    dump_processed_events = bookkeeping.dump_processed_events
    dump_ledger = bookkeeping.dump_ledger
