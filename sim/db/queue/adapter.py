"""Between the model and a queue with a schema of its own: the queue's job ids and attempts.

- Ids. The model numbers its jobs 0, 1, 2...; a queue may give them ids of its own (uuid, text,
  its own serial). When insert_job returns a row, its first column is the id the queue gave the
  model's job: from then on `%(id)s` is bound as that id, and every id a statement returns (the
  first column: sim.db.queue.contracts) is read back as the model's number.
- Attempts. A queue with no attempts column returns NULL for attempts: the model's lease number
  is then Lease Lab's own count of the job's claims (a claim in a transaction that rolls back is
  not counted), and dump_jobs keeps the NULL, so the review can say attempts are not kept.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sim.db.base import Rows
from sim.db.queue.contracts import CONTRACTS
from sim.errors import ConfigError

if TYPE_CHECKING:
    from sim.db.queue.directory import QueueDefinition

CLAIMS = frozenset({"claim_conditional", "claim_unconditional", "claim_skip_locked"})
# statements whose rows start with the job's id; the position of their attempts column, if any
_ID_FIRST = frozenset(n for n, c in CONTRACTS.items() if c.returns and c.returns[0][0] == "id")
_ATTEMPTS_AT = {
    n: [col for col, _ in c.returns].index("attempts")
    for n, c in CONTRACTS.items()
    if n != "dump_jobs" and "attempts" in [col for col, _ in c.returns]
}


class QueueAdapter:
    """One run's translation of ids and attempts (see the module docstring)."""

    def __init__(self, queue: QueueDefinition) -> None:
        self.queue = queue
        self.maps_ids = queue.own_ids  # insert_job returns the id the queue gave the job
        self.ids: dict[int, object] = {}  # the model's job -> the queue's id
        self.jobs: dict[object, int] = {}  # the queue's id -> the model's job
        self.claims: dict[int, int] = {}  # job -> claims that returned it (committed or autocommit)
        self._open: dict[str, list[int]] = {}  # client -> jobs it claimed in its open transaction
        self._sent: dict[str, tuple[str, dict[str, Any]]] = {}  # client -> the statement in flight
        self.inserted: set[int] = set()  # the model's jobs insert_job was sent for

    def bind(self, client: str, query: str, params: dict[str, Any]) -> dict[str, Any]:
        """The parameters as the queue's statement takes them (its id for the model's job)."""
        self._sent[client] = (query, params)
        if not self.maps_ids or "id" not in params or query == "insert_job":
            return params
        job = params["id"]
        if job not in self.ids:
            return {**params, "id": None}  # a job the queue never returned: matches no row
        return {**params, "id": self.ids[job]}

    def rows(self, client: str, rows: Rows, in_transaction: bool) -> Rows:
        """The rows of `client`'s statement in the model's terms."""
        query, params = self._sent.pop(client, ("", {}))
        if query == "insert_job":
            self.inserted.add(params["id"])
            if self.maps_ids and rows:
                self._learn(params["id"], rows[0][0])
            return []  # the model reads nothing from insert_job
        if not rows:
            return rows
        if self.maps_ids and query in _ID_FIRST:
            rows = [(self._job(query, row[0]), *row[1:]) for row in rows]
        elif query in _ID_FIRST and self.inserted:  # (live mode: another process inserts)
            stray = next((row[0] for row in rows if row[0] not in self.inserted), None)
            if stray is not None:
                raise ConfigError(
                    f"{self.queue.where(query)}: {query}: returned job id {stray!r}, which Lease "
                    "Lab never inserted (rows of jobs it did not insert are not the run's)"
                )
        if query in CLAIMS:
            job = rows[0][0]
            self.claims[job] = self.claims.get(job, 0) + 1
            if in_transaction:
                self._open.setdefault(client, []).append(job)
        at = _ATTEMPTS_AT.get(query)
        if at is not None and any(row[at] is None for row in rows):
            rows = [
                row
                if row[at] is not None
                else (*row[:at], self.claims.get(row[0], 0), *row[at + 1 :])
                for row in rows
            ]
        return rows

    def ended(self, client: str, committed: bool) -> None:
        """`client`'s transaction committed, rolled back or died with it."""
        for job in self._open.pop(client, ()):
            if not committed:
                self.claims[job] -= 1
        self._sent.pop(client, None)

    def _learn(self, job: int, queue_id: object) -> None:
        if queue_id in self.jobs and self.jobs[queue_id] != job:
            raise ConfigError(
                f"{self.queue.where('insert_job')}: insert_job: returned id {queue_id!r} for job "
                f"{job}, which it already returned for job {self.jobs[queue_id]}; each job needs "
                "an id of its own"
            )
        self.ids[job], self.jobs[queue_id] = queue_id, job

    def _job(self, query: str, queue_id: object) -> int:
        job = self.jobs.get(queue_id)
        if job is None:
            raise ConfigError(
                f"{self.queue.where(query)}: {query}: returned job id {queue_id!r}, which "
                "insert_job never returned (the first column must be the job's id as insert_job "
                "returns it)"
            )
        return job
