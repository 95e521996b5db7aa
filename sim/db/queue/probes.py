"""A queue's statements driven by hand on the server, to see what they DO: the rows each returns,
the rows it writes in the queue's tables (inserted, updated or deleted, as the server counts them
in pg_stat_xact_user_tables), the job as dump_jobs then reads it, and the plan the server makes
of it (EXPLAIN: which tables it writes, whether it locks the rows it reads).

Everything happens in the scratch schema of the check (sim.db.queue.preflight.scratch), inside a
transaction that is rolled back; each probe runs in a savepoint of its own.

    with lab_on(queue, policy, dsn) as lab:
        with lab.trial():
            lab.enqueue(1, now=0.0)
            got = lab.claim("w0", now=1.0)       # (job, attempt) by the policy's claim path
            lab.execute("heartbeat", id=1, owner="w1", attempt=1, now=2.0)
            lab.written                            # rows the last statement wrote
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg import pq
from psycopg.adapt import Transformer

from sim.db import wire
from sim.db.base import Rows, to_micros
from sim.db.queue.adapter import QueueAdapter
from sim.db.queue.contracts import BOOKKEEPING_TABLES
from sim.db.queue.preflight import execute, message, ok, scratch
from sim.payload import payload_hash, payload_json
from sim.protocol.statements import claim_path, watcher_path
from sim.protocol.watcher import MAX_STALLS

if TYPE_CHECKING:
    from sim.db.queue.directory import QueueDefinition
    from sim.scenario.settings import Policy

CLIENT = "probe"
READY_LIMIT = 1e7  # seconds: a requeued job not claimable this long after its move never is
WATCHER_BATCHES = ("requeue_expired", "reclaim_stalled", "prune_processes")  # limit: watcher_batch
READY_CLAIMS = 50  # claims a readiness probe makes before it gives up on reaching the job
_WRITTEN = """
SELECT coalesce(sum(n_tup_ins + n_tup_upd + n_tup_del), 0)::bigint
FROM pg_stat_xact_user_tables WHERE schemaname = $1 AND NOT relname = ANY($2::text[])
"""


class ProbeError(Exception):
    """A statement failed while being probed: the probe shows nothing."""

    def __init__(self, name: str, problem: str) -> None:
        super().__init__(f"{name} failed: {problem}")
        self.name = name


@dataclass(frozen=True)
class Plan:
    """What the server plans to do with a statement (EXPLAIN, not run)."""

    writes: tuple[tuple[str, str], ...]  # (operation, table): ("Update", "river_job"), ...
    locks: bool  # it locks rows it reads (a LockRows node: FOR UPDATE / FOR NO KEY UPDATE ...)

    def describe(self) -> str:
        if not self.writes:
            return "a read (it writes no table)" + (" that locks rows" if self.locks else "")
        steps = ", ".join(f"{op} on {table}" for op, table in self.writes)
        what = "one data-changing step" if len(self.writes) == 1 else "data-changing steps"
        return f"{what} ({steps})" + (", locking the rows it reads" if self.locks else "")


class Lab:
    """A queue's statements bound and run by hand in a scratch schema (see the module docstring)."""

    def __init__(
        self, queue: QueueDefinition, policy: Policy, conn: psycopg.Connection, schema: str
    ) -> None:
        self.queue, self.policy, self.conn, self.schema = queue, policy, conn, schema
        self.pg = conn.pgconn
        self.tx = Transformer(conn)
        self.ttl = float(policy.lease_ttl)
        self.prepared: set[str] = set()
        self.adapter = QueueAdapter(queue)
        self.written = 0  # rows the last statement wrote in the queue's tables
        self.returned: Rows = []  # the rows it returned, in the model's terms
        self._savepoints = 0

    # ---- statements ----------------------------------------------------------------------------

    def has(self, name: str) -> bool:
        return self.queue.sql_of(name) is not None

    def execute(self, name: str, **params: Any) -> Rows:
        """Run statement `name` (the queue's, else Lease Lab's); every parameter the model binds
        that is not given gets the policy's value. Its rows, in the model's terms."""
        query = self.queue.queries[name]
        params = self._complete(name, query.param_names, params)
        st = wire.statement(query, self.queue.id_oid)
        before = self._written()
        bound = self.adapter.bind(CLIENT, name, params)
        self._prepare(name, st)
        dumped = self.tx.dump_sequence(wire.values(st, bound), st.formats)
        # psycopg types exec_prepared's values without None (NULL), which its exec_params and
        # libpq take
        result = self.pg.exec_prepared(self._handle(name), dumped, None, result_format=1)  # type: ignore[arg-type]
        if result.status not in (pq.ExecStatus.TUPLES_OK, pq.ExecStatus.COMMAND_OK):
            raise ProbeError(name, message(result))
        rows = []
        if result.ntuples:
            self.tx.set_pgresult(result, format=pq.Format.BINARY)
            rows = self.tx.load_rows(0, result.ntuples, tuple)
        self.written = self._written() - before
        self.returned = self.adapter.rows(CLIENT, rows, False)
        return self.returned

    def plan(self, name: str, **params: Any) -> Plan:
        """The server's plan of statement `name` with these parameters (EXPLAIN, nothing runs)."""
        query = self.queue.queries[name]
        params = self.adapter.bind(CLIENT, name, self._complete(name, query.param_names, params))
        self.adapter.rows(CLIENT, [], False)  # nothing ran
        st = wire.statement(query, self.queue.id_oid)
        dumped = self.tx.dump_sequence(wire.values(st, params), st.formats)
        text = b"EXPLAIN (FORMAT JSON) " + st.text
        result = self.pg.exec_params(text, dumped, list(st.oids), None, result_format=0)
        if result.status != pq.ExecStatus.TUPLES_OK:
            raise ProbeError(name, message(result))
        # psycopg types a value as bytes | None: EXPLAIN's one value is never NULL
        nodes = list(_nodes(json.loads(result.get_value(0, 0).decode())[0]["Plan"]))  # type: ignore[union-attr]
        writes = tuple(
            dict.fromkeys(
                (n["Operation"], n.get("Relation Name", "?"))
                for n in nodes
                if n["Node Type"] == "ModifyTable"
            )
        )
        return Plan(writes, any(n["Node Type"] == "LockRows" for n in nodes))

    def _complete(self, name: str, names: Iterable[str], params: dict[str, Any]) -> dict[str, Any]:
        p = self.policy
        now = params.get("now", 0.0)
        defaults = {
            "lease_until": now + self.ttl,
            "take_expired": p.claim_takes_expired,
            # a two-phase pass counts a stall's recoveries on top (sim.protocol.watcher)
            "max_attempts": p.claim_cap if name == "reclaim_stalled" else p.max_attempts,
            "max_stalls": MAX_STALLS if p.max_stalls is None else p.max_stalls,
            "limit": p.watcher_batch if name in WATCHER_BATCHES else p.candidates,
            "retry_backoff": to_micros(p.retry_backoff),
            "stuck_after": self.ttl,
            "error": "payload differs from the first delivery of this event id",
        }
        if "id" in params:
            event = f"e{params['id']}"
            payload = payload_json(event, 100)
            defaults.update(event_id=event, payload=payload, payload_hash=payload_hash(payload))
        return {n: params[n] if n in params else defaults[n] for n in names}

    def _handle(self, name: str) -> bytes:
        return f"leaselab_probe_{name}".encode()

    def _prepare(self, name: str, st: wire.Statement) -> None:
        if name in self.prepared:
            return
        result = self.pg.prepare(self._handle(name), st.text, list(st.oids))
        if result.status != pq.ExecStatus.COMMAND_OK:
            raise ProbeError(name, message(result))
        self.prepared.add(name)

    def _written(self) -> int:
        result = self.pg.exec_params(
            _WRITTEN.encode(),
            [self.schema.encode(), ("{" + ",".join(BOOKKEEPING_TABLES) + "}").encode()],
        )
        ok(result, "count the rows a statement wrote")
        return int(result.get_value(0, 0))  # type: ignore[arg-type]  # a sum, coalesced: never NULL

    # ---- the job's life, through the queue's own statements ------------------------------------

    def enqueue(self, job: int, now: float = 0.0) -> None:
        self.execute("insert_job", id=job, now=now)

    def state(self, job: int) -> tuple[Any, ...] | None:
        """The job's dump_jobs row (id, event_id, payload, status, lease_owner, lease_until,
        attempts, ...), None when the table no longer holds it."""
        written, returned = self.written, self.returned
        try:
            return next((row for row in self.execute("dump_jobs") if row[0] == job), None)
        finally:
            self.written, self.returned = written, returned

    def claim(self, owner: str, now: float) -> tuple[int, int] | None:
        """(job, attempt) claimed by the policy's claim path (sim.protocol.statements.claim_path),
        as a worker claims; None if none. A locking read hands over its first row alone."""
        *read, write = claim_path(self.policy)
        if not read:
            rows = self.execute(write, owner=owner, now=now)
            return tuple(rows[0][:2]) if rows else None
        candidates = self.execute(read[0], now=now)
        if read[0] == "lock_next_candidate":
            candidates = candidates[:1]
        for row in candidates:
            rows = self.execute(write, id=row[0], owner=owner, now=now)
            if rows:
                return tuple(rows[0][:2])
        return None

    def watch(self, now: float) -> Rows:
        """The policy's watcher at `now` by its path (sim.protocol.statements.watcher_path), as
        far as it moves a job whose lease expired: one tick, its read and write at the same
        instant; a two-phase check's two passes (the first marks the job, the second moves it)."""
        *read, write = watcher_path(self.policy)
        if read:
            rows = []
            for row in self.execute(read[0], now=now):
                rows += self.execute(write, id=row[0], now=now)
            return rows
        if self.policy.stall_check == "two_phase":
            self.execute(write, now=now)
        return self.execute(write, now=now)

    def complete(self, job: int, owner: str, attempt: int, now: float) -> Rows:
        if self.policy.fencing:
            return self.execute("complete_fenced", id=job, owner=owner, attempt=attempt, now=now)
        return self.execute("complete_unfenced", id=job, now=now)

    @contextmanager
    def trial(self) -> Iterator[None]:
        """A probe of its own: a savepoint rolled back afterwards, fresh id and lease counts."""
        with self._savepoint():
            self.adapter = QueueAdapter(self.queue)
            yield

    @contextmanager
    def what_if(self) -> Iterator[None]:
        """Inside a trial: try something and undo it (a savepoint rolled back), the jobs' ids and
        lease counts as they were."""
        adapter = copy.deepcopy(self.adapter)
        try:
            with self._savepoint():
                yield
        finally:
            self.adapter = adapter

    @contextmanager
    def _savepoint(self) -> Iterator[None]:
        self._savepoints += 1
        name = f"leaselab_probe_{self._savepoints}"
        ok(execute(self.pg, f"SAVEPOINT {name}"), "start a probe")
        try:
            yield
        finally:
            execute(self.pg, f"ROLLBACK TO SAVEPOINT {name}")

    # ---- when a requeued job is due again --------------------------------------------------------

    def takes(self, job: int, now: float) -> bool:
        """Would the policy's claim hand `job` out at `now`? Tried and undone; other claimable jobs
        taken first (oldest first) are claimed on the way, up to READY_CLAIMS of them."""
        with self.what_if():
            for _ in range(READY_CLAIMS):
                got = self.claim(CLIENT, now)
                if got is None:
                    return False
                if got[0] == job:
                    return True
        return False

    def ready_after(
        self, job: int, now: float, limit: float = READY_LIMIT, *, precise: bool = True
    ) -> float | None:
        """How long after `now` the policy's claim first takes `job` (to 0.1%, or 1 ms; without
        `precise`, a time by which it does, within 4x), as the row the queue's own statements
        wrote decides (its run-after, scheduled_at, ...); None if not within `limit` seconds."""
        if self.takes(job, now):
            return 0.0
        low, high = 0.0, 0.5
        while not self.takes(job, now + high):
            if high >= limit:
                return None
            low, high = high, min(high * 4, limit)
        while precise and high - low > max(1e-3 * high, 1e-3):
            middle = (low + high) / 2
            low, high = (low, middle) if self.takes(job, now + middle) else (middle, high)
        return high


def _nodes(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield node
    for child in node.get("Plans", ()):
        yield from _nodes(child)


@contextmanager
def lab_on(queue: QueueDefinition, policy: Policy, dsn: str) -> Iterator[Lab]:
    """A Lab on the server at `dsn`, in the sandbox of the queue's SQL (sim.db.queue.sandbox: a role
    of its own and its time limit), its tables in a transaction rolled back afterwards."""
    from sim.db.queue.sandbox import sandbox

    with sandbox(dsn, own_rights=queue.own_rights) as box:
        conn = box.connect(application_name="leaselab:probe")
        try:
            wire.register_loaders(conn)
            with scratch(queue, conn.pgconn, box.schema, box.limit):
                yield Lab(queue, policy, conn, box.schema)
        finally:
            conn.close()
