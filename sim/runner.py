"""sim.run(): one scenario, one seed, one backend -> a Run with its event log and final tables."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from sim.db.base import Backend, JobState
from sim.db.inspect import final_tables
from sim.db.memory import MemoryBackend
from sim.errors import ConfigError
from sim.model.world import build, run_to_horizon
from sim.results import Run
from sim.scenario.settings import Scenario, prepared

if TYPE_CHECKING:
    from sim.db.queue.directory import QueueDefinition


def make_backend(
    kind: str | Backend = "memory", *, dsn: str | None = None, keep_schema: bool = False, sql=None
) -> Backend:
    """A fresh backend: 'memory' (the simulated Postgres) or 'postgres' (embedded, or the DSN's
    server); `sql`, a queue directory (or QueueDefinition), runs the user's statements (postgres
    only)."""
    if not isinstance(kind, str) and callable(getattr(kind, "execute", None)):
        return kind  # a Backend object (duck-typed: test doubles and recorders need not subclass)
    if not isinstance(kind, str):
        raise ConfigError(
            f"backend: expected 'memory', 'postgres' or a Backend, got {type(kind).__name__} "
            f"{kind!r}"
        )
    if dsn is not None and not isinstance(dsn, str):
        raise ConfigError(f"dsn: expected a connection string, got {type(dsn).__name__}")
    if kind == "memory":
        if sql is not None:
            refuse_memory(sql)
        return MemoryBackend()
    if kind == "postgres":
        from sim.db.postgres import PostgresBackend

        queue = None
        if sql is not None:
            from sim.db.queue.directory import loaded

            queue = loaded(sql)
        return PostgresBackend(dsn, keep_schema=keep_schema, queue=queue)
    raise ConfigError(f"backend: {kind!r} is not one of memory, postgres")


def refuse_memory(sql) -> None:
    raise ConfigError(
        f"--sql {getattr(sql, 'path', sql)}: the simulated database (backend memory) only knows "
        "Lease Lab's own statements; a queue's own SQL runs on real PostgreSQL: use backend "
        "postgres"
    )


def with_queue(scenario: Scenario, sql) -> tuple[Scenario, QueueDefinition]:
    """(scenario with the queue's own settings (queue.toml), the queue marked settled) for a queue
    directory or QueueDefinition `sql`: callers apply their overrides after, and pass the settled
    queue down, so that nothing below applies the queue's settings over those overrides."""
    from sim.db.queue.directory import loaded

    return loaded(sql).settle(scenario)


def checked_queue(sql, dsn: str | None, scenarios, *, memory: bool = False):
    """(queue, dsn): the queue directory `sql` (or QueueDefinition) loaded, checked on the server at
    `dsn` (the embedded one when None) and required by every scenario in `scenarios`, before
    anything runs; refused when `memory` (a run asked for the memory backend)."""
    if memory:
        refuse_memory(sql)
    from sim.db.queue.directory import loaded
    from sim.db.server import connect_dsn

    queue, dsn = loaded(sql), connect_dsn(dsn)
    queue.check_on(dsn)  # nothing runs before the whole definition is valid on this server
    queue.require(*scenarios)  # every statement any of them lacks, in one error
    return queue, dsn


def run(
    scenario: Scenario | str,
    backend: str | Backend | None = None,
    *,
    seed: int | None = None,
    dsn: str | None = None,
    keep_schema: bool = False,
    progress: bool | None = None,
    sql=None,
    **overrides,
) -> Run:
    """Simulate `scenario` (a Scenario, preset name or TOML path) to its horizon.

    `overrides` are dotted keys, e.g. run("baseline", seed=3, **{"policy.lease_ttl": 20}).
    The backend defaults to the scenario's own setting. `sql`: a queue directory (queries.sql,
    optional schema.sql and queue.toml; see sim.db.queue.directory) whose statements replace Lease
    Lab's and whose settings replace the scenario's (overrides still win); it runs on the postgres
    backend (the default then), is checked on the server before anything runs, and is refused on the
    memory backend.
    """
    if sql is not None and (backend is None or isinstance(backend, str)):
        from sim.db.queue.directory import loaded

        sql = loaded(sql)
    scenario, sql = prepared(scenario, overrides, seed, queue=sql)
    for name, value in (("keep_schema", keep_schema), ("progress", progress)):
        if not (isinstance(value, bool) or (name == "progress" and value is None)):
            raise ConfigError(
                f"{name}: expected True or False, got {type(value).__name__} {value!r}"
            )
    given = not (backend is None or isinstance(backend, str))  # a Backend the caller made
    queue = getattr(backend, "queue", None) if given else None
    if sql is not None:
        if given:
            raise ConfigError(
                "sql: pass it to the backend you made (make_backend('postgres', sql=...)) instead"
            )
        queue, dsn = checked_queue(sql, dsn, [scenario], memory=backend == "memory")
        backend = "postgres"
    elif queue is not None:
        queue.require(scenario)
    db = make_backend(
        scenario.backend if backend is None else backend,
        dsn=dsn,
        keep_schema=keep_schema,
        sql=queue,
    )
    owned = backend is None or isinstance(backend, str)
    try:
        world = build(scenario, db)
        wall = run_to_horizon(world, progress)
        tables = final_tables(db)
    finally:
        if owned:
            db.close()
    if queue is not None:
        queue.check_jobs_table(tables["jobs"])
    clocks = {name: w.db.clock for w in world.workers for name in w.names}
    skews = {name: clock.offset if clock else 0.0 for name, clock in clocks.items()}
    kept = getattr(db, "schema", None) if getattr(db, "keep_schema", False) else None
    sandbox = getattr(db, "sandbox", None)
    kept_role = sandbox.role if kept and sandbox is not None else None
    done = Run(
        scenario,
        world.log,
        dict(world.statement_counts),
        tables,
        skews,
        wall,
        db.name,
        kept,
        queue=str(queue.path) if queue is not None else None,
        worker_clocks={name: clock for name, clock in clocks.items() if clock is not None},
        queue_settings=dict(queue.settings) if queue is not None else {},
        kept_role=kept_role,
        statement_errors=list(getattr(db, "statement_errors", [])),
    )
    if queue is not None and len(done.lost):
        done = judged_by_the_queue(done, queue, dsn or getattr(db, "dsn", None))
    return done


def judged_by_the_queue(run: Run, queue, dsn: str | None) -> Run:
    """`run`, its unfinished jobs judged by when the queue's own SQL makes them due again (a retry
    delay its statements compute, not policy.retry_backoff): the delay each last move gave,
    measured on the server (sim.db.queue.sql_findings.retry_delays), so that a job waiting out a
    long retry is not reported lost."""
    if dsn is None:
        return run
    from sim.db.queue.sql_findings import retry_delays

    waiting = set(run.lost["job"].tolist())
    events = run.events
    moves = events[
        events["kind"].isin(["requeue", "deadline"]) & (events["detail"] == JobState.PENDING)
    ]
    last = moves[moves["job"].isin(waiting)].groupby("job").tail(1)
    wanted = {
        (kind, int(attempt)) for kind, attempt in zip(last["kind"], last["attempt"], strict=True)
    }
    if not wanted:
        return run
    return dataclasses.replace(run, retry_delays=retry_delays(queue, run.scenario, dsn, wanted))
