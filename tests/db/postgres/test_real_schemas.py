"""The contract fits real queues' schemas: job ids the queue makes up (uuid, text, its own
serial), `timestamp without time zone` columns whatever the server's time zone, no attempts
column, jobs deleted once finished. Each queue below is Lease Lab's own job table and statements
in that shape, so its run must be the simulated run, record for record; what cannot be expressed
is one error naming the contract."""

from __future__ import annotations

from pathlib import Path

import pytest

import sim
from sim.checklist.design_review import UNTESTED
from sim.db.queries import job_schema_sql, load_queries
from sim.db.queue.directory import QueueDefinitionError, load_queue

pytestmark = pytest.mark.postgres

Q = load_queries()
IDS = {  # the id column's type -> how insert_job makes the queue's id from the model's number
    "uuid": "lpad(to_hex(%(id)s), 32, '0')::uuid",
    "text": "lpad(%(id)s::text, 12, '0')",
    "bigint": "%(id)s + 1000",  # the queue's own numbers, in the model's order
}


def block(name: str, sql: str) -> str:
    params = [(p, t) for p, t in Q[name].params if f"%({p})s" in sql]
    return f"-- name: {name}\n-- x\n-- params: {', '.join(f'{p} {t}' for p, t in params)}\n{sql};\n"


def queue(tmp_path: Path, blocks: dict[str, str], schema: str) -> Path:
    d = tmp_path / "q"
    d.mkdir(exist_ok=True)
    (d / "queries.sql").write_text("\n".join(block(n, s) for n, s in blocks.items()))
    (d / "schema.sql").write_text(schema)
    return d


def schema(id_type: str = "bigint", times: str = "timestamptz") -> str:
    text = job_schema_sql().replace(
        "id            bigint      PRIMARY KEY", f"id {id_type} PRIMARY KEY"
    )
    return text.replace("timestamptz", times)


def insert(make_id: str) -> str:
    return (
        "INSERT INTO payment_jobs (id, event_id, payload, status, attempts, created_at) "
        f"VALUES ({make_id}, %(event_id)s, %(payload)s, 'Pending', 0, %(now)s) RETURNING id"
    )


def same_log(a, b) -> bool:
    return [(round(t, 6), *rest) for t, *rest in a.log] == [
        (round(t, 6), *rest) for t, *rest in b.log
    ]


@pytest.mark.parametrize("id_type", list(IDS))
def test_ids_of_the_queues_own_are_mapped_to_the_models_jobs(tmp_path, pg_dsn, id_type):
    """insert_job returns the id the queue gave the job; every %(id)s is then bound as that id
    and every id a statement returns read back as the model's job: the run is the simulated run."""
    d = queue(tmp_path, {"insert_job": insert(IDS[id_type])}, schema(id_type))
    q = load_queue(d)
    q.check_on(pg_dsn)
    assert q.own_ids and q.id_oid == {"uuid": 2950, "text": 25, "bigint": 20}[id_type]
    own = sim.run("gc-pause-zombie", sql=q, dsn=pg_dsn, keep_schema=True)
    assert same_log(own, sim.run("gc-pause-zombie"))
    assert own.table_jobs["id"].tolist() == [1, 2, 3]  # the model's jobs, in the final table too
    from sim.db.inspect import sql_frame
    from sim.db.postgres import PostgresBackend

    with PostgresBackend.attach(pg_dsn, own.kept_schema) as db:
        stored = sql_frame(db, "SELECT id::text FROM payment_jobs ORDER BY id")["id"].tolist()
        db.keep_schema = False
    expected = {
        "uuid": [f"00000000-0000-0000-0000-00000000000{i}" for i in (1, 2, 3)],
        "text": [f"{i:012d}" for i in (1, 2, 3)],
        "bigint": ["1001", "1002", "1003"],
    }[id_type]
    assert stored == expected


def test_timestamp_columns_hold_the_simulated_clock_whatever_the_servers_time_zone(
    tmp_path, pg_dsn, monkeypatch
):
    """`timestamp without time zone` everywhere, and a session time zone 9 h from UTC (PGTZ):
    every run connection works in UTC, so the run is still the simulated run."""
    d = queue(
        tmp_path, {"insert_job": Q["insert_job"].sql}, schema(times="timestamp without time zone")
    )
    monkeypatch.setenv("PGTZ", "Asia/Tokyo")
    own = sim.run("gc-pause-zombie", sql=d, dsn=pg_dsn)
    assert same_log(own, sim.run("gc-pause-zombie"))
    assert own.table_jobs["completed_at"].notna().all()


def test_a_queue_without_attempts_is_numbered_by_lease_lab_and_item_6_is_untested(tmp_path, pg_dsn):
    """Claims return NULL attempts and dump_jobs has none: Lease Lab numbers the leases itself (a
    claim rolled back does not count), the run is the simulated run, and the review says item 6
    cannot be checked instead of failing it."""
    blocks = {
        name: Q[name].sql.replace("RETURNING id, attempts", "RETURNING id, NULL::bigint")
        for name in ("claim_conditional", "claim_skip_locked", "claim_unconditional")
    }
    blocks["dump_jobs"] = Q["dump_jobs"].sql.replace(
        "lease_until, attempts,", "lease_until, NULL::bigint,"
    )
    d = queue(tmp_path, blocks, job_schema_sql())
    for scenario in ("gc-pause-zombie", "crash-recovery"):
        own = sim.run(scenario, sql=d, dsn=pg_dsn)
        assert same_log(own, sim.run(scenario)), scenario
        assert (
            own.table_jobs["attempts"].isna().all()
            and own.check().counts() == sim.run(scenario).check().counts()
        )
    r = sim.review("gc-pause-zombie", seeds=(1,), variants=False, sql=d, dsn=pg_dsn)
    assert r.table.loc["attempts", "status"] == UNTESTED
    assert r.measured["attempts"] == {"keeps_attempts": False}


def test_jobs_deleted_once_finished_are_not_judged_missing(tmp_path, pg_dsn):
    """A completion that deletes the job (fenced as Lease Lab's): the final table holds only the
    unfinished jobs; no invariant or item reads the deleted ones as lost or mismatched."""
    complete = (
        "DELETE FROM payment_jobs WHERE id = %(id)s AND status = 'Processing' "
        "AND lease_owner = %(owner)s AND attempts = %(attempt)s RETURNING id"
    )
    d = queue(tmp_path, {"complete_fenced": complete}, job_schema_sql())
    own = sim.run("crash-recovery", sql=d, dsn=pg_dsn)
    simulated = sim.run("crash-recovery")
    assert same_log(own, simulated)
    assert own.table_jobs.empty and simulated.summary["unfinished"] == 0  # every job done, deleted
    assert own.check().counts() == simulated.check().counts() == {}
    r = sim.review("crash-recovery", seeds=(1,), variants=False, sql=d, dsn=pg_dsn)
    assert r.measured["owner"]["deleted_jobs"] == int(simulated.summary["completed"])
    assert r.table.loc["owner", "status"] != "fail" and r.table.loc["attempts", "status"] != "fail"


@pytest.mark.parametrize(
    "blocks, id_type, expected",
    [
        (
            {"insert_job": insert("gen_random_uuid()").replace(" RETURNING id", "")},
            "uuid",
            "insert_job: neither uses %(id)s nor returns the id it gave the job (RETURNING id): "
            "Lease Lab cannot tell its jobs apart (contract: insert_job)",
        ),
        (
            {"insert_job": insert("%(id)s::text::uuid").replace(" RETURNING id", "")},
            "uuid",
            "insert_job: the job ids are uuid (dump_jobs, column 1), so insert_job must return the "
            "id it gave the job (RETURNING id): Lease Lab binds %(id)s as that id afterwards "
            "(contract: insert_job)",
        ),
        (
            {"insert_job": insert(IDS["uuid"]).replace("RETURNING id", "RETURNING id::text")},
            "uuid",
            "insert_job: returns id as text, but dump_jobs returns the job ids as uuid; insert_job "
            "returns the id it gave the job (contract: insert_job)",
        ),
        (
            {
                "insert_job": insert("%(id)s"),
                "dump_jobs": Q["dump_jobs"].sql.replace("SELECT id,", "SELECT id::numeric,"),
            },
            "bigint",
            "dump_jobs: column 1 (id) is numeric; Lease Lab reads the job's id as an integer, text "
            "or uuid (contract: dump_jobs)",
        ),
    ],
)
def test_what_cannot_be_expressed_is_one_error_naming_the_contract(
    tmp_path, pg_dsn, blocks, id_type, expected
):
    d = queue(tmp_path, blocks, schema(id_type))
    with pytest.raises(QueueDefinitionError) as info:
        load_queue(d).check_on(pg_dsn)
    message = str(info.value)
    assert "\n" not in message and message.split(": ", 1)[1] == expected
