"""Random scripts of statements and transaction control, played on both backends, must give the
same rows, errors, waits (with their holders) and final tables.

A waiter is resumed as soon as its holder's transaction ends: by commit, rollback, crash, or an
error inside it (PostgreSQL rolls back and releases the locks at the error). At most one client
waits at a time: when two statements wait on the same transaction through different lock paths,
PostgreSQL itself lets them race once it ends, so such scripts are cut at the second wait.
"""

from __future__ import annotations

import random

import pytest

from sim.db.base import Blocked
from sim.db.errors import DatabaseError
from sim.db.memory import MemoryBackend
from sim.db.postgres import PostgresBackend

pytestmark = pytest.mark.postgres

CLIENTS = ("A", "B", "C")
STEPS = 40
NOT_ENDING = ("ClientStateError", "TransactionAbortedError")  # errors that end no transaction


def random_params(rng: random.Random, query: str, now: float, clients=CLIENTS) -> dict:
    """Plausible parameters for `query`: few jobs, owners and events, so that clients collide."""
    job = rng.choice([1, 2, 3])
    owner = rng.choice(clients)
    lease = {"now": now, "lease_until": now + rng.choice([1.0, 5.0, 20.0])}
    fence = {"id": job, "owner": owner, "attempt": rng.choice([1, 2]), "now": now}
    expired = rng.random() < 0.5
    event = rng.choice(["e1", "e2"])
    cap = rng.choice([1, 2, 25])  # the attempts cap every claim path enforces
    backoff = rng.choice([0, 1, 500_000])  # microseconds x attempts^4
    return {
        "insert_job": {"id": job, "event_id": "e", "payload": "p", "now": now},
        "select_candidates": {
            "now": now,
            "take_expired": expired,
            "max_attempts": cap,
            "limit": rng.choice([1, 5]),
        },
        "claim_conditional": {"id": job, "owner": owner, "max_attempts": cap, **lease},
        "claim_unconditional": {"id": job, "owner": owner, "max_attempts": cap, **lease},
        "claim_skip_locked": {
            "owner": owner,
            "take_expired": expired,
            "max_attempts": cap,
            **lease,
        },
        "lock_next_candidate": {"now": now, "take_expired": expired, "max_attempts": cap},
        "lock_job_nowait": {"id": job},
        "heartbeat": {**fence, "lease_until": now + 5.0},
        "complete_fenced": fence,
        "complete_unfenced": {"id": job, "now": now},
        "reject_job_fenced": {**fence, "error": "x"},
        "requeue_expired": {
            "now": now,
            "max_attempts": 2,
            "limit": rng.choice([1, 5]),
            "retry_backoff": backoff,
        },
        "rescue_job": {"id": job, "now": now, "max_attempts": 2, "retry_backoff": backoff},
        "fail_job_fenced": {**fence, "max_attempts": 2, "retry_backoff": backoff},
        "release_job_fenced": {
            "id": job,
            "owner": owner,
            "attempt": fence["attempt"],
            "max_attempts": 2,
        },
        "select_stuck_jobs": {"now": now},
        "insert_dedup_marker": {"event_id": event, "payload_hash": "h", "now": now},
        "read_dedup_marker": {"event_id": event},
        "purge_dedup_markers": {"before": now - rng.choice([0.0, 3.0])},
        "insert_ledger_entry": {
            "job_id": job,
            "event_id": event,
            "amount_cents": 1,
            "worker": owner,
            "attempt": 1,
            "now": now,
        },
        "count_jobs_by_status": {},
    }[query]


QUERIES = (
    ["insert_job"] * 3
    + ["claim_conditional", "insert_dedup_marker"] * 2
    + [
        "select_candidates",
        "claim_unconditional",
        "claim_skip_locked",
        "lock_next_candidate",
        "lock_job_nowait",
        "heartbeat",
        "complete_fenced",
        "complete_unfenced",
        "reject_job_fenced",
        "requeue_expired",
        "select_stuck_jobs",
        "read_dedup_marker",
        "purge_dedup_markers",
        "insert_ledger_entry",
        "count_jobs_by_status",
        "rescue_job",
        "fail_job_fenced",
        "release_job_fenced",
    ]
)
CONTROL = (0.12, 0.2, 0.25, 0.27)  # cumulative chances of begin, commit, rollback, crash per step


def random_script(
    seed: int, *, clients=CLIENTS, steps=STEPS, queries=QUERIES, control=CONTROL
) -> list[tuple]:
    """A reproducible script: transaction control and statements of random clients."""
    rng = random.Random(seed)
    begin, commit, rollback, crash = control
    script = []
    for step in range(steps):
        client, roll = rng.choice(clients), rng.random()
        if roll < begin:
            script.append(("begin", client))
        elif roll < commit:
            script.append(("commit", client))
        elif roll < rollback:
            script.append(("rollback", client))
        elif roll < crash:
            script.append(("crash", client))
        else:
            query = rng.choice(queries)
            script.append((query, client, random_params(rng, query, float(step), clients)))
    return script


def attempt(call, *args):
    """The call's result, or the name of the DatabaseError it raised."""
    try:
        return call(*args)
    except DatabaseError as exc:
        return type(exc).__name__


def play(db, script: list[tuple], *, clients=CLIENTS, to_the_end: bool = False) -> tuple[list, int]:
    """The transcript of `script` on `db` (every step's outcome, then the final tables), and the
    most clients that waited at once. A bare PostgreSQL lets two waiters on one row race once their
    holder ends, so by default the script stops at its second simultaneous wait; with `to_the_end`
    (for a backend that resumes waiters in the order they began to wait) it runs on, and what is
    still open at the end is rolled back so that every waiter finishes."""
    for client in (*clients, "W"):
        db.connect(client)
    transcript, waiting, most = [], {}, 0  # waiting: waiter -> holder, in the order they began

    def ended(client: str) -> None:
        """`client`'s transaction ended: resume whoever waited for it."""
        for waiter in [w for w, holder in waiting.items() if holder == client]:
            if waiting.get(waiter) != client:
                continue  # resumed meanwhile (an earlier waiter's error ended its transaction...)
            del waiting[waiter]
            resumed = attempt(db.resume, waiter)
            transcript.append((("resume", waiter), resumed))
            settle(waiter, resumed)

    def settle(client: str, outcome) -> None:
        """Note a wait; an error inside a transaction ends it (its locks are gone)."""
        nonlocal most
        if isinstance(outcome, Blocked):
            waiting[client] = outcome.holder
            most = max(most, len(waiting))
        elif isinstance(outcome, str) and outcome not in NOT_ENDING and db.in_transaction(client):
            ended(client)

    for step in script:
        kind, client = step[0], step[1]
        if client in waiting:
            continue
        if kind in ("begin", "commit", "rollback", "crash"):
            outcome = attempt(getattr(db, kind), client)
        else:
            outcome = attempt(db.execute, client, kind, step[2])
        transcript.append((step, outcome))
        if not to_the_end and isinstance(outcome, Blocked) and waiting:
            break  # a second waiter: PostgreSQL may let the two race
        if kind == "crash":
            db.connect(client)
        if kind in ("commit", "rollback", "crash") and outcome is None:
            ended(client)
        else:
            settle(client, outcome)
    if to_the_end:
        for client in clients:
            if client not in waiting and db.in_transaction(client):
                transcript.append((("rollback", client), attempt(db.rollback, client)))
                ended(client)
    tables = ("dump_jobs", "dump_processed_events", "dump_ledger")
    transcript.append(("tables", [db.execute("W", name, {}) for name in tables]))
    return transcript, most


@pytest.mark.parametrize("seed", range(40))
def test_backends_agree_on_random_scripts(pg_dsn, seed):
    script = random_script(seed)
    memory, postgres = MemoryBackend(), PostgresBackend(pg_dsn)
    try:
        (expected, _), (got, _) = play(memory, script), play(postgres, script)
    finally:
        memory.close()
        postgres.close()
    for (step, on_memory), (_, on_postgres) in zip(expected, got, strict=False):
        assert on_memory == on_postgres, f"seed {seed}, at {step}"
    assert len(expected) == len(got)
