"""A step of the database's own clock (faults.db_clock_steps: an NTP step on its host, a failover
to a replica whose clock differs): the bound now of every statement on the database's clock jumps,
and every deadline compared with it moves at once, the lock server's clock jump of Kleppmann's
critique of Redlock. Exact timelines on the memory backend; tests/db/postgres/test_equivalence.py
plays the same scenarios on PostgreSQL (mechanism_scenarios)."""

import pytest

from sim import run
from sim.errors import ConfigError
from sim.model.clock import DbClock
from sim.scenario.settings import DbClockStep, Faults, Scenario, from_dict

from .scripts import mechanism_scenarios, timeline

MECHANISMS = mechanism_scenarios()


def test_the_database_clock_reads_its_steps_and_says_when_it_reaches_a_stamp():
    clock = DbClock([(45.0, 60.0), (100.0, -30.0)])
    assert [clock.at(t) for t in (0.0, 44.9, 45.0, 99.0, 100.0)] == pytest.approx(
        [0.0, 44.9, 105.0, 159.0, 130.0]
    )
    assert clock.reaches(70.0, after=40.0) == 45.0  # the forward step jumps past the stamp
    assert clock.reaches(30.0, after=10.0) == 30.0  # before any step: the stamp itself
    assert clock.reaches(140.0, after=50.0) == 80.0  # 105 + (80 - 45) = 140
    assert clock.reaches(170.0, after=50.0) == 140.0  # past the step back: 130 + (t - 100)
    assert clock.reaches(10.0, after=50.0) == 50.0  # already past


def test_a_forward_step_hands_a_live_lease_to_another_worker():
    """w0 renews its 30 s lease every 10 s, last at 40.006 (lease_until 70.006). At 45 s the
    database's clock jumps 60 s ahead: the watcher's tick at 45.046 binds now = 105.046 and
    requeues the job its owner is still renewing, w1 claims it at 45.049, w0's next heartbeat is
    refused at 50.007 and it drops the job at the end of its work, after charging the card; w1
    charges it again. The leases: w0's taken while its own count of the TTL ran (a double claim,
    a false expiry), let go by the database at the step."""
    r = run(MECHANISMS["db clock step forward"])
    assert timeline(r) == [
        (0.002, "claim", "w0", 1, 1),
        (0.002, "claim_lost", "w1", 1, None),
        (10.003, "heartbeat", "w0", 1, 1),
        (20.004, "heartbeat", "w0", 1, 1),
        (30.002, "psp_charge", "w0", 1, 1),
        (30.005, "heartbeat", "w0", 1, 1),
        (40.006, "heartbeat", "w0", 1, 1),
        (45.0, "clock_step", "db", None, None),
        (45.046, "requeue", "watcher", 1, 1),
        (45.049, "claim", "w1", 1, 2),
        (50.007, "heartbeat_rejected", "w0", 1, 1),
        (55.05, "heartbeat", "w1", 1, 2),
        (60.002, "abandon", "w0", 1, 1),
        (65.051, "heartbeat", "w1", 1, 2),
        (75.049, "psp_charge", "w1", 1, 2),
        (75.052, "heartbeat", "w1", 1, 2),
    ]
    claims = r.events[r.events.kind == "claim"]
    assert claims.detail.round(6).tolist() == [30.002, 135.049]  # w1 stamps the stepped clock
    first, second = r.leases.iloc[0], r.leases.iloc[1]
    assert (first.end_reason, round(first.end, 6), first.until, bool(first.false_expiry)) == (
        "revoked",
        45.049,
        45.0,
        True,
    )
    assert round(second.until, 6) == 105.052  # the stamp 165.052 is reached at true 105.052
    assert r.summary[
        ["double_claims", "false_expiries", "duplicate_external_effects"]
    ].tolist() == [
        1,
        1,
        1,
    ]
    # without the step, w0 keeps the job and nobody else claims it
    calm = run(r.scenario, **{"faults.db_clock_steps": []})
    assert [k for _, k, w, *_ in timeline(calm) if w == "w1"] == ["claim_lost"]
    assert calm.summary["double_claims"] == 0


def test_a_step_back_holds_a_crashed_owner_s_job_for_the_length_of_the_step():
    """w0 crashes at 42 s holding a lease stamped 70.006; at 45 s the database's clock steps 60 s
    back (a failover to a replica behind), so it reaches 70.006 only at true 130.006: the watcher
    requeues the job at its tick of 130.131 instead of 70.071, and the recovery takes 60 s
    longer."""
    r = run(MECHANISMS["db clock step back"])
    assert timeline(r)[5:10] == [
        (42.0, "crash", "w0", 1, 1),
        (43.0, "restart", "w0", None, None),
        (45.0, "clock_step", "db", None, None),
        (130.131, "requeue", "watcher", 1, 1),
        (131.09, "claim", "w0", 1, 2),
    ]
    assert round(r.leases.iloc[0].until, 6) == 130.006
    assert r.recoveries["latency"].round(3).tolist() == [89.09]
    assert not r.check().violations
    calm = run(r.scenario, **{"faults.db_clock_steps": []})
    assert calm.recoveries["latency"].round(3).tolist() == [29.03]


def test_db_clock_steps_are_checked_in_one_line_and_read_from_toml():
    with pytest.raises(ConfigError, match=r"^faults.db_clock_steps\[0\].at: must be >= 0 seconds$"):
        Scenario(faults=Faults(db_clock_steps=(DbClockStep(at=-1.0, by=5.0),))).replace()
    with pytest.raises(ConfigError, match=r"^faults.db_clock_steps\[1\].by: 2e\+09 s is too long"):
        Scenario(
            faults=Faults(db_clock_steps=(DbClockStep(at=1.0, by=5.0), DbClockStep(1.0, -2e9)))
        ).replace()
    with pytest.raises(ConfigError, match=r"^faults.db_clock_steps \(all steps together\): "):
        Scenario(
            faults=Faults(db_clock_steps=(DbClockStep(1.0, 6e8), DbClockStep(2.0, -6e8)))
        ).replace()
    with pytest.raises(ConfigError, match=r"^faults.db_clock_steps\[0\].by: expected a number"):
        from_dict({"faults": {"db_clock_steps": [{"at": 1.0, "by": "5"}]}})
    with pytest.raises(ConfigError, match=r"^faults.db_clock_steps\[0\].worker: unknown key"):
        from_dict({"faults": {"db_clock_steps": [{"at": 1.0, "by": 5.0, "worker": 0}]}})
    loaded = from_dict({"faults": {"db_clock_steps": [{"at": 10, "by": -3.5}]}})
    assert loaded.faults.db_clock_steps == (DbClockStep(at=10.0, by=-3.5),)


def test_live_mode_refuses_a_db_clock_step_in_one_line():
    from sim.live_mode.runner import check_played

    with pytest.raises(ConfigError, match=r"^faults.db_clock_steps: not played in live mode yet"):
        check_played(MECHANISMS["db clock step back"])
