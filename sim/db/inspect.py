"""The queue's state as the database holds it, read into pandas: the tables' columns, the named
dumps of sql/ (query_state), and SQL text of one's own on a PostgresBackend (sql_frame).

This is the "queryable state" seed 1 praises over a broker's visibility timeout: the job's status,
its attempt history and its stuck leases live in one transactional place that anyone can query.

    db = PostgresBackend()                    # or MemoryBackend(): the same calls, the same frames
    run = sim.run("crash-recovery", backend=db)  # a backend passed in is left open
    state = query_state(db, now=run.scenario.horizon)
    state.status_counts, state.attempts, state.stuck
    db.close()

    # or on a schema kept by `python -m sim run ... --backend postgres --keep-schema`
    state = query_state("postgresql://...", schema="leaselab_1a2b3c4d5e6f")

Times are simulated seconds, as everywhere in Lease Lab; sql_frame returns timestamptz, which
sim_seconds turns into simulated seconds.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import pandas as pd

from sim.db.base import Backend, Blocked, Rows, from_timestamp
from sim.db.errors import ClientStateError
from sim.db.queries import QUERY_DEFAULTS
from sim.db.queue import contracts
from sim.errors import ConfigError

if TYPE_CHECKING:
    from sim.db.postgres import PostgresBackend

CLIENT = "inspector"
JOB_COLUMNS = [column for column, _ in contracts.JOB_COLUMNS]
LEDGER_COLUMNS = [
    "entry_id",
    "job_id",
    "event_id",
    "amount_cents",
    "worker",
    "attempt",
    "applied_at",
]
MARKER_COLUMNS = ["event_id", "payload_hash", "processed_at"]
STUCK_COLUMNS = ["id", "lease_owner", "lease_until", "attempts"]
TABLE_COLUMNS = {
    "jobs": JOB_COLUMNS,
    "ledger": LEDGER_COLUMNS,
    "processed_events": MARKER_COLUMNS,
}  # dump_<table>
STATUSES = contracts.STATUSES


@dataclass(frozen=True)
class QueueState:
    """The final (or current) tables of one run, and what an operator would ask of them."""

    now: float  # the instant `stuck` was evaluated at
    jobs: pd.DataFrame  # payment_jobs, one row per job (dump_jobs)
    ledger: pd.DataFrame  # one row per applied database effect (dump_ledger)
    processed_events: pd.DataFrame  # the dedup markers of seed 2 (dump_processed_events)
    status_counts: pd.Series  # jobs per status, all four statuses (count_jobs_by_status)
    stuck: pd.DataFrame  # Processing jobs whose lease expired before `now` (select_stuck_jobs)

    @property
    def attempts(self) -> pd.DataFrame:
        """Attempt history per job: leases taken (attempts, never reset), the last owner, how it
        ended, and which attempts of which workers applied the effect (ledger rows)."""
        effects = (
            self.ledger.sort_values("entry_id")
            .groupby("job_id")
            .agg(
                effects=("entry_id", "size"),
                effect_attempts=("attempt", list),
                effect_workers=("worker", list),
            )
        )
        history = self.jobs[
            ["id", "event_id", "status", "attempts", "lease_owner", "last_error", "completed_at"]
        ].set_index("id")
        history = history.join(effects)
        history["effects"] = history["effects"].fillna(0).astype(int)
        for column in ("effect_attempts", "effect_workers"):
            history[column] = [v if isinstance(v, list) else [] for v in history[column]]
        return history.reset_index()

    def __repr__(self) -> str:
        counts = ", ".join(f"{s} {n}" for s, n in self.status_counts.items())
        return (
            f"QueueState(now={self.now:g}: {counts}; {len(self.stuck)} stuck, "
            f"{len(self.ledger)} ledger rows, {len(self.processed_events)} markers)"
        )


def query_state(
    source: Backend | str, *, schema: str | None = None, now: float | None = None
) -> QueueState:
    """Read the queue's tables through `source`: an open Backend (memory or postgres), or a DSN
    with the `schema` a run kept. `now` (simulated seconds) is when leases are judged expired;
    by default the latest time written in the tables."""
    if isinstance(source, str):
        from sim.db.postgres import PostgresBackend

        if not schema:
            raise ValueError(
                "query_state(dsn): give the schema a run kept, e.g. schema='leaselab_...'"
            )
        with PostgresBackend.attach(source, schema) as db:
            return _read(db, now)
    works_in = getattr(source, "schema", schema)
    if schema is not None and works_in != schema:
        raise ValueError(f"schema {schema!r} given, but the backend works in {works_in!r}")
    return _read(source, now)


def final_tables(db: Backend) -> dict[str, Rows]:
    """The tables a run leaves (jobs, ledger, processed_events) as rows, read on the inspector's
    own connection: what Run.tables holds, after a simulated run and after a live one alike."""
    db.connect(CLIENT)
    return {name: _rows(db, f"dump_{name}") for name in TABLE_COLUMNS}


def _read(db: Backend, now: float | None) -> QueueState:
    try:
        db.connect(CLIENT)
    except ClientStateError:
        pass  # sim.run's own inspector, idle since it dumped the tables: reuse it
    jobs = _frame(_rows(db, "dump_jobs"), JOB_COLUMNS)
    ledger = _frame(_rows(db, "dump_ledger"), LEDGER_COLUMNS)
    markers = _frame(_rows(db, "dump_processed_events"), MARKER_COLUMNS)
    counts: dict[str, int] = dict(_rows(db, "count_jobs_by_status"))
    status_counts = pd.Series(
        {s: int(counts.get(s, 0)) for s in STATUSES}, name="jobs", dtype="int64"
    )
    status_counts.index.name = "status"
    if now is None:
        now = _latest(jobs, ledger, markers)
    stuck = _frame(
        _rows(
            db,
            "select_stuck_jobs",
            {"now": float(now), "stuck_after": QUERY_DEFAULTS["stuck_after"]},
        ),
        STUCK_COLUMNS,
    )
    return QueueState(float(now), jobs, ledger, markers, status_counts, stuck)


def _rows(db: Backend, query: str, params: dict[str, Any] | None = None) -> Rows:
    """The rows of one of the inspector's reads: plain SELECTs, which wait on no lock."""
    rows = db.execute(CLIENT, query, params or {})
    if isinstance(rows, Blocked):
        raise ClientStateError(f"the inspector's {query} waits on a lock of {rows.holder}")
    return rows


def _frame(rows: Rows, columns: list[str]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=columns)


def _latest(jobs: pd.DataFrame, ledger: pd.DataFrame, markers: pd.DataFrame) -> float:
    """The latest instant written in the tables (lease ends lie in the future: not counted)."""
    written = [jobs[c] for c in ("heartbeat_at", "created_at", "completed_at")]
    written += [ledger["applied_at"], markers["processed_at"]]
    values = pd.concat(written, ignore_index=True).dropna().to_numpy(dtype=float)
    return float(values.max()) if values.size else 0.0


def sql_frame(
    db: Backend, text: str, params: Mapping[str, Any] | None = None, *, read_only: bool = False
) -> pd.DataFrame:
    """Run SQL text on a PostgresBackend's schema (on the backend's own monitor connection) and
    return the rows. read_only: one statement, in a READ ONLY transaction that is rolled back
    (PostgresBackend.run_sql), for SQL a reader typed.

    Time parameters are simulated seconds: pass them through sim.db.base.to_timestamp. Times in
    the result come back as timestamptz; sim_seconds() turns them into simulated seconds.
    """
    if getattr(db, "name", None) != "postgres":
        raise ConfigError("sql_frame: needs a PostgresBackend (sim.make_backend('postgres'))")
    columns, rows = cast("PostgresBackend", db).run_sql(text, params, read_only=read_only)
    return pd.DataFrame(rows, columns=columns) if columns else pd.DataFrame()


def sim_seconds(values: Iterable[Any]) -> pd.Series:
    """timestamptz values from PostgreSQL -> simulated seconds (NaN for NULL)."""
    return pd.Series(
        [np.nan if v is None or pd.isna(v) else from_timestamp(v) for v in values], dtype=float
    )
