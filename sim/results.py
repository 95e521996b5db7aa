"""A finished run: the event log as tidy DataFrames, one row per lease and per job, and the metrics.

Every summary figure is computed from the event log (README.md "Metrics"); the final database
tables are kept beside it so that invariants can cross-check the two. `Run.save(directory)` writes
it all to files (the CLI's `run --out`); `owner_crashes(run)` and `lost_jobs(run)` are the
recoveries and losses the review, the peers comparison and the invariants count.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import numpy as np
import pandas as pd

from sim.db.base import JobState
from sim.db.inspect import JOB_COLUMNS, LEDGER_COLUMNS
from sim.errors import ConfigError
from sim.invariants import Report, check
from sim.model.clock import db_clock
from sim.model.events import STATUS_MOVES, EventLog, LogArrays
from sim.scenario.pinned import recovery_deadline
from sim.scenario.settings import Scenario, dumps, recovery_allowance
from sim.support import output_paths

TERMINAL = (JobState.COMPLETED, JobState.DEAD)
RUN_FILES = ("events", "leases", "jobs")  # the frames Run.save writes


@dataclass
class Run:
    scenario: Scenario
    log: EventLog  # the records in simulation order
    statement_counts: dict[str, int]
    tables: dict[str, list[tuple]]  # final contents: jobs, ledger, processed_events
    worker_skews: dict[str, float] = field(default_factory=dict)
    wall_seconds: float = 0.0
    backend: str = "memory"
    kept_schema: str | None = None  # postgres with keep_schema=True: the schema left for inspection
    queue: str | None = (
        None  # the user's queue directory whose SQL ran (postgres only), None: sql/ as is
    )
    # each worker's own clock (policy.clock = worker; sim.model.clock.WorkerClock): worker_skews
    # holds its constant offset, this also its drift and steps
    worker_clocks: dict = field(default_factory=dict)
    # the queue directory's own settings (its queue.toml, {"policy.NAME": value}) applied to the
    # scenario before any override
    queue_settings: dict = field(default_factory=dict)
    # {(move, attempt): seconds}: how long after a requeue (or a deadline's failure) of a job's
    # attempt-th lease the queue's own SQL makes it due again (None: never), measured for the
    # jobs a queue's run left unfinished (sim.db.queue.sql_findings.retry_delays); else the policy's
    # retry_backoff x attempts^4
    retry_delays: dict = field(default_factory=dict)
    kept_role: str | None = None  # the role that owns a kept schema of a queue's SQL (sandbox)
    # every distinct error of a queue's statement: statement, where, sqlstate, message, count
    statement_errors: list = field(default_factory=list)

    def __repr__(self) -> str:
        return (
            f"Run({self.scenario.name!r}, seed={self.scenario.seed}, backend={self.backend}, "
            f"events={len(self.log)})"
        )

    # ---- tidy frames --------------------------------------------------------------------------

    @cached_property
    def events(self) -> pd.DataFrame:
        """One row per record: t, kind, worker, job, attempt, detail."""
        return self.log.frame()

    @cached_property
    def leases(self) -> pd.DataFrame:
        """One row per lease: who held which job, from when to when, and how it ended."""
        return _leases(self.log, self.scenario, self.worker_skews, self.worker_clocks)

    @cached_property
    def jobs(self) -> pd.DataFrame:
        """One row per job: final status, attempts, owners, effects and latency."""
        return _jobs(self.log_arrays, self.leases)

    @cached_property
    def log_arrays(self) -> LogArrays:
        """The event log as numpy columns (summaries compute on these, not on the events frame)."""
        return self.log.arrays()

    @cached_property
    def statements(self) -> pd.DataFrame:
        """DB statements by kind: count and rate per simulated second (the DB load)."""
        frame = pd.DataFrame(sorted(self.statement_counts.items()), columns=["kind", "count"])
        frame["per_second"] = frame["count"] / self.scenario.horizon
        return frame

    @cached_property
    def table_jobs(self) -> pd.DataFrame:
        """The payment_jobs table as the database holds it at the end of the run."""
        return pd.DataFrame(self.tables["jobs"], columns=JOB_COLUMNS)

    @cached_property
    def table_ledger(self) -> pd.DataFrame:
        return pd.DataFrame(self.tables["ledger"], columns=LEDGER_COLUMNS)

    @cached_property
    def recoveries(self) -> pd.DataFrame:
        """One row per crash of a lease owner: when the job was claimed again (NaN if never)."""
        return _recoveries(self.log)

    @cached_property
    def summary(self) -> pd.Series:
        return _summary(self)

    @cached_property
    def lost(self) -> pd.DataFrame:
        """The jobs lost at the horizon (see lost_jobs), one row each as in `jobs`."""
        return lost_jobs(self)

    def check(self) -> Report:
        """The invariant report of this run: sim.check(run) (see sim.invariants)."""
        return check(self)

    # ---- files ----------------------------------------------------------------------------------

    def save(
        self,
        directory: str | Path,
        format: str = "csv",
        *,
        report: Report | None = None,
        overwrite: bool = False,
    ) -> list[Path]:
        """Write the run into `directory` (created if missing; one that holds files only with
        `overwrite`): events, leases and jobs as `format` ("csv" or "parquet"), summary.json
        (metrics and the invariant report, `report` or check()), scenario.toml (reproduces the
        run) and timeline.png. Returns the files written."""
        from sim.plots.timeline import save_timeline

        if format not in ("csv", "parquet"):
            raise ConfigError(f"format: {format!r} is not one of csv, parquet")
        report = self.check() if report is None else report
        out = output_paths.directory(directory, overwrite)
        written = []
        for name in RUN_FILES:
            frame = getattr(self, name)
            path = out / f"{name}.{format}"
            if format == "parquet":
                _for_parquet(frame).to_parquet(path, index=False)
            else:
                frame.to_csv(path, index=False)
            written.append(path)
        summary = {
            "scenario": self.scenario.name,
            "seed": self.scenario.seed,
            "backend": self.backend,
            "queue": self.queue,
            "horizon": self.scenario.horizon,
            "wall_seconds": self.wall_seconds,
            "kept_schema": self.kept_schema,
            "kept_role": self.kept_role,
            "statement_errors": self.statement_errors,
            "rows": {name: len(getattr(self, name)) for name in RUN_FILES},
            "metrics": {k: json_number(k, v) for k, v in self.summary.items()},
            "invariants": {
                "ok": report.ok,
                "counts": report.counts(),
                "expected": list(report.expected),
                "unexpected": [v.__dict__ for v in report.unexpected[:100]],
            },
        }
        path = out / "summary.json"
        path.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
        written.append(path)
        path = out / "scenario.toml"
        path.write_text(dumps(self.scenario), encoding="utf-8")
        written.append(path)
        written.append(save_timeline(self, out / "timeline.png"))
        return written


_RELEASES = frozenset({"complete", "complete_rejected", "abandon", "crash", "shutdown", "drop"})
# ... and the records that carry the lease_until the owner last renewed (lease_held: at the horizon)
_LAST_RENEWAL = _RELEASES | {"lease_held"}
# a worker's crash, each prefetched job that went with it, and a graceful release that was lost:
# each job waits for the watcher
_CRASHES = ("crash", "drop", "release_lost")


def _leases(log, scenario: Scenario, skews: dict[str, float], clocks=None) -> pd.DataFrame:
    """The leases of a run. `until` is when the database lets the lease go, in true time: the
    stamp written, unless the database's clock steps (faults.db_clock_steps). An owner judges its
    lease by its own clock: a worker clock reads the stamp; on the database's clock the owner
    counts the TTL from its renewal, which a later step of the database's clock does not move."""
    rows = lease_rows(log, scenario.horizon, skews, clocks, db_clock(scenario))
    columns = [
        "job",
        "worker",
        "attempt",
        "start",
        "end",
        "end_reason",
        "until",
        "heartbeats",
        "released_at",
        "outcome",
        "lapsed",
        "revoked_at",
        "revoked_by",
    ]
    frame = pd.DataFrame(rows, columns=columns)
    frame["false_expiry"] = frame["lapsed"] & (frame["outcome"] != "crashed")
    return frame


def lease_rows(log, horizon: float, skews: dict[str, float], clocks=None, db=None) -> list[dict]:
    """One dict per lease, in claim order, with the columns of Run.leases (but false_expiry): the
    frame's rows, for a caller that reads a few small runs' leases many times (sim.hunt). `db`:
    the database's stepped clock (sim.model.clock.db_clock), or None."""
    open_by_job: dict[int, list[dict]] = {}
    held_by_worker: dict[str, dict[int, dict]] = {}  # worker -> job -> lease (prefetch: several)
    rows: list[dict] = []

    def release(lease, t, outcome):
        lease["released_at"] = t
        lease["outcome"] = outcome
        if lease["until"] < t and outcome != "crashed":
            lease["lapsed"] = True
        open_by_job[lease["job"]].remove(lease)
        held = held_by_worker.get(lease["worker"])
        if held is not None and held.get(lease["job"]) is lease:
            del held[lease["job"]]

    lease: dict | None
    for t, kind, worker, job, attempt, detail in log:
        if kind == "claim":
            for other in open_by_job.get(job, []):
                clock = clocks.get(other["worker"]) if clocks else None
                if clock is not None:
                    held = clock.at(t) < other["stamp"]
                else:
                    held = t + skews.get(other["worker"], 0.0) < other["own_until"]
                if held and other["revoked_at"] is None:
                    other["revoked_at"] = t
                    other["revoked_by"] = worker
            lease = {
                "job": job,
                "worker": worker,
                "attempt": attempt,
                "start": t,
                "until": detail,
                "stamp": detail,
                "own_until": detail,
                "heartbeats": 0,
                "lapsed": False,
                "released_at": np.nan,
                "outcome": "open",
                "revoked_at": None,
                "revoked_by": None,
            }
            if db is not None:
                _stamp(lease, detail, t, db)
            rows.append(lease)
            open_by_job.setdefault(job, []).append(lease)
            held_by_worker.setdefault(worker, {})[job] = lease
            continue
        held = held_by_worker.get(worker)
        if not held:
            continue
        lease = held.get(job) if job is not None else next(reversed(held.values()))
        if lease is None or (
            attempt is not None and lease["attempt"] != attempt
        ):  # a record of another lease: a handler past its deadline finishing an earlier attempt
            continue
        if kind in _LAST_RENEWAL and isinstance(detail, float) and detail != lease["stamp"]:
            # the owner's last renewal, when heartbeats are not recorded (record_heartbeats off:
            # under a stepped database clock its instant is unknown, taken as now)
            _renewed(lease, detail, t, db)
        if kind == "heartbeat":
            if lease["until"] < t:
                lease["lapsed"] = True
            _renewed(lease, detail, t, db)
            lease["heartbeats"] += 1
        elif kind == "complete":
            release(lease, t, "completed")
        elif kind == "payload_conflict":
            release(lease, t, "rejected_payload")
        elif kind == "complete_rejected":
            release(lease, t, "rejected")
        elif kind == "abandon":
            release(lease, t, "abandoned")
        elif kind == "crash" or kind == "drop":
            release(lease, t, "crashed")
        elif kind == "shutdown":
            release(lease, t, "shutdown")
        elif kind == "deadline":
            release(lease, t, "deadline")
        elif kind == "db_error" and detail not in ("claim", "heartbeat"):
            release(lease, t, "db_error")

    for lease in rows:
        _end(lease, horizon)
    return rows


def _renewed(lease: dict, stamp: float, written: float, db) -> None:
    """The lease now runs to `stamp`, written at `written`."""
    lease["until"] = lease["stamp"] = lease["own_until"] = stamp
    if db is not None:
        _stamp(lease, stamp, written, db)


def _end(lease: dict, horizon: float) -> None:
    """Set when and why a lease ended (`end`, `end_reason`) once the whole log is read: a crash,
    a revocation by another claim, an expiry, still open at the horizon, or its release."""
    released = lease["released_at"] if lease["outcome"] != "open" else horizon
    if lease["outcome"] == "open" and lease["until"] < horizon:
        lease["lapsed"] = True
    if lease["outcome"] == "crashed":
        end, reason = released, "crashed"
    elif lease["revoked_at"] is not None and lease["revoked_at"] < released:
        end, reason = lease["revoked_at"], "revoked"
    elif lease["lapsed"]:
        end, reason = min(lease["until"], released), "expired"
    elif lease["outcome"] == "open":
        end, reason = horizon, "open"
    else:
        end, reason = released, "completed" if lease["outcome"] == "completed" else "released"
    lease["end"], lease["end_reason"] = end, reason


def _stamp(lease: dict, stamp: float, written: float, db) -> None:
    """A lease stamped `stamp` at `written` under a stepped database clock: the true time the
    database lets it go, and the end of its owner's own count of the TTL."""
    lease["until"] = db.reaches(stamp, written)
    lease["own_until"] = stamp - db.offset_at(written)


def _recoveries(log) -> pd.DataFrame:
    crashes = []  # (t, worker, job)
    waiting: dict[int, list[dict]] = {}
    for t, kind, worker, job, _attempt, _detail in log:
        if kind in _CRASHES and job is not None:
            record = {
                "crash_at": t,
                "worker": worker,
                "job": job,
                "reclaimed_at": np.nan,
                "reclaimed_by": None,
            }
            crashes.append(record)
            waiting.setdefault(job, []).append(record)
        elif kind == "claim" and job in waiting:
            for record in waiting.pop(job):
                record["reclaimed_at"] = t
                record["reclaimed_by"] = worker
    frame = pd.DataFrame(
        crashes, columns=["crash_at", "worker", "job", "reclaimed_at", "reclaimed_by"]
    )
    frame["latency"] = frame["reclaimed_at"] - frame["crash_at"]
    return frame


def _new_charges(log: LogArrays) -> np.ndarray:
    """Positions of the PSP charges that charged (not the replays of an idempotency key)."""
    charges = log.rows("psp_charge")
    return charges[[log.detail[i] == "new" for i in charges.tolist()]] if len(charges) else charges


_FINAL_STATUS = {
    "claim": JobState.PROCESSING,
    "complete": JobState.COMPLETED,
    "payload_conflict": JobState.DEAD,
}


def _jobs(log: LogArrays, leases: pd.DataFrame) -> pd.DataFrame:
    """Per job, from the log's columns: enqueue, claims, effects, new PSP charges, first completion,
    the last status-changing record (its final status) and its owners in order of first claim."""
    enqueued = log.rows("enqueue")
    ids = log.job[enqueued]
    size = int(log.job.max()) + 1 if len(log.job) else 1

    def per_job(rows: np.ndarray) -> np.ndarray:
        return np.bincount(log.job[rows], minlength=size)[ids]

    completions = log.rows("complete")
    first_completion = np.full(size, np.inf)
    np.minimum.at(first_completion, log.job[completions], log.t[completions])
    completed_at = first_completion[ids]
    completed_at[np.isinf(completed_at)] = np.nan
    attempts = per_job(log.rows("claim"))
    status = np.where(attempts > 0, JobState.PROCESSING, JobState.PENDING).astype(object)
    changes = log.rows("claim", "complete", "payload_conflict", *STATUS_MOVES)
    changes = changes[[log.detail[i] is not None for i in changes.tolist()]][
        ::-1
    ]  # a move that found no row
    changed, latest = np.unique(log.job[changes], return_index=True)  # each job's last change
    final = {}
    for job, i in zip(changed.tolist(), changes[latest].tolist(), strict=True):
        kind = log.names[log.kind[i]]
        final[job] = log.detail[i] if kind in STATUS_MOVES else _FINAL_STATUS[kind]
    owners: dict[int, dict[str, None]] = {}
    for job, worker in zip(leases["job"].tolist(), leases["worker"].tolist(), strict=True):
        owners.setdefault(job, {})[worker] = None
    id_list = ids.tolist()
    enqueued_at = log.t[enqueued]
    return pd.DataFrame(
        {
            "job": ids,
            "event_id": np.array([log.detail[i] for i in enqueued.tolist()], dtype=object),
            "enqueued_at": enqueued_at,
            "attempts": attempts,
            "db_effects": per_job(log.rows("effect")),
            "external_effects": per_job(_new_charges(log)),
            "completed_at": completed_at,
            "status": pd.Series(
                [
                    final.get(job, default)
                    for job, default in zip(id_list, status.tolist(), strict=True)
                ],
                dtype=object,
            ),
            "latency": completed_at - enqueued_at,
            "owners": np.array([",".join(owners.get(job, ())) for job in id_list], dtype=object),
        }
    )


def lost_jobs(run: Run) -> pd.DataFrame:
    """Jobs unfinished at the horizon although a worker found nothing to claim well after they
    were due.

    A job is due when enqueued, or once its last lease has expired plus the recovery allowance,
    and not before the retry delay of its last requeue (or failure at a deadline) has run out: the
    delay the queue's own SQL wrote, where it was measured (Run.retry_delays; never due if it
    never is), else the policy's retry_backoff x attempts^4. An idle poll after that moment means
    the claimers could not see it: the job is lost, not merely queued.
    """
    jobs = run.jobs
    idle = run.log_arrays.t[run.log_arrays.rows("idle")]
    if len(idle) == 0:
        return jobs.iloc[0:0]
    last_until = (
        run.leases.groupby("job")["until"].last().reindex(jobs["job"]).to_numpy(dtype=float)
    )
    allowance = recovery_allowance(run.scenario)
    due = np.where(np.isnan(last_until), jobs["enqueued_at"] + 1.0, last_until + allowance)
    stalls = run.scenario.faults.db_stalls  # a stalled database recovers nothing meanwhile
    if stalls:
        since = np.where(np.isnan(last_until), jobs["enqueued_at"], last_until)
        allowed = np.where(np.isnan(last_until), 1.0, allowance)
        due = np.array(
            [recovery_deadline(stalls, *pair) for pair in zip(since, allowed, strict=True)]
        )
    backoff = run.scenario.policy.retry_backoff
    if backoff or run.retry_delays:
        # job -> when its last requeue for a retry makes it claimable again (+ a poll's slack)
        retried = {
            job: t + delay + 1.0
            for job, (t, delay) in retry_moves(run).items()
            if delay is not None and np.isfinite(delay)
        }
        due = np.maximum(due, [retried.get(job, -np.inf) for job in jobs["job"].tolist()])
    unfinished = ~jobs["status"].isin(TERMINAL).to_numpy()
    return jobs[unfinished & (due < float(idle.max()))]


def retry_moves(run) -> dict[int, tuple[float, float | None]]:
    """job -> (when its last move for a retry happened (a watcher's requeue, or its owner's
    failure at a deadline), the retry delay that move gave it: Run.retry_delays' measure of the
    queue's SQL, else retry_backoff x attempts^4; None: the job is never due again)."""
    events = run.events
    moves = events[
        events["kind"].isin(["requeue", "deadline"]) & (events["detail"] == JobState.PENDING)
    ]
    backoff = run.scenario.policy.retry_backoff
    out: dict[int, tuple[float, float | None]] = {}
    for t, kind, job, attempt in zip(
        moves["t"], moves["kind"], moves["job"], moves["attempt"], strict=True
    ):
        key = (kind, int(attempt))
        delay = run.retry_delays[key] if key in run.retry_delays else backoff * float(attempt) ** 4
        out[int(job)] = (float(t), delay)
    return out


def owner_crashes(run) -> pd.DataFrame:
    """Run.recoveries restricted to crashes of the job's current owner.

    A zombie (its lease already expired and the job taken, or even completed, by another worker)
    that crashes is in Run.recoveries too, but nothing is left to recover: it is left out here.
    """
    recoveries = run.recoveries
    events = run.events
    moves = events[events["kind"].isin(["claim", "complete", "payload_conflict"])]
    keep = []
    for crash in recoveries.itertuples():
        before = moves[(moves["job"] == crash.job) & (moves["t"] <= crash.crash_at)]
        last = before.iloc[-1] if len(before) else None
        keep.append(last is not None and last["kind"] == "claim" and last["worker"] == crash.worker)
    return recoveries[np.asarray(keep, dtype=bool)].reset_index(drop=True)


def _for_parquet(frame: pd.DataFrame) -> pd.DataFrame:
    """Object columns holding mixed types (the event `detail`) become strings for Arrow."""
    frame = frame.copy()
    for column in frame.select_dtypes(include="object").columns:
        values = frame[column].dropna()
        if values.map(type).nunique() > 1:
            frame[column] = frame[column].map(
                lambda v: (
                    None
                    if v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v))
                    else str(v)
                )
            )
    return frame


def json_number(key: str, value):
    """Counts as integers, rates and latencies as floats, NaN as null."""
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float):
        if not math.isfinite(value):
            return None
        if value.is_integer() and not any(part in key for part in ("_per_s", "latency")):
            return int(value)
    return value


def _percentiles(values: pd.Series, prefix: str) -> dict[str, float]:
    values = values.dropna()
    if values.empty:
        return {f"{prefix}_{name}": np.nan for name in ("mean", "p50", "p95", "p99")}
    q = np.percentile(values, [50, 95, 99])
    return {
        f"{prefix}_mean": float(values.mean()),
        f"{prefix}_p50": q[0],
        f"{prefix}_p95": q[1],
        f"{prefix}_p99": q[2],
    }


def _duplicates(keys) -> int:
    """How many of `keys` repeat an earlier one."""
    keys = list(keys)
    return len(keys) - len(set(keys))


def _summary(run: Run) -> pd.Series:
    scenario = run.scenario
    jobs, leases, log = run.jobs, run.leases, run.log_arrays
    horizon = scenario.horizon
    status = jobs["status"]
    completed = int((status == JobState.COMPLETED).sum())
    terminal = status.isin(TERMINAL)
    event_of_job = dict(zip(jobs["job"].tolist(), jobs["event_id"].tolist(), strict=True))
    recoveries = run.recoveries
    out = {
        "jobs": len(jobs),
        "completed": completed,
        "dead": int((status == JobState.DEAD).sum()),
        "lost_jobs": len(run.lost),
        "unfinished": int((~terminal).sum()),
        "throughput_per_s": completed / horizon,
        "leases": len(leases),
        "false_expiries": int(leases["false_expiry"].sum()),
        "double_claims": int((leases["end_reason"] == "revoked").sum()),
        "duplicate_db_effects": _duplicates(log.detail[i] for i in log.rows("effect").tolist()),
        "duplicate_external_effects": _duplicates(
            event_of_job[job] for job in log.job[_new_charges(log)].tolist()
        ),
        "psp_charges": len(log.rows("psp_charge")),
        "crashes": len(log.rows("crash")),
        "recoveries": int(recoveries["latency"].notna().sum()),
        "unrecovered_crashes": int(recoveries["latency"].isna().sum()),
    }
    out.update(_percentiles(jobs["latency"], "job_latency"))
    out.update(_percentiles(recoveries["latency"], "recovery_latency"))
    # with the mean and the count, lets runs be pooled into one interval
    # (sim.theory.stats.pooled_mean_ci)
    out["recovery_latency_sd"] = float(recoveries["latency"].std(ddof=1))
    out["statements_per_s"] = sum(run.statement_counts.values()) / horizon
    for kind, count in sorted(run.statement_counts.items()):
        out[f"db_{kind}_per_s"] = count / horizon
    return pd.Series(out, name=scenario.name, dtype=object)  # counts stay integers
