"""The explicit schedules sim hunt writes into a scenario (sim.scenario.pinned): database stalls,
heartbeat faults, pinned phases and work, the order of same-instant statements. Exact timelines on
the scripted scenarios of tests/model (constant work, 1 ms statements, no random phases)."""

from __future__ import annotations

import pytest

from sim import run
from sim.db.memory import MemoryBackend
from sim.errors import ConfigError
from sim.live_mode.runner import check_played
from sim.model.arrivals import Arrivals
from sim.model.world import build
from sim.scenario.pinned import DbStall, HeartbeatFault, Pinned, recovery_deadline
from sim.scenario.settings import Faults, dumps, loads
from tests.model.scripts import scripted, timeline

QUIET = ("idle", "enqueue", "lock_wait", "watcher_tick")


def test_a_db_stall_holds_every_statement_sent_in_it_until_it_ends():
    """The completion's first statement is sent at 5.002 and reaches a database stalled from 4.9
    to 8.0: it is served at 8.0, the next two round trips follow."""
    faults = Faults(db_stalls=(DbStall(at=4.9, duration=3.1),))
    r = run(scripted(work=5, horizon=12, faults=faults))
    assert timeline(r, skip=QUIET) == [
        (0.002, "claim", "w0", 1, 1),
        (2.502, "psp_charge", "w0", 1, 1),  # work is not a statement: the stall does not hold it
        (8.002, "effect", "w0", 1, 1),
        (8.002, "complete", "w0", 1, 1),
    ]


def test_a_heartbeat_sent_in_a_loss_window_never_arrives():
    faults = Faults(heartbeat_faults=(HeartbeatFault(worker=0, at=9.0, duration=2.0, lost=True),))
    r = run(scripted(work=25, horizon=40, faults=faults))
    assert timeline(r, skip=QUIET) == [
        (0.002, "claim", "w0", 1, 1),
        (10.002, "heartbeat_lost", "w0", 1, 1),  # due 10 s after the claim, sent into the window
        (12.502, "psp_charge", "w0", 1, 1),
        (20.003, "heartbeat", "w0", 1, 1),  # the next one, an interval later, arrives
        (25.005, "effect", "w0", 1, 1),
        (25.005, "complete", "w0", 1, 1),
    ]


def test_a_heartbeat_sent_in_a_delay_window_arrives_late_and_the_next_follows_it():
    faults = Faults(heartbeat_faults=(HeartbeatFault(worker=0, at=9.0, duration=2.0, delay=3.0),))
    r = run(scripted(work=25, horizon=40, faults=faults))
    assert timeline(r, skip=QUIET) == [
        (0.002, "claim", "w0", 1, 1),
        (12.502, "psp_charge", "w0", 1, 1),
        (13.003, "heartbeat", "w0", 1, 1),  # sent at 10.002, 3 s on the way, 1 ms of latency
        (23.004, "heartbeat", "w0", 1, 1),
        (25.005, "effect", "w0", 1, 1),
        (25.005, "complete", "w0", 1, 1),
    ]


def test_pinned_phases_decide_who_polls_first():
    scenario = scripted(workers=2, jobs=2, work=5, horizon=8)
    r = run(scenario.replace(pinned=Pinned(worker_phases=(0.5, 0.2))))
    assert timeline(r, skip=(*QUIET, "psp_charge", "effect")) == [
        (0.202, "claim", "w1", 1, 1),
        (0.502, "claim", "w0", 2, 1),
        (5.205, "complete", "w1", 1, 1),
        (5.505, "complete", "w0", 2, 1),
    ]


def test_pinned_work_and_watcher_phase():
    scenario = scripted(jobs=2, work=5, horizon=12, watcher=True)
    r = run(scenario.replace(pinned=Pinned(watcher_phase=7.0, work=(3.0, 7.0))))
    assert timeline(r, skip=("idle", "enqueue", "psp_charge", "effect")) == [
        (0.002, "claim", "w0", 1, 1),
        (3.005, "complete", "w0", 1, 1),  # 3 s of work, not 5
        (3.007, "claim", "w0", 2, 1),
        (7.001, "watcher_tick", "watcher", None, None),  # first tick at 7, not at 0
        (10.01, "complete", "w0", 2, 1),  # 7 s of work
    ]


@pytest.mark.parametrize(
    "order, changes, winner",
    [
        (None, (), "w0"),  # no order: SimPy's wake-up order, as before
        ((), (), "w0"),  # arrival order
        (("w1", "w0"), (), "w1"),
        (("w1", "w0"), (1,), "w0"),  # w1 first at tie 1 (the reads), then last: w0 claims first
    ],
)
def test_the_same_instant_order_decides_which_conditional_claim_wins(order, changes, winner):
    """Both workers read job 1 at 0.001 and claim it at 0.002: the first served wins, the other
    finds it taken."""
    scenario = scripted(workers=2, jobs=1, work=5, horizon=6)
    r = run(scenario.replace(pinned=Pinned(order=order, order_changes=changes)))
    loser = "w1" if winner == "w0" else "w0"
    assert timeline(r, skip=(*QUIET, "psp_charge", "effect")) == [
        (0.002, "claim", winner, 1, 1),
        (0.002, "claim_lost", loser, 1, None),
        (5.005, "complete", winner, 1, 1),
    ]


def test_ties_are_counted_and_nothing_is_batched_without_a_schedule():
    scenario = scripted(workers=2, jobs=1, work=5, horizon=1.5)
    assert build(scenario, MemoryBackend()).arrivals is None
    world = build(scenario.replace(pinned=Pinned(order=())), MemoryBackend())
    world.env.run(until=1.5)
    # the reads at 0.001, the claims at 0.002, w0's PSP-less work runs on; both poll again at ~1
    assert isinstance(world.arrivals, Arrivals) and world.arrivals.ties == 2


def test_a_db_stall_extends_the_recovery_allowance_by_the_time_it_overlaps():
    stalls = (DbStall(10.0, 5.0), DbStall(40.0, 100.0))
    assert recovery_deadline((), 0.0, 31.0) == 31.0
    assert recovery_deadline(stalls, 0.0, 31.0) == 36.0  # the first stall falls inside
    assert recovery_deadline(stalls, 30.0, 31.0) == 161.0  # 30 + 31, plus 100 s from 40 to 140


def test_a_stall_over_the_whole_recovery_is_not_a_stuck_job():
    """The database answers no one from 1 s to 70 s: the lease expires meanwhile, nothing can
    recover it until the stall ends, and the job completes then: not stuck_processing."""
    faults = Faults(db_stalls=(DbStall(at=1.0, duration=69.0),))
    r = run(scripted(work=5, horizon=80, watcher=True, faults=faults))
    assert "stuck_processing" not in r.check().counts()
    assert r.table_jobs["status"].tolist() == ["Completed"]


def test_the_schedule_sections_round_trip_through_toml():
    scenario = scripted(workers=2).replace(
        faults=Faults(
            db_stalls=(DbStall(1.0, 2.0),),
            heartbeat_faults=(HeartbeatFault(1, 3.0, 4.0, delay=5.0),),
        ),
        pinned=Pinned((0.0, 0.5), 1.0, (2.0,), ("w1", "w0/hb"), (3,)),
    )
    text = dumps(scenario)
    assert "[pinned]" in text and "db_stalls" in text
    assert loads(text) == scenario
    assert "[pinned]" not in dumps(scripted())  # a scenario without one writes none


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"faults.db_stalls": [{"at": 1, "duration": 0}]}, "faults.db_stalls[0].duration: must"),
        (
            {"faults.heartbeat_faults": [{"worker": 0, "at": 1, "duration": 2}]},
            "faults.heartbeat_faults[0]: give lost = true or a delay",
        ),
        (
            {"faults.heartbeat_faults": [{"worker": 5, "at": 1, "duration": 2, "lost": True}]},
            "faults.heartbeat_faults[0].worker: must be a worker index 0..0",
        ),
        ({"pinned": {"worker_phases": [0, 1]}}, "pinned.worker_phases: has 2 phases for 1"),
        ({"pinned": {"order_changes": [1]}}, "pinned.order_changes: needs pinned.order"),
        ({"pinned": {"order": ["w0", "w0"]}}, "pinned.order: names each client once"),
        ({"pinned": {"work": [-1]}}, "pinned.work[0]: must be >= 0 seconds"),
        ({"pinned": 3}, "pinned: expected a table, got int 3"),
    ],
)
def test_bad_schedules_are_refused_in_one_line(overrides, message):
    with pytest.raises(ConfigError) as error:
        scripted().with_overrides(overrides)
    assert str(error.value).startswith(message)
    assert "\n" not in str(error.value)


@pytest.mark.parametrize(
    "overrides, key",
    [
        ({"faults.db_stalls": [{"at": 1, "duration": 2}]}, "faults.db_stalls"),
        ({"pinned": {"order": []}}, "pinned"),
    ],
)
def test_live_mode_refuses_what_only_the_simulation_plays(overrides, key):
    with pytest.raises(ConfigError, match=f"^{key}: not played in live mode"):
        check_played(scripted().with_overrides(overrides))
