"""The memory backend's records: a job row version, an open transaction's private state, a client
session, the snapshot a waiting scan continues on, and the signal that a statement must wait."""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Iterator
from types import MappingProxyType
from typing import Any, cast

from sim.db.base import MICROS, Blocked, JobState, Rows
from sim.db.memory.compact import LedgerEntry, Marker, pack_payload, unpack_payload

PENDING, PROCESSING, COMPLETED, DEAD = (
    JobState.PENDING,
    JobState.PROCESSING,
    JobState.COMPLETED,
    JobState.DEAD,
)


class JobRow:
    """One version of a payment_jobs row; times are integer microseconds. The payload is kept
    packed (sim.db.memory.compact): a million rows need not hold a million JSON strings."""

    __slots__ = (
        "id",
        "event_id",
        "packed_payload",
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

    id: int
    event_id: str
    packed_payload: str | int
    status: JobState
    lease_owner: str | None
    lease_until: int | None
    attempts: int
    heartbeat_at: int | None
    created_at: int
    completed_at: int | None
    last_error: str | None
    run_after: int | None
    stalls: int
    stall_marked: bool

    def __init__(self, id: int, event_id: str, payload: str, created_at: int) -> None:
        self.id = id
        self.event_id = event_id
        self.packed_payload = pack_payload(event_id, payload)
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
        new.id, new.event_id, new.packed_payload, new.status = (
            self.id,
            self.event_id,
            self.packed_payload,
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

    @property
    def payload(self) -> str:
        return unpack_payload(self.event_id, self.packed_payload)

    def claimable(self, now: int, take_expired: bool, max_attempts: int) -> bool:
        """Pending and due, or (when take_expired) Processing with an expired lease; attempts
        left."""
        if self.attempts >= max_attempts:
            return False
        if self.status == PENDING:
            return self.run_after is None or self.run_after <= now
        # a Processing row always holds a lease_until; narrowing it would cost the claim scans
        return take_expired and self.status == PROCESSING and self.lease_until < now  # type: ignore[operator]

    def retry(self, max_attempts: int, error: str, run_after: int | None, backoff: int = 0) -> None:
        """Back to Pending, due after backoff x attempts^4 (or Dead when out of attempts)."""
        self.status = DEAD if self.attempts >= max_attempts else PENDING
        self.last_error = error
        if run_after is not None:
            self.run_after = run_after + backoff * self.attempts**4

    def owned_by(self, owner: str, attempt: int) -> bool:
        return self.status == PROCESSING and self.lease_owner == owner and self.attempts == attempt


# A settled row's times, each in a 64-bit lane of one int (None as 2**63): times from 0 to 2**62
# microseconds (146 millennia) fit, and a row with any other keeps them unpacked
SETTLED_TIMES = ("created_at", "heartbeat_at", "lease_until", "completed_at")
_NULL, _LANE = 1 << 63, (1 << 64) - 1
_SLOTS = {name: JobRow.__dict__[name] for name in SETTLED_TIMES}  # JobRow's own slot access
_PACKED = _SLOTS["created_at"]  # where a settled row keeps them packed


def _settled_time(lane: int, name: str) -> property:
    shift = 64 * lane

    def read(row: JobRow) -> int | None:
        value = (_PACKED.__get__(row) >> shift) & _LANE
        return None if value == _NULL else value

    def write(row: JobRow, value: int | None) -> None:
        unsettle(row)
        _SLOTS[name].__set__(row, value)

    return property(read, write)


class SettledJobRow(JobRow):
    """A committed row in a final state (Completed or Dead) with its four times packed into one
    int: a 1M-job run keeps a million of them. Reads unpack; a write makes it a JobRow again."""

    __slots__ = ()


for _lane, _name in enumerate(SETTLED_TIMES):
    setattr(SettledJobRow, _name, _settled_time(_lane, _name))


def settle(row: JobRow) -> None:
    """Pack the times of a committed row in a final state, if they fit (see SETTLED_TIMES)."""
    if type(row) is not JobRow or (row.status != COMPLETED and row.status != DEAD):
        return
    created, beat, until, done = row.created_at, row.heartbeat_at, row.lease_until, row.completed_at
    try:  # a float or a negative time raises or fails the check: such a row is left as it is
        if (created | (beat or 0) | (until or 0) | (done or 0)) >> 62:
            return
        packed = created | (_NULL if beat is None else beat) << 64
        packed |= (_NULL if until is None else until) << 128
        packed |= (_NULL if done is None else done) << 192
    except TypeError:
        return
    row.heartbeat_at = row.lease_until = row.completed_at = None
    row.created_at = packed
    row.__class__ = SettledJobRow


def unsettle(row: JobRow) -> None:
    """A settled row back to a JobRow with its times unpacked (before a write)."""
    times = [getattr(row, name) for name in SETTLED_TIMES]
    row.__class__ = JobRow
    for name, value in zip(SETTLED_TIMES, times, strict=True):
        _SLOTS[name].__set__(row, value)


# Read-only stand-ins for the bookkeeping a transaction has not written (most never do): its first
# write gives the transaction its own (Transaction.own_markers and the like)
NO_MARKERS = cast(dict[str, Marker], MappingProxyType({}))
NO_DELETIONS = cast(set[str], frozenset())
NO_LEDGER = cast(list[LedgerEntry], ())


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

    def __init__(self, client: str, implicit: bool = False) -> None:
        self.client = client
        # A single autocommit statement: it updates committed rows in place (no copy) when nothing
        # needs their old versions; `touched` lists them for re-indexing when it ends.
        self.implicit = implicit
        self.touched: list[JobRow] = []
        self.jobs: dict[int, JobRow] = {}  # new versions of rows this transaction wrote
        self.locked: set[int] = set()  # job ids locked (written or FOR UPDATE)
        self.markers = NO_MARKERS  # processed_events rows inserted, not yet committed
        self.deleted_markers = NO_DELETIONS
        self.ledger = NO_LEDGER
        self.aborted = False
        self.resumed_row: int | None = None  # the job row the running statement waited for

    # The bookkeeping a transaction writes is its own from its first write (most never write any).

    def own_markers(self) -> dict[str, Marker]:
        if self.markers is NO_MARKERS:
            assert self is not NO_TRANSACTION, "a write in an autocommit SELECT"
            self.markers = {}
        return self.markers

    def own_deleted_markers(self) -> set[str]:
        if self.deleted_markers is NO_DELETIONS:
            assert self is not NO_TRANSACTION, "a write in an autocommit SELECT"
            self.deleted_markers = set()
        return self.deleted_markers

    def own_ledger(self) -> list[LedgerEntry]:
        if self.ledger is NO_LEDGER:
            assert self is not NO_TRANSACTION, "a write in an autocommit SELECT"
            self.ledger = []
        return self.ledger


def _read_only_transaction() -> Transaction:
    """What an autocommit SELECT runs in: no writes, locks or markers of its own, and none
    allowed."""
    tx = Transaction("", implicit=True)
    # read-only stand-ins for the fields a write would change, so that any write raises
    tx.jobs = cast(dict[int, JobRow], MappingProxyType({}))
    tx.locked, tx.touched = cast(set[int], frozenset()), cast(list[JobRow], ())
    return tx


NO_TRANSACTION = _read_only_transaction()


class Versions:
    """The committed versions (None: not yet inserted) of the job rows replaced since a statement
    started: the snapshot a waiting lock_next_candidate continues on."""

    __slots__ = ("rows",)

    def __init__(self) -> None:
        self.rows: dict[int, JobRow | None] = {}


class Client:
    """One client's session: its open transaction and the statement it waits in, if any."""

    __slots__ = ("tx", "crashed", "pending", "waits_for", "snapshot")

    def __init__(self) -> None:
        self.tx: Transaction | None = None
        self.crashed = False
        self.pending: Callable[[], Rows | Blocked] | None = None
        self.waits_for: Transaction | None = None  # the holder of the pending statement's lock
        self.snapshot: Versions | None = None  # kept for the pending statement, if it needs one


class Wait(Exception):
    """Raised inside a statement when it must wait for `holder`'s transaction.

    `resume` holds extra keyword arguments with which the statement continues where it stopped.
    """

    def __init__(
        self, holder: Transaction, resume: dict[str, Any] | None = None, row: int | None = None
    ) -> None:
        self.holder = holder
        self.resume = resume or {}
        self.row = row


def seconds(micros: int | None) -> float | None:
    return None if micros is None else micros / MICROS


def merge_sorted(a: Iterable[int], b: Iterable[int]) -> Iterator[int]:
    """Merge two ascending id sequences without duplicates."""
    last = None
    for job_id in heapq.merge(a, b):
        if job_id != last:
            yield job_id
            last = job_id
