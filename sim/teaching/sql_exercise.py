"""Notebook 08's exercise: the reader writes the SQL that finds stuck jobs.

The statement runs as a role of its own (the sandbox the `--sql` runs use, sim.db.queue.sandbox: no
superuser, no membership of pg_read_server_files or pg_execute_server_program, allowed only to
read the exercise's tables), read-only, in a transaction that is rolled back, after which its
advisory locks are released and the role is dropped. It is judged on the tables the reader sees,
then on a second state of them drawn at random for each check (other ids, another clock, other
counts of each state), so that neither a write, nor a list of ids typed by hand, nor a statement
that recognises the visible tables passes.
"""

from __future__ import annotations

import secrets

import numpy as np
import psycopg

from sim.errors import ConfigError
from sim.support.in_words import count
from sim.teaching.answers import Verdict, unanswered
from sim.teaching.by_hand import Script

TTL = 30.0  # the exercise's lease TTL
READER_TIMEOUT_MS = 10_000  # a reader's statement may take this long
# The visible state, one job per entry (ids 1, 2, ...): every kind of row a wrong WHERE clause
# could return. requeued: Pending again after the watcher found its lease expired; dead: given up
# by the watcher at max_attempts; both keep their old lease_until.
VISIBLE = ("stuck", "stuck", "requeued", "pending", "completed", "alive", "dead", "pending")
STATES = ("stuck", "alive", "requeued", "dead", "completed", "pending")


def stuck_jobs_fixture(
    db, *, now: float = 100.0, states=VISIBLE, ids=None, since: float = 0.0
) -> dict:
    """Fill a backend's tables with one job per entry of `states` (see STATES), ids 1, 2, ... or
    `ids`, their times counted from `since`, the clock at `now` (at least since + 100):

    - stuck: Processing, lease expired at `now` (what the watcher looks for);
    - alive: Processing, claimed TTL / 3 before `now`: a query that forgets the lease, or reads
      the server's own now() instead of the bound clock, returns it;
    - requeued and dead: moved by the watcher to Pending or Dead, their old lease_until kept: a
      query that tests lease_until without status = 'Processing' returns them;
    - completed, pending: finished, and never claimed.

    Returns {"now": now, state: [ids], ...} for check_stuck_query()."""
    ids = list(range(1, len(states) + 1)) if ids is None else [int(i) for i in ids]
    unknown = sorted(set(states) - set(STATES))
    if unknown or len(ids) != len(states) or now < since + 100.0:
        raise ConfigError(
            f"stuck_jobs_fixture: states among {', '.join(STATES)} (got {', '.join(unknown)}), "
            f"one id each, now >= since + 100 s (got {len(ids)} ids for {len(states)} states, "
            f"now {now:g}, since {since:g})"
        )
    by_state = {s: [i for i, st in zip(ids, states, strict=True) if st == s] for s in STATES}
    script = Script(db)
    script.connect("setup")
    for i in ids:
        script.at(since).sql("setup", "insert_job", id=i, event_id=f"evt-{i}", payload="{}")

    def claim(at: float, job: int) -> None:
        script.at(at).sql("setup", "claim_conditional", id=job, owner=f"w{job % 2}", ttl=TTL)

    for k, i in enumerate(by_state["completed"]):
        claim(since + 1.0 + k / 100, i)
        script.sql("setup", "complete_fenced", id=i, owner=f"w{i % 2}", attempt=1)
    for k, i in enumerate(by_state["requeued"]):  # expired at since + 31, requeued at + 32
        claim(since + 1.5 + k / 100, i)
    script.at(since + TTL + 2).sql("setup", "requeue_expired", limit=len(ids))
    for k, i in enumerate(by_state["dead"]):  # expired at since + 63, given up at + 64
        claim(since + TTL + 3 + k / 100, i)
    script.at(since + 2 * TTL + 4).sql("setup", "requeue_expired", max_attempts=1, limit=len(ids))
    for k, i in enumerate(by_state["stuck"]):  # expired before now, after the watcher's last tick
        claim(since + 2 * TTL + 5 + k * (now - since - 3 * TTL - 6) / len(by_state["stuck"]), i)
    for i in by_state["alive"]:
        claim(now - TTL / 3, i)
    stuck = [row[0] for row in script.at(now).sql("setup", "select_stuck_jobs")]
    return {"now": now, **by_state, "stuck": sorted(stuck)}


def hidden_state(db, rng: np.random.Generator) -> dict:
    """The second table state an answer is judged on, drawn from `rng` (a fresh one for every
    check): random ids, a clock hours later, one to three jobs of each state in a random order."""
    most = {"stuck": 3}  # jobs of each state: one to this many (two for the others)
    states = [s for s in STATES for _ in range(int(rng.integers(1, most.get(s, 2) + 1)))]
    states = [states[k] for k in rng.permutation(len(states))]
    ids = np.sort(rng.choice(np.arange(20, 100_000), size=len(states), replace=False))
    since = float(np.round(rng.uniform(100.0, 20_000.0), 3))
    now = float(np.round(since + rng.uniform(110.0, 600.0), 3))
    return stuck_jobs_fixture(db, now=now, states=states, ids=ids.tolist(), since=since)


# ---- running the reader's statement ----------------------------------------------------------


def run_sandboxed(db, statement: str, params: dict | None) -> tuple[list[str], list[tuple]]:
    """Run one statement typed by a reader on a PostgresBackend's schema as a fresh sandbox role
    that may only read that schema's tables (sim.db.queue.sandbox.run_as_sandbox, as `--sql`
    runs do): READ ONLY, rolled back, then the role dropped. (column names, rows)."""
    from sim.db.queue.sandbox import run_as_sandbox

    return run_as_sandbox(
        db.dsn, statement, params, max_rows=None, reads=db.schema, timeout_ms=READER_TIMEOUT_MS
    )


class _NotIds(ValueError):
    """The reader's statement ran, but its first column is not the job ids."""


def _stuck_ids(db, answer: str, fixture: dict) -> list[int]:
    """The ids the reader's statement returns on `db` at the fixture's clock."""
    from sim.db.base import to_timestamp

    params = {"now": to_timestamp(fixture["now"])} if "%(now)s" in answer else None
    columns, rows = run_sandboxed(db, answer, params)
    if rows and not columns:
        raise _NotIds("Your statement returns rows without a column; the first must be the job id.")
    first = [row[0] for row in rows]
    wrong = [v for v in first if isinstance(v, bool) or not isinstance(v, int)]
    if wrong:
        raise _NotIds(
            f"The first column must be the job id; yours ({columns[0]}) holds {wrong[0]!r}."
        )
    return sorted(first)


def _reader_error(exc: Exception) -> str:
    """Why a reader's statement did not run, in a sentence: PostgreSQL's refusal, or psycopg's."""
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    state = getattr(exc, "sqlstate", None)
    if isinstance(exc, _NotIds):
        return str(exc)
    if isinstance(exc, psycopg.ProgrammingError) and state is None and "placeholder" in first:
        return (
            "psycopg, the Python driver, read a % in your statement as the start of a parameter "
            f"({first}): in a statement that binds %(now)s, write a literal % as %% (LIKE "
            "'Proc%%'). PostgreSQL never saw the statement."
        )
    if isinstance(exc, psycopg.ProgrammingError) and state is None:
        return f"psycopg, the Python driver, refused it before PostgreSQL saw it: {first}"
    if isinstance(exc, ConfigError):
        return f"The checker could not run your statement (this is not about your SQL): {first}"
    if state == "25006":  # read_only_sql_transaction
        return (
            f"Your statement tries to change the tables (PostgreSQL: {first}). The checker runs "
            "answers read-only and rolls them back, so nothing changed. Finding stuck jobs is a "
            "question, not an action: write a SELECT."
        )
    if state == "42501":  # insufficient_privilege
        return (
            f"PostgreSQL refused it ({first}): the checker runs your statement as a role that may "
            "only read the exercise's tables, and finding stuck jobs needs nothing else."
        )
    if "multiple commands" in first:
        return "Give one statement, a single SELECT (no `;` between statements)."
    if state == "57014":  # query_canceled: the statement timeout
        return f"Your statement ran too long and was cancelled (PostgreSQL: {first})."
    return f"PostgreSQL said: {first}"


# ---- the verdict ---------------------------------------------------------------------------------


def _wrong_rows(got: list[int], fixture: dict) -> str:
    """What is wrong with the ids an answer returned on the visible state, by kind of row."""
    extra, missed = set(got) - set(fixture["stuck"]), sorted(set(fixture["stuck"]) - set(got))
    why = {
        "alive": "Processing, but with a lease still valid at the clock's "
        f"{fixture['now']:g} s, so its owner may still be working: compare lease_until with the "
        "bound %(now)s, not with the server's now()",
        "requeued": "Pending again: the watcher requeued it and left its old lease_until",
        "dead": "Dead: the watcher gave it up and left its old lease_until",
        "completed": "Completed: finished, whatever its lease_until says",
        "pending": "Pending and never claimed",
    }
    parts = [
        f"{', '.join(map(str, ids))} {'is' if len(ids) == 1 else 'are'} {why[state]}"
        for state in why
        if (ids := sorted(extra & set(fixture.get(state, []))))
    ]
    if missed:
        parts.append(f"{', '.join(map(str, missed))} {'is' if len(missed) == 1 else 'are'} stuck")
    return (
        f"Your query returned ids {got}: "
        + "; ".join(parts)
        + ". A stuck job is Processing, with a lease_until before the bound clock."
    )


def check_stuck_query(answer: str | None, db, fixture: dict, *, seed: int | None = None) -> Verdict:
    """08: the reader's SQL for "stuck jobs" (bind %(now)s) must return the stuck ids first column.

    It runs as a sandbox role, read-only, rolled back (run_sandboxed): first on the tables the
    reader sees, then on a second state drawn at random for this check (hidden_state; `seed`
    fixes it, for tests), in a schema of its own on the same server."""
    if answer is None or not str(answer).strip():
        return unanswered(
            "status = 'Processing' AND lease_until < %(now)s; the clock is a bound parameter."
        )
    answer = str(answer)
    try:
        got = _stuck_ids(db, answer, fixture)
    except Exception as exc:  # the reader's SQL: any server error is the feedback
        return Verdict(False, _reader_error(exc))
    if not got and fixture["stuck"]:
        return Verdict(
            False,
            "Your query returned no rows, but some jobs are stuck. (Statuses are compared as "
            "written: 'Processing', with a capital P.)",
        )
    if got != sorted(fixture["stuck"]):
        return Verdict(False, _wrong_rows(got, fixture))
    hidden_ok, hidden_says = _on_hidden_state(db, answer, seed)
    if not hidden_ok:
        return Verdict(False, hidden_says)
    return Verdict(
        True,
        f"Jobs {got}: Processing with an expired lease, and the right jobs again on a second "
        "table state drawn at random for this check. This is what the watcher looks for; an "
        "index on lease_until keeps it cheap.",
    )


def _on_hidden_state(db, answer: str, seed: int | None) -> tuple[bool, str]:
    """Run the reader's statement on a hidden_state, in a schema of its own on the same server."""
    from sim import runner

    rng = np.random.default_rng(secrets.randbits(64) if seed is None else seed)
    hidden = runner.make_backend("postgres", dsn=db.dsn)
    try:
        fixture = hidden_state(hidden, rng)
        try:
            got = _stuck_ids(hidden, answer, fixture)
        except Exception as exc:  # the reader's SQL: any server error is the feedback
            return False, "On a second table state: " + _reader_error(exc)
    finally:
        hidden.close()
    if got == fixture["stuck"]:
        return True, ""
    return False, (
        "Right on these tables, but not on a second state of them that the checker draws at "
        f"random and keeps hidden (other ids, the clock at {fixture['now']:g} s): your statement "
        f"returned {count(len(got), 'id')} there where "
        f"{count(len(fixture['stuck']), 'job was', 'jobs were')} stuck. Does it list ids or times "
        "by hand? Let the WHERE clause find them."
    )
