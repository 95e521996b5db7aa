"""The event log: one record type with a `kind` field, appended by every model process.

Kinds (worker is a worker name like "w0", "watcher" or "producer"; job is the job id or None):
  enqueue            job enqueued; detail = event id
  claim              a lease begins; attempt = attempts after the claim; detail = lease_until
  claim_lost         the claim statement returned no row (someone else has the job)
  idle               a poll found nothing to claim (the worker sleeps poll_interval)
  lock_wait          a statement waited on a row lock; detail = "holder:seconds"
  heartbeat          lease renewed; detail = new lease_until (with record_heartbeats=False only
                     renewals of a lease that had already lapsed are kept)
  lease_held         with record_heartbeats=False, at the horizon: a worker still holds this lease;
                     detail = lease_until as its owner last renewed it
  heartbeat_rejected the fenced heartbeat found the lease gone (worker learns it lost the job)
  heartbeat_lost     the heartbeat never reached the DB (fault)
  execution_timeout  a renewal could not pass claim + policy.execution_timeout: the worker gives the
                     job up as if its lease were lost; detail = that cap
  db_error           a statement failed (partition); detail = query name
  psp_charge         the PSP charged the card; detail = "new" or "replay" (idempotency key seen)
  effect             a ledger row committed (the DB effect); detail = event id
  dedup_skip         the dedup marker existed: effect not applied again; detail = event id
  payload_conflict   same event id, other payload: rejected by policy (job -> Dead)
  complete           completion committed; detail = lease_until as the owner last renewed it
                     (complete_rejected, abandon and crash of an owner carry it too)
  complete_rejected  fenced completion refused (not the owner of this attempt any more)
  abandon            the worker dropped the job after learning its lease was lost
  crash / restart    a worker died / came back (new connection)
  drop               a prefetched job waiting in the dying worker's buffer went with it (policy.
                     prefetch; its lease stays until the watcher requeues it); detail = lease_until
  pause_start / pause_end, partition_start / partition_end
  watcher_tick       the watcher ran; detail = number of jobs it requeued or killed
  requeue            the watcher moved a job; attempt = attempts; detail = new status (Pending/Dead)
  shutdown           a worker stopped gracefully (faults.shutdown = graceful), like crash otherwise
  release            ... and gave its job back; detail = new status (Pending/Dead), None if it had
                     lost it
  release_lost       ... but the release never reached the database (faults.release_loss): the job
                     stays leased until the watcher requeues it
  rescue_job         a worker took the watcher's tick as a job (policy.rescue = job); detail = the
                     seconds the task waited for a free worker since it was due
  rescue_lost        the worker died running that tick; detail = the task's due time
  clock_step         the database's clock jumped (faults.db_clock_steps); worker = "db", detail =
                     the step in seconds (negative: backwards)
  deadline           the worker-side deadline failed the job for a retry while its handler runs on;
                     detail = new status (Pending/Dead), None if the worker no longer owned it
  cancel             ... after stopping the handler (policy.deadline_action = cancel)
  late_result        a handler past its deadline finished and the worker dropped its result (policy.
                     deadline_action = drop): no completion was sent; detail = "dropped"
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

if TYPE_CHECKING:  # the DataFrame is built on demand: a live worker process never imports pandas
    import pandas as pd

STATUS_MOVES = (
    "requeue",
    "release",
    "deadline",
)  # records whose detail is the job's new status (None: no row)


class Event(NamedTuple):
    t: float
    kind: str
    worker: str | None = None
    job: int | None = None
    attempt: int | None = None
    detail: object = None


class LogArrays(NamedTuple):
    """The log column by column: t, kind codes, job ids (-1 for none), details; kind <-> code."""

    t: np.ndarray
    kind: np.ndarray
    job: np.ndarray
    detail: list[object]
    codes: dict[str, int]
    names: list[str]  # the kind of each code

    def rows(self, *kinds: str) -> np.ndarray:
        """Positions of the records of these kinds, in log order."""
        wanted = [self.codes[k] for k in kinds if k in self.codes]
        if len(wanted) == 1:
            return np.flatnonzero(self.kind == wanted[0])
        return np.flatnonzero(np.isin(self.kind, wanted))


COLUMNS = list(Event._fields)
_NONE = -1


class EventLog:
    """The run's records, stored column by column: 27 bytes a record (t, kind, worker, job,
    attempt and a reference to its detail, an object the database mostly holds too), no object
    per record, so that 1M-job runs fit.

    `add` appends one record; iterating yields Event tuples; `frame()` builds the tidy DataFrame.
    """

    __slots__ = (
        "_t",
        "_kind",
        "_worker",
        "_job",
        "_attempt",
        "_detail",
        "_kinds",
        "_kind_code",
        "_workers",
        "_worker_code",
    )

    def __init__(self) -> None:
        self._t = array("d")
        self._kind = array("B")
        self._worker = array("h")
        self._job = array("i")  # job ids count the run's jobs: 2**31 is out of any run's reach
        self._attempt = array("i")
        self._detail: list[object] = []
        self._kinds: list[str] = []
        self._kind_code: dict[str, int] = {}
        self._workers: list[str] = []
        self._worker_code: dict[str | None, int] = {None: _NONE}

    def add(
        self,
        t: float,
        kind: str,
        worker: str | None = None,
        job: int | None = None,
        attempt: int | None = None,
        detail: object = None,
    ) -> None:
        code = self._kind_code.get(kind)
        if code is None:
            code = self._kind_code[kind] = len(self._kinds)
            self._kinds.append(kind)
        who = self._worker_code.get(worker)
        if who is None:
            assert worker is not None  # None is coded up front
            who = self._worker_code[worker] = len(self._workers)
            self._workers.append(worker)
        self._t.append(t)
        self._kind.append(code)
        self._worker.append(who)
        self._job.append(_NONE if job is None else job)
        self._attempt.append(_NONE if attempt is None else attempt)
        self._detail.append(detail)

    def __len__(self) -> int:
        return len(self._t)

    def count(self, kind: str) -> int:
        """How many records of `kind` the log holds so far."""
        code = self._kind_code.get(kind)
        return 0 if code is None else self._kind.count(code)

    def last_time(self, kind: str) -> float | None:
        """The time of the last record of `kind`, or None if there is none."""
        code = self._kind_code.get(kind)
        if code is None:
            return None
        codes = self._kind
        for i in range(len(codes) - 1, -1, -1):
            if codes[i] == code:
                return self._t[i]
        return None

    def records_but(self, kind: str) -> list[Event]:
        """Every record but those of `kind`, as Event tuples: a screen that reads all other
        records several times skips the many idle polls once (sim.hunting.verdict)."""
        return list(self._records(self._kind_code.get(kind, -1)))

    def __iter__(self) -> Iterator[Event]:
        return self._records(-1)

    def _records(self, skip: int) -> Iterator[Event]:
        """The records as Event tuples, but those of kind code `skip` (-1: none skipped)."""
        kinds, workers = self._kinds, self._workers
        for t, kind, who, job, attempt, detail in zip(
            self._t, self._kind, self._worker, self._job, self._attempt, self._detail, strict=True
        ):
            if kind == skip:
                continue
            yield Event(
                t,
                kinds[kind],
                None if who == _NONE else workers[who],
                None if job == _NONE else job,
                None if attempt == _NONE else attempt,
                detail,
            )

    def arrays(self) -> LogArrays:
        """The columns as numpy arrays, copied (the log may grow on): what summaries compute on."""
        return LogArrays(
            np.array(self._t, dtype=np.float64),
            np.array(self._kind, dtype=np.uint8),
            np.array(self._job, dtype=np.int64),
            list(self._detail),
            dict(self._kind_code),
            list(self._kinds),
        )

    def frame(self) -> pd.DataFrame:
        """One row per record: t, kind, worker, job, attempt, detail (nullable integers as
        Int64)."""
        import pandas as pd

        kinds = (
            pd.Categorical.from_codes(
                np.frombuffer(self._kind, dtype=np.uint8), categories=self._kinds
            )
            if self._kinds
            else pd.Categorical([])
        )
        workers = np.array([None, *self._workers], dtype=object)[
            np.frombuffer(self._worker, dtype=np.int16) + 1
        ]
        job = np.frombuffer(self._job, dtype=np.int32).astype(np.int64)
        attempt = np.frombuffer(self._attempt, dtype=np.int32)
        frame = pd.DataFrame(
            {
                "t": np.frombuffer(self._t, dtype=np.float64).copy(),
                "kind": np.asarray(kinds, dtype=object),
                "worker": workers,
                "job": pd.array(np.where(job == _NONE, 0, job), dtype="Int64"),
                "attempt": pd.array(np.where(attempt == _NONE, 0, attempt), dtype="Int64"),
                "detail": pd.Series(self._detail, dtype=object),
            }
        )
        frame.loc[job == _NONE, "job"] = pd.NA
        frame.loc[attempt == _NONE, "attempt"] = pd.NA
        return frame
