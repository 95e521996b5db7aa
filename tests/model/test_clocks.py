"""Worker clocks (policy.clock = worker): a constant offset, a drift rate and clock steps, in exact
timelines. The worker stamps its lease's expiry with its own clock; the watcher compares it with the
database's (BullMQ's PostgreSQL backend binds the worker's Date.now() as the lock's expiry)."""

import pytest

from sim import run
from sim.errors import ConfigError
from sim.model.clock import WorkerClock
from sim.scenario.settings import ClockStep, Faults, LeaseWarning, Scenario

from .scripts import mechanism_scenarios, timeline

MECHANISMS = mechanism_scenarios()


def test_a_worker_clock_reads_offset_drift_and_steps():
    clock = WorkerClock(offset=-10.0, drift_ppm=50_000, steps=[(50.0, -40.0), (20.0, 5.0)])
    assert clock.at(0.0) == -10.0
    assert clock.at(10.0) == pytest.approx(10.0 - 10.0 + 0.5)
    assert clock.at(20.0) == pytest.approx(
        20.0 - 10.0 + 1.0 + 5.0
    )  # a step counts from its instant
    assert clock.at(60.0) == pytest.approx(60.0 - 10.0 + 3.0 + 5.0 - 40.0)
    assert clock.offset_at(60.0) == pytest.approx(-42.0)


def test_a_worker_behind_the_database_writes_leases_the_watcher_finds_expired_early():
    """w0's clock is 10 s behind: it claims at 0.002 binding now = -9.998, so its 30 s lease ends
    at 20.002 on the database's clock. The watcher (database clock, a tick every 5 s) requeues the
    job at its tick of 20.004 (+1 ms) while w0 still works on it (28 s of work): a false expiry.
    The requeued job is due at 20.005 by the watcher's clock, which the lagging workers' clocks
    reach only at 30.005: w0's fenced completion is refused at 28.005 and w0 itself claims the job
    again at 30.009 (its polls at 29.005 read 19.005)."""
    r = run(MECHANISMS["clock offset"])
    assert timeline(r) == [
        (0.002, "claim", "w0", 1, 1),
        (0.002, "claim_lost", "w1", 1, None),
        (14.002, "psp_charge", "w0", 1, 1),
        (20.005, "requeue", "watcher", 1, 1),
        (28.005, "complete_rejected", "w0", 1, 1),
        (30.009, "claim", "w0", 1, 2),
    ]
    claims = r.events[r.events.kind == "claim"]
    assert claims.detail.round(6).tolist() == [20.002, 50.009]  # worker-stamped expiries
    first = r.leases.iloc[0]
    assert (first.end_reason, round(first.end, 6), bool(first.false_expiry)) == (
        "expired",
        20.002,
        True,
    )
    assert r.worker_skews == {"w0": -10.0, "w1": -10.0}
    # the same run with the database's clock: the lease ends at 30.002, after the work
    fair = run(r.scenario, **{"policy.clock": "db"}, **{"faults.clock_offset": 0.0})
    assert [k for _, k, *_ in timeline(fair)] == [
        "claim",
        "claim_lost",
        "psp_charge",
        "effect",
        "complete",
    ]


def test_a_fast_clock_stretches_every_renewal_and_delays_the_recovery():
    """w0's clock runs 5 % fast (50,000 ppm): each renewal at t writes t x 1.05 + 30. Its last one,
    at 200.022, ends the lease at 240.0231 instead of 230.022; w0 crashes at 205 and the watcher
    (a tick every second, database clock) requeues the job at 240.241, 10 s later than with the
    database's clock."""
    r = run(MECHANISMS["clock drift"])
    tail = [
        (round(e.t, 6), e.kind, e.detail if e.kind != "heartbeat" else round(e.detail, 6))
        for e in r.log
        if e.kind in ("heartbeat", "crash", "requeue")
    ][-4:]
    assert tail == [
        (190.021, "heartbeat", 229.52205),
        (200.022, "heartbeat", 240.0231),
        (205.0, "crash", 240.0231),
        (240.241, "requeue", "Pending"),
    ]
    assert r.worker_clocks["w0"].offset_at(200.022) == pytest.approx(10.0011)


def test_a_clock_stepped_back_renews_into_the_past():
    """At 50 s w0's clock steps back 40 s (an NTP correction). Its heartbeat at 50.007 binds
    now = 10.007 and writes lease_until = 40.007, already past on the database's clock: the
    heartbeat succeeded, yet the watcher requeues the job at its next tick (50.051) and w0 learns
    it only from its next heartbeat, rejected at 60.008."""
    r = run(MECHANISMS["clock step"])
    assert timeline(r)[-5:] == [
        (40.006, "heartbeat", "w0", 1, 1),
        (50.002, "psp_charge", "w0", 1, 1),
        (50.007, "heartbeat", "w0", 1, 1),
        (50.051, "requeue", "watcher", 1, 1),
        (60.008, "heartbeat_rejected", "w0", 1, 1),
    ]
    renewals = [round(e.detail, 6) for e in r.log if e.kind == "heartbeat"]
    assert renewals[-2:] == [70.006, 40.007]  # the lease shrank by the step
    lease = r.leases.iloc[0]
    assert (round(lease.end, 6), lease.end_reason, bool(lease.false_expiry)) == (
        40.007,
        "expired",
        True,
    )


def test_clock_settings_are_checked_and_warn_without_worker_clocks():
    with pytest.raises(ConfigError, match=r"faults.clock_drift_ppm: must be between"):
        Scenario(faults=Faults(clock_drift_ppm=2e6)).replace()
    with pytest.raises(
        ConfigError, match=r"faults.clock_steps\[0\].worker: must be a worker index"
    ):
        Scenario(faults=Faults(clock_steps=(ClockStep(worker=9, at=1.0, by=1.0),))).replace()
    with pytest.raises(ConfigError, match=r"faults.clock_offset: 2e\+09 s is too long"):
        Scenario(faults=Faults(clock_offset=-2e9)).replace()
    with pytest.warns(
        LeaseWarning, match="faults.clock_offset has no effect with policy.clock = db"
    ):
        Scenario(faults=Faults(clock_offset=3.0)).replace()
