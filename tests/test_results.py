"""Run frames computed from a hand-written event log: the jobs table and the summary's counts."""

import math

import pandas as pd

from sim.model.events import EventLog
from sim.results import Run
from sim.scenario.settings import preset

LOG = [
    (0.0, "enqueue", "producer", 1, None, "evt-1"),
    (0.0, "enqueue", "producer", 2, None, "evt-1"),  # a redelivery of the same event
    (0.0, "enqueue", "producer", 3, None, "evt-3"),
    (0.5, "enqueue", "producer", 4, None, "evt-4"),
    (0.5, "enqueue", "producer", 5, None, "evt-5"),
    (1.0, "claim", "w0", 1, 1, 31.0),
    (1.5, "psp_charge", "w0", 1, 1, "new"),
    (2.0, "claim", "w1", 2, 1, 32.0),
    (2.5, "psp_charge", "w1", 2, 1, "new"),
    (3.0, "effect", "w0", 1, 1, "evt-1"),
    (3.0, "complete", "w0", 1, 1, 31.0),
    (4.0, "dedup_skip", "w1", 2, 1, "evt-1"),
    (4.0, "complete", "w1", 2, 1, 32.0),
    (5.0, "claim", "w0", 3, 1, 35.0),
    (6.0, "crash", "w0", 3, 1, 35.0),
    (7.0, "claim", "w2", 5, 25, 37.0),
    (8.0, "crash", "w2", 5, 25, 37.0),
    (40.0, "requeue", "watcher", 3, 1, "Pending"),
    (40.0, "requeue", "watcher", 5, 25, "Dead"),
    (41.0, "claim", "w1", 3, 2, 71.0),
    (42.0, "psp_charge", "w1", 3, 2, "replay"),
    (43.0, "effect", "w1", 3, 2, "evt-3"),
    (43.0, "complete", "w1", 3, 2, 71.0),
]


def make_run() -> Run:
    log = EventLog()
    for record in LOG:
        log.add(*record)
    scenario = preset("baseline").with_overrides({"horizon": 100.0})
    return Run(scenario, log, {"commit": 4}, {"jobs": [], "ledger": [], "processed_events": []})


def test_jobs_table_from_the_log():
    jobs = make_run().jobs.set_index("job")
    assert jobs["event_id"].tolist() == ["evt-1", "evt-1", "evt-3", "evt-4", "evt-5"]
    assert jobs["attempts"].tolist() == [1, 1, 2, 0, 1]
    assert jobs["db_effects"].tolist() == [1, 0, 1, 0, 0]
    assert jobs["external_effects"].tolist() == [
        1,
        1,
        0,
        0,
        0,
    ]  # a replayed charge is not a new one
    assert jobs["status"].tolist() == ["Completed", "Completed", "Completed", "Pending", "Dead"]
    assert jobs["owners"].tolist() == ["w0", "w1", "w0,w1", "", "w2"]
    assert jobs.loc[3, "completed_at"] == 43.0 and jobs.loc[3, "latency"] == 43.0
    assert math.isnan(jobs.loc[4, "completed_at"]) and math.isnan(jobs.loc[5, "latency"])


def test_summary_counts_from_the_log():
    summary = make_run().summary
    expected = {
        "jobs": 5,
        "completed": 3,
        "dead": 1,
        "unfinished": 1,
        "lost_jobs": 0,
        "leases": 5,
        "duplicate_db_effects": 0,
        "duplicate_external_effects": 1,
        "psp_charges": 3,
        "crashes": 2,
        "recoveries": 1,
        "unrecovered_crashes": 1,
    }
    assert {k: summary[k] for k in expected} == expected
    assert summary["recovery_latency_mean"] == 35.0  # crash at 6, claimed again at 41
    assert summary["statements_per_s"] == 0.04


def test_empty_log_gives_empty_frames():
    run = Run(
        preset("baseline"), EventLog(), {}, {"jobs": [], "ledger": [], "processed_events": []}
    )
    assert len(run.jobs) == 0 and list(run.jobs.columns)[:3] == ["job", "event_id", "enqueued_at"]
    assert run.summary["jobs"] == 0 and pd.isna(run.summary["job_latency_mean"])
