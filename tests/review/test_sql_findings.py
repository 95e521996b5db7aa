"""What the SQL text shows (sim.sql_findings): the shape of a statement and each finding, read
from the text alone (no server)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sim.db.queue_dir import load_queue
from sim.scenario import resolve
from sim.sql_findings import findings, shape

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "queues"


def test_shape_reads_the_main_statement_past_ctes_comments_and_literals():
    st = shape("""WITH x AS (SELECT id FROM t WHERE a = 'WHERE' FOR UPDATE SKIP LOCKED)
                  UPDATE t SET owner = %(owner)s -- WHERE owner = %(owner)s
                  FROM x WHERE t.id = x.id AND t.state = 'ready' RETURNING t.id""")
    assert (st.verb, st.returning, st.locks) == ("UPDATE", True, True)
    assert st.conditions == ("t.id = x.id", "t.state = 'ready'")
    assert st.rechecks() == ["t.state = 'ready'"]
    assert not st.uses("owner")  # only in SET and in a comment
    assert shape("UPDATE t SET a = 1 WHERE id = %(id)s AND lease_owner = %(owner)s").uses("owner")
    assert shape("UPDATE t SET a = 1 WHERE (id = %(id)s)").rechecks() == []


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
        (
            "river-like",
            str(EXAMPLES / "river-like" / "scenario.toml"),
            {},
            {"claim": True, "fencing": False, "watcher": True},
        ),
        (
            "graphile-like",
            str(EXAMPLES / "graphile-like" / "scenario.toml"),
            {},
            {"claim": True, "fencing": False, "watcher": True},
        ),
    ],
)
def test_findings_of_the_examples(name, scenario, overrides, safe):
    s = resolve(scenario)
    if overrides:
        s = s.with_overrides(overrides)
    found = findings(load_queue(EXAMPLES / name), s.policy)
    assert {k: f.safe for k, f in found.items()} == safe


def test_read_then_write_under_the_projects_own_statements_is_named():
    found = findings(
        load_queue(EXAMPLES / "unfenced-completion"), resolve("read-then-write-race").policy
    )
    assert found["claim"].text.startswith(
        "select_candidates (Lease Lab's sql/queries.sql), then claim_unconditional "
        "(Lease Lab's sql/queries.sql), whose WHERE matches the id alone"
    )


def test_no_watcher_and_a_claim_that_skips_expired_jobs_is_unsafe():
    s = resolve("baseline").with_overrides(
        {"policy.watcher": False, "policy.claim_takes_expired": False}
    )
    finding = findings(load_queue(EXAMPLES / "seed"), s.policy)["watcher"]
    assert not finding.safe
    assert finding.text.startswith(
        f"requeue_expired exists ({EXAMPLES / 'seed'}/queries.sql:35) but "
        "policy.watcher = false does not run it, and the claim skips expired jobs"
    )


def test_comments_and_literals_do_not_fool_the_reading():
    st = shape(
        "UPDATE t SET a = '-- x' WHERE id = %(id)s -- AND lease_owner = %(owner)s\n"
        "  AND b = 'x AND y' RETURNING id"
    )
    assert st.conditions == ("id = %(id)s", "b = 'x AND y'")
    assert not st.uses("owner")
