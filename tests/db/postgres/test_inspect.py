"""query_state: the final tables as pandas, the same on both backends, and on a kept schema."""

from __future__ import annotations

import pandas as pd
import pytest

import sim
from sim.db.errors import DatabaseError
from sim.db.inspect import query_state
from sim.db.memory import MemoryBackend
from sim.db.postgres import PostgresBackend
from sim.scenario.dists import Dist
from sim.scenario.settings import Faults, ScriptedCrash

from .conftest import schema_exists
from .scripted import scripted

pytestmark = pytest.mark.postgres


def stuck_at_the_horizon():
    """Two jobs; w0 crashes holding job 1 at t=10 and never comes back within the horizon, and
    no watcher runs: job 1 stays Processing with an expired lease, a stuck job."""
    faults = Faults(crashes=(ScriptedCrash(at=10.0, worker=0),), restart_delay=Dist.constant(500.0))
    return scripted(
        jobs=2, workers=2, work=20.0, horizon=60.0, faults=faults, claim_takes_expired=False
    )


def test_the_same_state_on_both_backends(pg):
    memory = MemoryBackend()
    states = []
    for db in (memory, pg):
        run = sim.run(stuck_at_the_horizon(), backend=db)
        states.append(query_state(db, now=run.scenario.horizon))
    on_memory, on_postgres = states
    for name in ("jobs", "ledger", "processed_events", "stuck", "attempts"):
        pd.testing.assert_frame_equal(
            getattr(on_memory, name), getattr(on_postgres, name), check_dtype=False
        )
    pd.testing.assert_series_equal(on_memory.status_counts, on_postgres.status_counts)
    state = on_postgres
    assert state.status_counts.to_dict() == {
        "Pending": 0,
        "Processing": 1,
        "Completed": 1,
        "Dead": 0,
    }
    assert state.stuck[["id", "lease_owner", "attempts"]].values.tolist() == [[1, "w0", 1]]
    assert state.stuck["lease_until"].item() == pytest.approx(30.002)  # claimed at 0.002, TTL 30
    history = state.attempts.set_index("id")
    assert history.loc[2, "effect_workers"] == ["w1"] and history.loc[1, "effects"] == 0
    assert "1 stuck" in repr(state)
    # before the lease ended nothing was stuck yet
    assert query_state(pg, now=30.0).stuck.empty


def test_a_kept_schema_can_be_queried_after_the_run(pg_dsn, admin, monkeypatch):
    made = []
    make_backend = sim.runner.make_backend
    monkeypatch.setattr(
        sim.runner, "make_backend", lambda *a, **k: made.append(make_backend(*a, **k)) or made[-1]
    )
    run = sim.run(stuck_at_the_horizon(), backend="postgres", dsn=pg_dsn, keep_schema=True)
    schema = made[0].schema
    try:
        assert schema_exists(admin, schema)
        state = query_state(pg_dsn, schema=schema, now=run.scenario.horizon)
        pd.testing.assert_frame_equal(state.jobs, run.table_jobs)
        assert state.stuck["id"].tolist() == [1]
        assert schema_exists(admin, schema)  # attaching never drops a schema
    finally:
        admin.execute(f'DROP SCHEMA "{schema}" CASCADE')


def test_attaching_to_a_missing_schema_is_a_clear_error(pg_dsn):
    with pytest.raises(DatabaseError, match="no Lease Lab schema leaselab_nope at host"):
        query_state(pg_dsn, schema="leaselab_nope")
    with pytest.raises(ValueError, match="give the schema"):
        query_state(pg_dsn)


def test_attach_reads_what_another_backend_wrote(pg_dsn):
    with PostgresBackend(pg_dsn, keep_schema=True) as db:
        sim.run(stuck_at_the_horizon(), backend=db)
        schema = db.schema
    try:
        state = query_state(pg_dsn, schema=schema)
        assert state.now == pytest.approx(20.006)  # by default, the last instant written ...
        assert state.stuck.empty  # ... when job 1's lease (until 30.002) still ran
        assert query_state(pg_dsn, schema=schema, now=60.0).stuck["id"].tolist() == [1]
    finally:
        with PostgresBackend.attach(pg_dsn, schema) as db:
            db.admin(f'DROP SCHEMA "{schema}" CASCADE')
