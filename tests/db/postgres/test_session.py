"""DbSession on both backends: a statement failing inside a transaction releases its locks at
once (PostgreSQL aborts the transaction at the error), so whoever waited goes on right then, not
at the ROLLBACK that comes later."""

from __future__ import annotations

from sim.db.errors import UniqueViolationError
from sim.model.session import DbSession
from sim.model.world import World

from .scripted import scripted


def test_an_error_inside_a_transaction_wakes_its_waiters_at_once(backend):
    world = World(scripted(workers=1), backend)
    env, seen = world.env, {}
    a = DbSession(world, "A", lambda: 0.001)
    b = DbSession(world, "B", lambda: 0.001)
    job = {"id": 1, "event_id": "e1", "payload": "{}"}

    def holder():
        yield from a.execute("insert_job", dict(job))
        a.begin()
        yield from a.execute(
            "claim_conditional", {"id": 1, "owner": "A", "max_attempts": 25}, ttl=30.0
        )
        yield env.timeout(1.0)
        try:
            yield from a.execute(
                "insert_job", dict(job)
            )  # the same id again: 23505, A's block aborts
        except UniqueViolationError:
            seen["error_at"] = env.now
        yield env.timeout(5.0)
        yield from a.rollback()

    def waiter():
        yield env.timeout(0.5)
        seen["rows"] = yield from b.execute(
            "claim_conditional", {"id": 1, "owner": "B", "max_attempts": 25}, ttl=30.0
        )
        seen["claimed_at"] = env.now

    env.process(holder())
    env.process(waiter())
    env.run(until=10.0)
    assert seen["error_at"] == seen["claimed_at"] == 1.003
    assert seen["rows"] == [(1, 1)]  # A's claim was rolled back at the error: B takes attempt 1
    waits = [e for e in world.log if e.kind == "lock_wait"]
    assert [(round(e.t, 6), e.worker, e.detail) for e in waits] == [(1.003, "B", "A:0.502000")]


def test_database_errors_survive_simpy_rebuilding_them():
    """SimPy re-raises a process's error as type(e)(*e.args): every database error must rebuild
    into the same error with the same message (a ClientCrashedError once became a TypeError)."""
    import simpy

    from sim.db.errors import ClientCrashedError, ParameterError, UnknownQueryError
    from sim.db.postgres import ServerStatementError

    errors = [
        ClientCrashedError("w0", "BEGIN"),
        UniqueViolationError("insert_job", "duplicate key"),
        ParameterError("heartbeat", "id", "missing"),
        UnknownQueryError("claim", ["claim_conditional"]),
        ServerStatementError("dump_jobs", "out of memory", "53200"),
    ]
    for error in errors:
        env = simpy.Environment()

        def fail(env=env, error=error):
            yield env.timeout(1)
            raise error

        env.process(fail())
        try:
            env.run()
        except type(error) as rebuilt:
            assert str(rebuilt) == str(error) and rebuilt.__cause__ is error
        assert type(error)(*error.args).__dict__ == error.__dict__
