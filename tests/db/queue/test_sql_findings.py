"""What a queue's statements do, asked of the server (sim.db.queue.sql_findings,
sim.db.queue.probes): each finding comes from the statements run by hand in a scratch schema, never
from words in their text; a statement written in another shape with the same behaviour gets the same
finding."""

from __future__ import annotations

from pathlib import Path

import pytest

import sim
from sim.db.queries import load_queries
from sim.db.queue.directory import load_queue
from sim.db.queue.probes import lab_on
from sim.db.queue.sql_findings import findings, stuck_age
from sim.runner import with_queue
from sim.scenario.settings import resolve

pytestmark = pytest.mark.postgres

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "queues"


def found(queue, scenario, dsn, **overrides):
    scenario, queue = with_queue(resolve(scenario), load_queue(queue))
    if overrides:
        scenario = scenario.with_overrides(overrides)
    queue.check_on(dsn)
    return findings(queue, scenario, dsn)


def write(tmp_path: Path, blocks: dict[str, str], schema: str | None = None, toml: str = ""):
    """A queue directory whose blocks declare the parameters their text uses."""
    d = tmp_path / "q"
    d.mkdir()
    text = []
    for name, sql in blocks.items():
        params = [(p, t) for p, t in load_queries()[name].params if f"%({p})s" in sql]
        text.append(
            f"-- name: {name}\n-- x\n-- params: {', '.join(f'{p} {t}' for p, t in params)}\n{sql}\n"
        )
    (d / "queries.sql").write_text("\n".join(text), encoding="utf-8")
    if schema is not None:
        (d / "schema.sql").write_text(schema, encoding="utf-8")
    if toml:
        (d / "queue.toml").write_text(toml, encoding="utf-8")
    return d


@pytest.mark.parametrize(
    "name, scenario, overrides, safe",
    [
        ("seed", "gc-pause-zombie", {}, {"claim": True, "fencing": True, "watcher": True}),
        (
            "read-then-write",
            "read-then-write-race",
            {"policy.claim": "conditional_update"},
            {"claim": False, "fencing": False, "watcher": True},
        ),
        (
            "unfenced-completion",
            "gc-pause-zombie",
            {},
            {"claim": True, "fencing": False, "watcher": True},
        ),
        ("river-like", None, {}, {"claim": True, "fencing": False, "watcher": False}),
        ("graphile-like", None, {}, {"claim": True, "fencing": False, "watcher": True}),
        ("pg-boss-like", None, {}, {"claim": True, "fencing": False, "watcher": True}),
        ("solid-queue-like", None, {}, {"claim": True, "fencing": True, "watcher": True}),
    ],
)
def test_findings_of_the_examples(pg_dsn, name, scenario, overrides, safe):
    scenario = scenario or str(EXAMPLES / name / "scenario.toml")
    got = found(EXAMPLES / name, scenario, pg_dsn, **overrides)
    assert {k: f.safe for k, f in got.items()} == safe


def test_a_read_then_write_rescue_is_a_watcher_judged_on_its_write(pg_dsn, tmp_path):
    """River's rescuer reads the stuck jobs, then writes each by id: recognised as the watcher
    (policy.watcher_gap), and judged on whether its write re-checks the job: by id alone (before
    River's PR #1373) it overwrites a finished job and requeues a job taken again; with the job's
    state and age in its WHERE it does neither."""
    river = found(EXAMPLES / "river-like", str(EXAMPLES / "river-like" / "scenario.toml"), pg_dsn)
    text = river["watcher"].text
    assert text.startswith(
        f"select_stuck_jobs ({EXAMPLES / 'river-like'}/queries.sql:57), then rescue_job "
        f"({EXAMPLES / 'river-like'}/queries.sql:64) moves a job out of Processing 30 s after its "
        "claim"
    )
    assert "its write overwrites a finished job" in text
    assert "a job taken again in between goes back to Pending" in text
    fixed = (
        (EXAMPLES / "river-like" / "queries.sql")
        .read_text()
        .replace(
            "WHERE j.id = %(id)s\n",
            "WHERE j.id = %(id)s AND j.state = 'running'\n"
            "  AND j.attempted_at < %(now)s - %(stuck_after)s\n",
        )
    )
    fixed = fixed.replace(
        "-- params: id int, now time, retry_backoff int",
        "-- params: id int, now time, retry_backoff int, stuck_after interval",
    )
    d = tmp_path / "river-fixed"
    d.mkdir()
    for f in ("schema.sql", "queue.toml"):
        (d / f).write_text((EXAMPLES / "river-like" / f).read_text())
    (d / "queries.sql").write_text(fixed)
    after = found(d, str(EXAMPLES / "river-like" / "scenario.toml"), pg_dsn)["watcher"]
    assert after.safe is True
    assert after.text.endswith(
        "leaves a live lease alone, leaves a finished job alone, its write re-checks the job it "
        "read"
    )


def test_a_rescue_by_delete_and_insert_writes_its_rows(pg_dsn):
    """pg-boss fails an expired job by deleting its row and inserting it again: no UPDATE
    anywhere, yet the server counts the rows written and the job leaves Processing."""
    got = found(EXAMPLES / "pg-boss-like", str(EXAMPLES / "pg-boss-like" / "scenario.toml"), pg_dsn)
    watcher = got["watcher"]
    assert watcher.safe is True and watcher.numbers["written"] == 2
    assert "(data-changing steps (Delete on job, Insert on job); 2 rows written" in watcher.text


def test_a_claim_in_data_changing_steps_is_one_claim(pg_dsn):
    """Solid Queue's claim inserts a claimed execution and deletes the ready one in CTE steps
    with a final SELECT: the server's plan shows the steps and the row lock, and a second claim
    gets nothing; whether it holds under contention is the runs' to say (sim.review)."""
    got = found(
        EXAMPLES / "solid-queue-like", str(EXAMPLES / "solid-queue-like" / "scenario.toml"), pg_dsn
    )
    claim = got["claim"]
    assert claim.safe is True
    assert claim.text == (
        f"claim_skip_locked ({EXAMPLES / 'solid-queue-like'}/queries.sql:22) is data-changing "
        "steps (Update on solid_queue_processes, Insert on solid_queue_processes, Insert on "
        "solid_queue_claimed_executions, Delete on solid_queue_ready_executions), locking the rows "
        "it reads; a second claim while the first lease ran got nothing"
    )


def test_fencing_covers_every_write_by_a_worker(pg_dsn):
    """Completion, heartbeat, failure (a worker-side deadline) and release are each probed with
    a stale lease: pg-boss fails by the job's id alone, graphile-worker fails by the lock's owner,
    Solid Queue refuses every write once its claimed execution is gone."""
    boss = found(
        EXAMPLES / "pg-boss-like", str(EXAMPLES / "pg-boss-like" / "scenario.toml"), pg_dsn
    )
    assert set(boss["fencing"].numbers) == {"complete_unfenced", "heartbeat", "fail_job_fenced"}
    assert boss["fencing"].numbers["fail_job_fenced"]["expired"] == "written"
    assert (
        f"fail_job_fenced ({EXAMPLES / 'pg-boss-like'}/queries.sql:49) checks neither owner nor "
        "attempt, lets a late write through on a job the watcher requeued"
    ) in boss["fencing"].text
    graphile = found(
        EXAMPLES / "graphile-like", str(EXAMPLES / "graphile-like" / "scenario.toml"), pg_dsn
    )
    assert (
        f"fail_job_fenced ({EXAMPLES / 'graphile-like'}/queries.sql:39) checks the owner but not "
        "the attempt"
    ) in graphile["fencing"].text
    assert (
        f"complete_unfenced ({EXAMPLES / 'graphile-like'}/queries.sql:33) checks neither owner nor "
        "attempt"
    ) in graphile["fencing"].text
    solid = found(
        EXAMPLES / "solid-queue-like",
        str(EXAMPLES / "solid-queue-like" / "scenario.toml"),
        pg_dsn,
        **{"faults.shutdown": "graceful"},
    )["fencing"]
    assert set(solid.numbers) == {"complete_fenced", "heartbeat", "release_job_fenced"}
    assert all(cases["expired"] == "refused" for cases in solid.numbers.values())


def test_the_same_behaviour_in_another_shape_gets_the_same_finding(pg_dsn, tmp_path):
    """A fenced completion as a plain UPDATE, as a CTE, and as an UPDATE whose fence sits in a
    sub-select: the probes see the same refusals, whatever the words."""
    texts = [
        "UPDATE payment_jobs SET status = 'Completed', completed_at = %(now)s "
        "WHERE id = %(id)s AND status = 'Processing' AND lease_owner = %(owner)s "
        "AND attempts = %(attempt)s RETURNING id",
        "WITH mine AS (SELECT id FROM payment_jobs WHERE (lease_owner, attempts) = (%(owner)s, "
        "%(attempt)s) AND status = 'Processing') UPDATE payment_jobs j SET status = 'Completed', "
        "completed_at = %(now)s FROM mine WHERE j.id = mine.id AND j.id = %(id)s RETURNING j.id",
        "UPDATE payment_jobs SET status = 'Completed', completed_at = %(now)s WHERE id = "
        "(SELECT id FROM payment_jobs WHERE id = %(id)s AND status = 'Processing' AND "
        "lease_owner || '/' || attempts = %(owner)s || '/' || %(attempt)s) RETURNING id",
    ]
    results = []
    for i, text in enumerate(texts):
        (tmp_path / str(i)).mkdir()
        d = write(tmp_path / str(i), {"complete_fenced": text})
        got = found(d, "gc-pause-zombie", pg_dsn)["fencing"]
        results.append(got.numbers["complete_fenced"])
    assert (
        results[0]
        == results[1]
        == results[2]
        == {
            "own": "written",
            "expired": "refused",
            "expired_to": "Pending",
            "other": "refused",
            "same": "refused",
            "done": "refused",
        }
    )


def test_a_stuck_age_that_disagrees_with_the_ttl_is_said(pg_dsn, tmp_path):
    """A rescue written with a literal age (30 s) under a scenario whose TTL is 60 s: the probe
    finds the age the SQL really uses and says it is not the scenario's; bound as %(stuck_after)s
    it follows the TTL."""
    river = (EXAMPLES / "river-like" / "queries.sql").read_text()
    literal = river.replace("%(now)s - %(stuck_after)s", "%(now)s - interval '30 seconds'").replace(
        "-- params: now time, stuck_after interval", "-- params: now time"
    )
    d = tmp_path / "literal"
    d.mkdir()
    for f in ("schema.sql", "queue.toml"):
        (d / f).write_text((EXAMPLES / "river-like" / f).read_text())
    (d / "queries.sql").write_text(literal)
    scenario = str(EXAMPLES / "river-like" / "scenario.toml")
    watcher = found(d, scenario, pg_dsn, **{"policy.lease_ttl": 60.0})["watcher"]
    assert watcher.numbers["stuck_age"] == pytest.approx(30.0, rel=2e-3)
    assert watcher.numbers["stuck_age_disagrees"] is True
    assert (
        "it takes a job as stuck 30 s after its claim while policy.lease_ttl is 60 s: the "
        "scenario's leases are not the queue's (set lease_ttl = 30"
    ) in watcher.text
    bound = found(EXAMPLES / "river-like", scenario, pg_dsn, **{"policy.lease_ttl": 60.0})[
        "watcher"
    ]
    assert bound.numbers["stuck_age"] == pytest.approx(60.0, rel=2e-3)
    assert "stuck_age_disagrees" not in bound.numbers


def test_the_stuck_age_of_a_lease_is_its_ttl(pg_dsn):
    q = load_queue(EXAMPLES / "seed")
    q.check_on(pg_dsn)
    for ttl in (12.0, 300.0):
        with lab_on(
            q, resolve("baseline").with_overrides({"policy.lease_ttl": ttl}).policy, pg_dsn
        ) as lab:
            assert stuck_age(lab) == pytest.approx(ttl, rel=2e-3)


def test_no_watcher_and_a_claim_that_skips_expired_jobs_is_unsafe(pg_dsn):
    got = found(
        EXAMPLES / "seed",
        "baseline",
        pg_dsn,
        **{"policy.watcher": False, "policy.claim_takes_expired": False},
    )["watcher"]
    assert got.safe is False
    assert got.text.startswith(
        f"requeue_expired ({EXAMPLES / 'seed'}/queries.sql:35) exists but policy.watcher = false "
        "does not run it, and the claim did not take a job whose lease had expired"
    )


def test_the_claim_says_which_evidence_decided_it(pg_dsn):
    """A claim the probes cannot fault is decided by the runs: under contention when the variant
    ran, else by the scenario's own runs, and the evidence says which; a claim the probes fault
    is decided by the probe."""
    import sim

    solid = EXAMPLES / "solid-queue-like"
    r = sim.review(str(solid / "scenario.toml"), seeds=(1,), variants=False, sql=solid, dsn=pg_dsn)
    assert (
        "Decided by the scenario's runs (0 double claims in 4 leases); no contention variant ran."
        in r.table.loc["claim", "evidence"]
    )
    race = sim.review(
        "read-then-write-race",
        seeds=(1,),
        variants=False,
        sql=EXAMPLES / "read-then-write",
        dsn=pg_dsn,
        **{"policy.claim": "conditional_update"},
    )
    assert (
        "Decided by the server probe, and the runs' double claims."
        in race.table.loc["claim", "evidence"]
    )


def test_the_solid_queue_like_worker_registers_once_not_at_every_claim(pg_dsn):
    """Issue 31 item 4: the claim inserted a process row at every poll; Solid Queue registers a
    process once (Process.register). Two claims of w0 and one of w1 leave two process rows; w0's
    second claim refreshes its row's heartbeat instead."""
    scenario, queue = with_queue(
        resolve(str(EXAMPLES / "solid-queue-like" / "scenario.toml")), EXAMPLES / "solid-queue-like"
    )
    with lab_on(queue, scenario.policy, pg_dsn) as lab, lab.trial():
        for job in (1, 2, 3):
            lab.enqueue(job)
        assert lab.claim("w0", 1.0)[0] == 1 and lab.claim("w0", 2.0)[0] == 2
        assert lab.claim("w1", 3.0)[0] == 3
        rows = lab.conn.execute(
            "SELECT name, count(*) FROM solid_queue_processes GROUP BY name ORDER BY name"
        ).fetchall()
    assert rows == [("w0", 1), ("w1", 1)]


def test_the_pg_boss_like_heartbeat_returns_the_expiry_its_monitor_honours(pg_dsn):
    """Issue 31 item 4: touchJobs moves heartbeat_on only, never started_on + expire_seconds, so
    the lease a heartbeat returns must be the one the monitor (failJobsByTimeout, and from 12.12
    failJobsByHeartbeat) enforces: the earlier of the two expiries. Without heartbeat_seconds the
    job still expires 30 s after it started, however often it heartbeats; with 10 s it expires 10
    s after its last heartbeat."""
    root = EXAMPLES / "pg-boss-like"
    scenario, queue = with_queue(resolve(str(root / "scenario.toml")), load_queue(root))
    queue.check_on(pg_dsn)  # its ids are uuids: the catalog tells
    with lab_on(queue, scenario.policy, pg_dsn) as lab:
        for beat_seconds, beat_at, expiry in ((None, 20.0, 31.0), (10, 5.0, 15.0)):
            with lab.trial():
                lab.enqueue(1)
                job, attempt = lab.claim("w0", 1.0)
                lab.conn.execute("UPDATE job SET heartbeat_seconds = %s", (beat_seconds,))
                [(_, until)] = lab.execute(
                    "heartbeat", id=job, owner="w0", attempt=attempt, now=beat_at
                )
                assert until == pytest.approx(expiry)
                assert lab.execute("requeue_expired", now=expiry - 0.5) == []
                moved = lab.execute("requeue_expired", now=expiry + 0.5)
                assert [row[:2] for row in moved] == [(1, "Pending")]


def _river_with_its_own_backoff(tmp_path: Path, delay_sql: str) -> Path:
    """river-like with the retry delay computed by its rescue's SQL (`delay_sql`, in seconds),
    as River's own translation does, not bound from policy.retry_backoff (queue.toml sets none)."""
    d = tmp_path / "river-own-backoff"
    d.mkdir(parents=True)
    (d / "schema.sql").write_text((EXAMPLES / "river-like" / "schema.sql").read_text())
    text = (EXAMPLES / "river-like" / "queries.sql").read_text()
    bound = (
        "(%(retry_backoff)s * j.attempt * j.attempt * j.attempt * j.attempt) "
        "* interval '1 microsecond'"
    )
    assert bound in text
    text = text.replace(bound, f"({delay_sql}) * interval '1 second'")
    text = text.replace(
        "-- params: id int, now time, retry_backoff int", "-- params: id int, now time"
    )
    (d / "queries.sql").write_text(text)
    toml = (EXAMPLES / "river-like" / "queue.toml").read_text()
    (d / "queue.toml").write_text(
        "\n".join(line for line in toml.splitlines() if not line.startswith("retry_backoff"))
    )
    return d


def test_a_retry_delay_the_queue_s_sql_computes_is_seen_by_the_probes(pg_dsn, tmp_path):
    """Issue 31 item 2: River's rescue schedules a job attempt^4 seconds later in its own SQL.
    The fencing probe used to claim the requeued job half a second after the tick, find nothing
    and say that nothing hands an expired job on; the watcher item now measures the delay the
    write gives (1 s, then 16 s) and says it is not the policy's (0), as the stuck age is."""
    queue = _river_with_its_own_backoff(tmp_path, "j.attempt * j.attempt * j.attempt * j.attempt")
    got = found(queue, "no-heartbeat-long-jobs", pg_dsn)
    watcher, fencing = got["watcher"], got["fencing"]
    assert watcher.numbers["retry_delays"] == {
        1: pytest.approx(1.0, rel=2e-3),
        2: pytest.approx(16.0, rel=2e-3),
    }
    assert watcher.numbers["retry_delay_disagrees"] is True
    assert watcher.text.endswith(
        "; it makes a requeued job due again 1 s after its tick at a first attempt and 16 s at a "
        "second, while policy.retry_backoff (0 s x attempts^4) says 0 s and 0 s (set "
        "retry_backoff = 1 in queue.toml)"
    )
    assert "nothing in this queue hands an expired job" not in fencing.text
    assert fencing.numbers["complete_unfenced"]["other"] == "written"
    fixed = found(queue, "no-heartbeat-long-jobs", pg_dsn, **{"policy.retry_backoff": 1})
    assert "retry_delay_disagrees" not in fixed["watcher"].numbers


def test_a_job_waiting_out_the_queue_s_own_retry_delay_is_not_lost(pg_dsn, tmp_path):
    """Issue 31 item 2: with River's attempt^4 in its SQL, job 11 of no-heartbeat-long-jobs (seed
    2) is rescued at its 5th attempt near the horizon and due 625 s later; the run used to report
    it lost ("still Pending ... although workers found nothing to claim"). The delay its rescue
    wrote is measured on the server, and the job is waiting, not lost. A rescue that makes a job
    due only after 1e8 s (never, within any run) still loses it."""
    queue = _river_with_its_own_backoff(tmp_path, "j.attempt * j.attempt * j.attempt * j.attempt")
    r = sim.run("no-heartbeat-long-jobs", sql=queue, seed=2, dsn=pg_dsn)
    assert "lost_job" not in r.check().counts()
    assert r.retry_delays == {("requeue", 5): pytest.approx(625.0, rel=2e-3)}
    job = r.jobs.set_index("job").loc[11]
    assert (job["status"], job["attempts"]) == ("Pending", 5)
    never = _river_with_its_own_backoff(tmp_path / "never", "1e8")
    r = sim.run("no-heartbeat-long-jobs", sql=never, seed=2, dsn=pg_dsn)
    lost = r.check().counts().get("lost_job", 0)
    assert lost >= 1 and set(r.retry_delays.values()) == {None}


def test_a_two_phase_watcher_is_probed_by_its_two_passes(pg_dsn, tmp_path):
    """policy.stall_check = two_phase: the probes' watcher sends the queue's reclaim_stalled twice,
    as the policy's watcher does: the first pass marks a Processing job, the second moves it once
    its lease expired. Lease Lab's pass moves a job at its TTL and leaves a live lease alone; a
    pass that forgets the lease's end reclaims a job at once, its lease still running."""
    reclaim = load_queries()["reclaim_stalled"].sql
    forgets = reclaim.replace(" AND lease_until < %(now)s", "")
    assert forgets != reclaim
    two_phase = {"policy.watcher": True, "policy.stall_check": "two_phase"}
    for name in ("own", "forgets"):
        (tmp_path / name).mkdir()
    own = write(tmp_path / "own", {"reclaim_stalled": reclaim})
    got = found(own, "baseline", pg_dsn, **two_phase)
    watcher = got["watcher"]
    assert watcher.safe is True
    assert watcher.numbers["stuck_age"] == pytest.approx(30.0, rel=2e-3)
    assert watcher.numbers["written"] == 1
    assert watcher.text.startswith(
        f"reclaim_stalled ({own}/queries.sql:4) moves a job out of Processing 30 s after its claim"
    )
    assert "leaves a live lease alone, leaves a finished job alone" in watcher.text
    assert got["fencing"].numbers["complete_fenced"]["expired"] == "refused"
    bad = found(
        write(tmp_path / "forgets", {"reclaim_stalled": forgets}), "baseline", pg_dsn, **two_phase
    )
    assert bad["watcher"].safe is False and bad["watcher"].numbers["stuck_age"] < 0.01
    assert "; but it requeues a job whose lease still runs" in bad["watcher"].text
