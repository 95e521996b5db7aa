"""sim.hunt on real PostgreSQL: a queue's own SQL (--sql) hunted on the server, a finding of the
simulated database replayed there, and the explicit schedules (stalls, heartbeat faults, the
same-instant order) giving the same event log on both backends."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

import sim
from sim.scenario.pinned import DbStall, HeartbeatFault, Pinned
from sim.scenario.settings import Faults
from tests.model.scripts import scripted

pytestmark = pytest.mark.postgres

EXAMPLES = Path(__file__).resolve().parents[2] / "examples/queues"
RIVER = EXAMPLES / "river-like"
SCOPE = dict(workers=2, jobs=1, max_faults=2, invariant="terminal_overwritten")


def river_fixed(folder: Path) -> Path:
    """River-like with River's fix (PR #1373): the rescue re-checks state and age as it writes."""
    queries = (RIVER / "queries.sql").read_text()
    queries = queries.replace(
        "WHERE j.id = %(id)s\n",
        "WHERE j.id = %(id)s AND j.state = 'running'\n"
        "  AND j.attempted_at < %(now)s - %(stuck_after)s\n",
    ).replace(
        "-- params: id int, now time, retry_backoff int",
        "-- params: id int, now time, retry_backoff int, stuck_after interval",
    )
    folder.mkdir()
    (folder / "queries.sql").write_text(queries)
    for name in ("schema.sql", "queue.toml"):
        (folder / name).write_text((RIVER / name).read_text())
    return folder


def test_the_river_like_queue_s_own_sql_overwrites_a_finished_job(pg_dsn):
    result = sim.hunt(RIVER / "scenario.toml", sql=RIVER, dsn=pg_dsn, time=60, **SCOPE)
    finding = result.findings["terminal_overwritten"]
    s = finding.schedule
    assert s.workers <= 2 and s.jobs == 1 and len(s.faults) <= 2
    assert finding.replay.run.backend == "postgres" and finding.postgres.shows
    assert finding.sql == str(RIVER) and result.where == "PostgreSQL (the queue's own SQL)"
    assert result.screen is not None  # the simulated database screened the candidates first


def test_river_s_fix_gets_its_certificate_on_the_server(pg_dsn, tmp_path):
    """A small scope (one worker, one job, one fault) so that every schedule of its grid runs on
    PostgreSQL within seconds; the memory tests certify the acceptance's full scope."""
    fixed = river_fixed(tmp_path / "river-fixed")
    result = sim.hunt(
        RIVER / "scenario.toml",
        sql=fixed,
        dsn=pg_dsn,
        time=300,
        exhaustive=True,
        workers=1,
        jobs=1,
        max_faults=1,
        invariant="terminal_overwritten",
    )
    certificate = result.certificate
    assert not result.findings and certificate.complete
    assert certificate.where == "PostgreSQL (the queue's own SQL)"
    assert certificate.checked == result.coverage.grid_checked == result.coverage.grid_total > 10


def test_the_seed_s_read_then_write_sql_double_claims_with_two_workers_and_no_fault(pg_dsn):
    result = sim.hunt(
        "read-then-write-race",
        sql=EXAMPLES / "read-then-write",
        dsn=pg_dsn,
        time=60,
        invariant="double_claim",
        **{"policy.claim": "conditional_update"},  # the SELECT, then the queue's claim
    )
    s = result.findings["double_claim"].schedule
    assert (s.workers, s.jobs, s.faults) == (2, 1, ())


def test_a_finding_on_the_simulated_database_is_replayed_on_the_server(pg_dsn):
    result = sim.hunt(
        "baseline",
        dsn=pg_dsn,
        schedules=400,
        invariant="non_owner_completion",
        **{"policy.fencing": False},
    )
    finding = result.findings["non_owner_completion"]
    assert finding.postgres.shows is True
    assert finding.postgres.line("non_owner_completion").startswith(
        "PostgreSQL replay: the server shows it too"
    )


@pytest.mark.parametrize(
    "scenario",
    [
        scripted(work=5, horizon=12, faults=Faults(db_stalls=(DbStall(4.9, 3.1),))),
        scripted(
            work=25,
            horizon=40,
            faults=Faults(
                heartbeat_faults=(
                    HeartbeatFault(0, 9.0, 2.0, lost=True),
                    HeartbeatFault(0, 19.0, 2.0, delay=3.0),
                )
            ),
        ),
        scripted(workers=3, jobs=2, work=5, horizon=8).replace(
            pinned=Pinned(worker_phases=(0.0, 0.0, 0.0), order=("w2", "w1"), order_changes=(1, 3))
        ),
        scripted(workers=2, jobs=1, work=5, horizon=12, claim="select_for_update").replace(
            pinned=Pinned(order=("w1",), order_changes=(2,))
        ),
    ],
    ids=["db stall", "heartbeat faults", "same-instant order", "lock queue order"],
)
def test_explicit_schedules_give_the_same_run_on_both_backends(pg_dsn, scenario):
    memory = sim.run(scenario, backend="memory")
    postgres = sim.run(scenario, backend="postgres", dsn=pg_dsn)
    pd.testing.assert_frame_equal(memory.events, postgres.events)
    for table in ("jobs", "ledger", "processed_events"):
        assert memory.tables[table] == postgres.tables[table], table
