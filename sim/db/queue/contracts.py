"""The contract of each named statement the model calls: what it binds, what it reads back, and
what "no row" means. A user's queue definition (sim.db.queue.directory) is checked against these.

The parameters are those of the project's statement of the same name in sql/queries.sql: the
model binds all of them, and a statement may use any of them. The returned columns are what the
model reads from the rows, by position.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from sim.db.base import JobState
from sim.db.queries import load_queries
from sim.protocol.statements import EVERY_RUN, statement_settings

if TYPE_CHECKING:
    from sim.scenario.settings import Scenario

# column kind -> PostgreSQL type OIDs accepted for it
# (int2/int4/int8; text/varchar/bpchar/name; ...)
COLUMN_OIDS: dict[str, frozenset[int]] = {
    "int": frozenset({20, 21, 23}),
    "text": frozenset({25, 1043, 1042, 19}),
    "time": frozenset({1184, 1114}),  # timestamptz, or timestamp (UTC: a run sets TimeZone)
    "bool": frozenset({16}),
}
ID_OIDS = (
    COLUMN_OIDS["int"] | COLUMN_OIDS["text"] | {2950}
)  # a queue's job ids: integer, text, uuid
SQL_TYPE = {"int": "bigint", "text": "text", "time": "timestamptz", "bool": "boolean"}
JOB_COLUMNS = (
    ("id", "int"),
    ("event_id", "text"),
    ("payload", "text"),
    ("status", "text"),
    ("lease_owner", "text"),
    ("lease_until", "time"),
    ("attempts", "int"),
    ("heartbeat_at", "time"),
    ("created_at", "time"),
    ("completed_at", "time"),
    ("last_error", "text"),
)
CLAIMED = (("id", "int"), ("attempts", "int"))
STATUSES = tuple(JobState)  # the job states dump_jobs reports


@dataclass(frozen=True)
class Contract:
    """When the model calls a statement, what it reads back and what no row back means."""

    called: str  # when the model calls it
    returns: tuple[tuple[str, str], ...]  # (column, kind) read by position
    exact: bool  # exactly these columns (True), or at least these first (False)
    no_row: str  # what the model does when no row comes back
    required: tuple[str, ...] = ()  # parameters the statement must use
    optional: bool = True  # may a queue leave it out (an empty block)?
    reads: str = ""  # what it returns, in words, when that is not a fixed list of columns

    def returns_text(self) -> str:
        cols = ", ".join(f"{c} {SQL_TYPE[k]}" for c, k in self.returns)
        if self.reads:
            return self.reads
        if not self.returns:
            return "nothing it reads (rows are ignored)"
        return f"exactly ({cols})" if self.exact else f"at least ({cols}) first"


CONTRACTS: dict[str, Contract] = {
    "insert_job": Contract(
        "the producer enqueues a job (Pending, attempts 0) with the model's id",
        (),
        False,
        "the job's id is the model's number (it must use %(id)s)",
        optional=False,
        reads="nothing, or the id the queue gave the job (uuid, text, its own serial): "
        "%(id)s is bound as that id in every other statement",
    ),
    "select_candidates": Contract(
        "the read of a claim (claim = read_then_write or conditional_update): claimable "
        "jobs, oldest first",
        (("id", "int"),),
        False,
        "nothing to claim: the worker sleeps poll_interval",
    ),
    "claim_conditional": Contract(
        "claim one candidate (claim = conditional_update)",
        CLAIMED,
        True,
        "someone else has the job: try the next candidate",
        ("id",),
    ),
    "claim_unconditional": Contract(
        "the write of read_then_write, or of select_for_update after the lock",
        CLAIMED,
        True,
        "the claim did not happen: try the next candidate",
        ("id",),
    ),
    "claim_skip_locked": Contract(
        "claim the next job in one statement (claim = skip_locked)",
        CLAIMED,
        True,
        "nothing to claim: the worker sleeps poll_interval",
    ),
    "claim_batch": Contract(
        "claim up to policy.prefetch jobs in one statement (prefetch > 1, claim = skip_locked)",
        CLAIMED,
        True,
        "nothing to claim: the worker sleeps poll_interval",
    ),
    "lock_next_candidate": Contract(
        "claim = select_for_update, in a transaction: lock the next claimable job",
        (("id", "int"),),
        False,
        "nothing to claim: commit, sleep poll_interval",
    ),
    "lock_job_nowait": Contract(
        "diagnostics and tests only: lock one job or fail at once (55P03)",
        (("id", "int"),),
        False,
        "no such job",
        ("id",),
    ),
    "heartbeat": Contract(
        "renew the lease every heartbeat_interval (policy.heartbeat)",
        (("id", "int"), ("lease_until", "time")),
        True,
        "the lease is lost: the worker abandons the job, or carries on as a zombie "
        "(abandon_on_lost_lease = false)",
        ("id",),
    ),
    "complete_fenced": Contract(
        "complete the job in the transaction of its ledger row, or after it commits "
        "(policy.completion = background) (policy.fencing = true)",
        (("id", "int"),),
        False,
        "refused: the transaction (ledger row, marker) rolls back; in the background, nothing "
        "is undone",
        ("id",),
    ),
    "complete_unfenced": Contract(
        "complete the job in the transaction of its ledger row, or after it commits "
        "(policy.completion = background) (policy.fencing = false)",
        (("id", "int"),),
        False,
        "refused: the transaction rolls back; in the background, nothing is undone",
        ("id",),
    ),
    "reject_job_fenced": Contract(
        "mark the job Dead with a reason: same event id, other payload (policy.dedup)",
        (("id", "int"),),
        False,
        "refused: the transaction rolls back",
        ("id",),
    ),
    "requeue_expired": Contract(
        "the watcher's tick every watcher_interval (policy.watcher): make expired jobs "
        "claimable; status in Lease Lab's words, Pending or Dead",
        (("id", "int"), ("status", "text"), ("lease_owner", "text"), ("attempts", "int")),
        True,
        "nothing had expired",
    ),
    "reclaim_stalled": Contract(
        "the watcher's tick with policy.stall_check = two_phase: reclaim the jobs the previous "
        "tick marked whose lease is still expired, then mark every Processing job; status in "
        "Lease Lab's words, Pending or Dead",
        (("id", "int"), ("status", "text"), ("lease_owner", "text"), ("attempts", "int")),
        True,
        "nothing had stalled",
    ),
    "register_process": Contract(
        "process liveness (policy.process_heartbeat_interval > 0): a worker process starts, or "
        "finds its row pruned; a reused name takes the old row over",
        (("name", "text"),),
        False,
        "rows are ignored",
    ),
    "process_heartbeat": Contract(
        "process liveness: the process renews its row every process_heartbeat_interval",
        (("name", "text"),),
        False,
        "the row was pruned: the process registers again",
    ),
    "prune_processes": Contract(
        "process liveness, at the watcher's tick: delete the processes silent for "
        "process_stale_after, move the Processing jobs of owners without a live process row; "
        "status in Lease Lab's words, Pending or Dead",
        (("id", "int"), ("status", "text"), ("lease_owner", "text"), ("attempts", "int")),
        True,
        "no process had died",
    ),
    "select_stuck_jobs": Contract(
        "the read of a read-then-write watcher (policy.watcher_gap > 0), and diagnostics: "
        "jobs whose lease has expired",
        (("id", "int"),),
        False,
        "none",
    ),
    "rescue_job": Contract(
        "the write of a read-then-write watcher (policy.watcher_gap > 0), watcher_gap after the "
        "read: requeue one job by id; status in Lease Lab's words, Pending or Dead",
        (("id", "int"), ("status", "text"), ("lease_owner", "text"), ("attempts", "int")),
        True,
        "the job was not requeued",
        ("id",),
    ),
    "fail_job_fenced": Contract(
        "a worker-side deadline (policy.deadline > 0): the owner fails its job for a retry "
        "while its handler may still run",
        (("id", "int"), ("status", "text")),
        False,
        "refused: the worker no longer held the job",
        ("id",),
    ),
    "release_job_fenced": Contract(
        "graceful shutdown (faults.shutdown = graceful): the owner gives its job back",
        (("id", "int"), ("status", "text")),
        False,
        "refused: the worker no longer held the job",
        ("id",),
    ),
    "count_jobs_by_status": Contract(
        "diagnostics: jobs per status", (("status", "text"), ("count", "int")), True, "no jobs"
    ),
    "dump_jobs": Contract(
        "once after the run: every job in Lease Lab's words (status Pending, Processing, "
        "Completed or Dead; lease_owner = the last claimer; attempts = leases so far)",
        JOB_COLUMNS,
        True,
        "no jobs",
        optional=False,
    ),
}
BOOKKEEPING_TABLES = ("ledger", "processed_events")  # Lease Lab's tables beside a queue's own
# Lease Lab's own bookkeeping (dedup markers, ledger): a queue definition cannot override these.
BOOKKEEPING = frozenset(
    {
        "insert_dedup_marker",
        "read_dedup_marker",
        "purge_dedup_markers",
        "insert_ledger_entry",
        "dump_processed_events",
        "dump_ledger",
    }
)


def bound_params(name: str) -> tuple[tuple[str, str], ...]:
    """(parameter, type) the model binds to statement `name`: those of the project's statement."""
    return load_queries()[name].params


def statements_called(scenario: Scenario) -> dict[str, str]:
    """The job-table statements a run of `scenario` calls, each with the setting that calls it:
    the producer's and the dump's, then what the protocol's steps may send (sim.protocol)."""
    called = {"insert_job": EVERY_RUN, "dump_jobs": EVERY_RUN}
    for name, why in statement_settings(scenario).items():
        if name in CONTRACTS:
            called[name] = why
    return called


def contracts_markdown() -> str:
    """The contracts as a Markdown table (README and notebook 09)."""
    lines = ["| statement | called | binds | returns | no row means |", "|---|---|---|---|---|"]
    for name, c in CONTRACTS.items():
        binds = ", ".join(f"{p} {t}" for p, t in bound_params(name)) or "nothing"
        lines.append(f"| `{name}` | {c.called} | {binds} | {c.returns_text()} | {c.no_row} |")
    return "\n".join(lines)
