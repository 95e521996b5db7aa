"""The event log's columns give back exactly what was recorded, and a run keeps one event-id
string per job however many records and tables name it (issue 37: 1M jobs in under 1 GB)."""

from sim.db.memory import MemoryBackend
from sim.model.events import Event, EventLog
from sim.model.world import build
from sim.scenario.settings import preset

RECORDS = [
    (0, "enqueue", "producer", 1, None, "evt-1"),
    (0.25, "claim", "w0", 1, 1, 30.25),
    (0.5, "idle", "w1", None, None, None),
    (1.0, "watcher_tick", "watcher", None, None, 3),
    (2.0, "claim", "w0", 2**31 - 1, 7, 32.0),  # the largest job id the 4-byte column holds
]


def test_the_log_gives_back_what_was_recorded():
    log = EventLog()
    for record in RECORDS:
        log.add(*record)
    assert list(log) == [Event(*record) for record in RECORDS]
    assert [type(e.detail) for e in log] == [str, float, type(None), int, float]
    frame = log.frame()
    assert frame["job"].isna().tolist() == [False, False, True, True, False]
    assert frame["job"].dropna().tolist() == [1, 1, 2**31 - 1]
    assert frame["attempt"].isna().tolist() == [True, False, True, True, False]
    assert log.arrays().job.tolist() == [1, 1, -1, -1, 2**31 - 1]


def test_records_but_a_kind_and_the_last_time_of_a_kind():
    log = EventLog()
    for record in [
        *RECORDS,
        (3.0, "idle", "w0", None, None, None),
        (4.0, "claim", "w1", 3, 1, 34.0),
    ]:
        log.add(*record)
    everything = list(log)
    assert log.records_but("idle") == [e for e in everything if e.kind != "idle"]
    assert log.records_but("no_such_kind") == everything
    assert log.last_time("idle") == 3.0 and log.last_time("claim") == 4.0
    assert log.last_time("enqueue") == 0 and log.last_time("no_such_kind") is None
    assert EventLog().last_time("idle") is None and EventLog().records_but("idle") == []


def test_one_event_id_string_per_job():
    scenario = preset("baseline").with_overrides({"workload.jobs": 30, "horizon": 60.0})
    world = build(scenario, MemoryBackend())
    world.env.run(until=scenario.horizon)
    catalog = world.catalog
    named = [e for e in world.log if e.kind in ("enqueue", "effect", "dedup_skip")]
    assert len(named) >= 60
    assert all(e.detail is catalog.event_id(e.job) for e in named)
    assert all(catalog[job].event_id is catalog.event_id(job) for job in range(1, 31))
