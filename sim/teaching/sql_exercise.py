"""Notebook 08's exercise: the reader writes the SQL that finds stuck jobs. The statement runs
read-only, in a transaction that is rolled back, on the tables the reader sees and then on a second
state of them it cannot see, so that neither a write nor a list of ids typed by hand passes."""

from __future__ import annotations

import numpy as np
import pandas as pd

from sim.db.inspect import sql_frame
from sim.errors import ConfigError
from sim.teaching.by_hand import Script
from sim.teaching.exercises import Verdict, _unanswered
from sim.wording import count

_FIXTURE_STATES = ("stuck", "stuck", "pending", "completed", "alive", "pending")


def stuck_jobs_fixture(
    db, *, jobs: int = 6, now: float = 100.0, first_id: int = 1, shuffle: int | None = None
) -> dict:
    """Fill a backend's tables with jobs in every state, some of them stuck (Processing, lease
    expired at `now`) and one Processing with a lease still valid at `now` (claimed `ttl` / 3
    before it), so that a query that forgets the lease condition, or reads the server's own
    now() instead of the bound clock, returns a wrong set. Ids run from `first_id`; `shuffle`
    (a seed) deals the states to the ids in another order, for a second table state a reader
    cannot guess. Returns {"now": now, "stuck": [ids], "alive": [ids]} for check_stuck_query()."""
    if jobs < 5:
        raise ConfigError(f"stuck_jobs_fixture: need at least 5 jobs for every state, got {jobs}")
    ttl = 30.0
    states = list(_FIXTURE_STATES) + ["stuck" if k % 2 else "pending" for k in range(jobs - 6)]
    states = states[:jobs]
    if shuffle is not None:
        states = [states[k] for k in np.random.default_rng(shuffle).permutation(jobs)]
    ids = list(range(first_id, first_id + jobs))
    script = Script(db)
    script.connect("setup")
    for i in ids:
        script.at(0.0).sql("setup", "insert_job", id=i, event_id=f"evt-{i}", payload="{}")
    claims = []  # (claimed at, id, state): claimed in time order
    for position, (i, state) in enumerate(zip(ids, states, strict=True), start=1):
        if state == "alive":  # its owner is still working: claimed shortly before `now`
            claims.append((now - ttl / 3, i, state))
        elif state != "pending":
            claims.append((min(10.0 * position, now - ttl - 1.0), i, state))
    for at, i, state in sorted(claims):
        script.at(at).sql("setup", "claim_conditional", id=i, owner=f"w{i % 2}", ttl=ttl)
        if state == "completed":
            script.sql("setup", "complete_fenced", id=i, owner=f"w{i % 2}", attempt=1)
    stuck = [row[0] for row in script.at(now).sql("setup", "select_stuck_jobs")]
    alive = [i for i, state in zip(ids, states, strict=True) if state == "alive"]
    return {"now": now, "stuck": sorted(stuck), "alive": alive}


def _hidden_state(db) -> dict:
    """The second table state check_stuck_query judges an answer on: other ids, another clock,
    the states dealt in another order. Not shown to the reader, so an answer cannot be fitted to
    it."""
    return stuck_jobs_fixture(db, jobs=9, now=260.0, first_id=41, shuffle=26)


def _stuck_ids(db, answer: str, fixture: dict) -> list[int]:
    """The ids the reader's statement returns on `db` at the fixture's clock, run read-only."""
    from sim.db.base import to_timestamp

    params = {"now": to_timestamp(fixture["now"])} if "%(now)s" in answer else None
    frame = sql_frame(db, answer, params, read_only=True)
    if not len(frame):
        return []
    first = frame.iloc[:, 0]
    if not pd.api.types.is_integer_dtype(first):
        raise _NotIds(
            f"The first column must be the job id; yours ({frame.columns[0]}) holds "
            f"{first.iloc[0]!r}."
        )
    return sorted(int(v) for v in first)


class _NotIds(ValueError):
    """The reader's statement ran, but its first column is not the job ids."""


def _reader_error(exc: Exception) -> str:
    """PostgreSQL's refusal of a reader's statement, in a sentence."""
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    state = getattr(exc, "sqlstate", None)
    if state == "25006":  # read_only_sql_transaction
        return (
            f"Your statement tries to change the tables (PostgreSQL: {first}). The checker runs "
            "answers read-only and rolls them back, so nothing changed. Finding stuck jobs is a "
            "question, not an action: write a SELECT."
        )
    if isinstance(exc, _NotIds):
        return str(exc)
    if "multiple commands" in first:
        return "Give one statement, a single SELECT (no `;` between statements)."
    if state == "57014":  # query_canceled: the statement timeout
        return f"Your statement ran too long and was cancelled (PostgreSQL: {first})."
    return f"PostgreSQL said: {first}"


def check_stuck_query(answer: str | None, db, fixture: dict) -> Verdict:
    """08: the reader's SQL for "stuck jobs" (bind %(now)s) must return the stuck ids first column.

    The statement runs read-only, in a transaction that is rolled back (a write is refused with a
    sentence and changes nothing), first on the tables the reader sees, then on a second table
    state it cannot see (other ids, another clock): an answer that lists ids or times by hand
    fails there."""
    if answer is None or not str(answer).strip():
        return _unanswered(
            "status = 'Processing' AND lease_until < %(now)s; the clock is a bound parameter."
        )
    answer = str(answer)
    try:
        got = _stuck_ids(db, answer, fixture)
    except Exception as exc:  # the reader's SQL: any server error is the feedback
        return Verdict(False, _reader_error(exc))
    if not got and fixture["stuck"]:
        return Verdict(False, "Your query returned no rows, but some jobs are stuck.")
    if got != sorted(fixture["stuck"]):
        alive = sorted(set(got) & set(fixture.get("alive", [])))
        if alive:
            return Verdict(
                False,
                f"Your query returned ids {got}, including {alive}: Processing, but with a lease "
                f"still valid at the clock's {fixture['now']:g} s, so its owner may still be "
                "working. Compare lease_until with the bound %(now)s, not with the server's now().",
            )
        return Verdict(
            False,
            f"Your query returned ids {got}; the stuck ones are Processing jobs whose lease_until "
            "is before now.",
        )
    hidden_ok, hidden_says = _on_hidden_state(db, answer)
    if not hidden_ok:
        return Verdict(False, hidden_says)
    return Verdict(
        True,
        f"Jobs {got}: Processing with an expired lease, and the right jobs again on a second "
        "table state you did not see. This is what the watcher looks for; an index on "
        "lease_until keeps it cheap.",
    )


def _on_hidden_state(db, answer: str) -> tuple[bool, str]:
    """Run the reader's statement on _hidden_state, in a schema of its own on the same server."""
    from sim import runner

    hidden = runner.make_backend("postgres", dsn=db.dsn)
    try:
        fixture = _hidden_state(hidden)
        try:
            got = _stuck_ids(hidden, answer, fixture)
        except Exception as exc:  # the reader's SQL: any server error is the feedback
            return False, "On a second table state: " + _reader_error(exc)
    finally:
        hidden.close()
    if got == fixture["stuck"]:
        return True, ""
    return False, (
        "Right on these tables, but not on a second state of them that the checker keeps hidden "
        f"(other ids, the clock at {fixture['now']:g} s): your statement returned "
        f"{count(len(got), 'id')} there where "
        f"{count(len(fixture['stuck']), 'job was', 'jobs were')} stuck. Does it list ids or times "
        "by hand? Let the WHERE clause find them."
    )
