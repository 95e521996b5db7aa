"""faults.crash_target: "any" crashes workers whatever they do, "holder" crashes a worker holding a
job."""

import pytest
from scipy import stats

from sim import run
from sim.errors import ConfigError
from sim.model.faults import poisson_times
from sim.scenario.dists import Dist
from sim.scenario.settings import Faults, Policy, Scenario, Workload
from sim.support.rng import Streams

from .scripts import scripted, timeline


def _two_workers_one_job(target: str, jobs: int = 1) -> Scenario:
    faults = Faults(crash_rate=90.0, crash_target=target, restart_delay=Dist.constant(3.0))
    return scripted(
        workers=2,
        jobs=jobs,
        work=25,
        horizon=60,
        lease_ttl=10,
        heartbeat_interval=2,
        claim_takes_expired=True,
        faults=faults,
    )


def test_holder_crashes_hit_whoever_holds_the_job_at_each_tick():
    """The pool's clock ticks at 19.377, 28.584 and 51.724 s (180 per hour for 2 workers at 90);
    each tick kills the job's holder of the moment, never the idle worker."""
    ticks = poisson_times(180.0, 60.0, Streams(1).generator("crashes/holder"))
    assert [round(t, 6) for t in ticks] == [19.377451, 28.583819, 51.724327]
    r = run(_two_workers_one_job("holder"))
    assert timeline(r, skip=("idle", "enqueue", "heartbeat")) == [
        (0.002, "claim", "w0", 1, 1),
        (0.002, "claim_lost", "w1", 1, None),
        (12.502, "psp_charge", "w0", 1, 1),
        (19.377451, "crash", "w0", 1, 1),  # tick 1: w0 holds job 1
        (22.377451, "restart", "w0", None, None),
        (
            28.032,
            "claim",
            "w1",
            1,
            2,
        ),  # lease renewed at 18.002 ends at 28.002; w1's next poll takes it
        (28.583819, "crash", "w1", 1, 2),  # tick 2: now w1 is the holder
        (31.583819, "restart", "w1", None, None),
        (38.395451, "claim", "w0", 1, 3),
        (50.895451, "psp_charge", "w0", 1, 3),
        (51.724327, "crash", "w0", 1, 3),  # tick 3: w0 again
        (54.724327, "restart", "w0", None, None),
    ]
    assert r.recoveries["latency"].notna().sum() == 2


def test_holder_ticks_with_no_job_held_crash_nobody():
    r = run(_two_workers_one_job("holder", jobs=0))
    assert r.summary["crashes"] == 0


def test_any_crashes_idle_workers_too():
    r = run(_two_workers_one_job("any"))
    crashes = r.events[r.events.kind == "crash"]
    assert crashes["job"].isna().sum() == 3 and crashes["job"].notna().sum() == 1


def test_crash_target_is_validated():
    with pytest.raises(ConfigError, match=r"^faults.crash_target: must be one of any, holder$"):
        Scenario(faults=Faults(crash_target="owner")).replace()


def _busy_pool(target: str) -> Scenario:
    """The issue's live check: 4 workers always busy, TTL 2 s, heartbeat 0.5 s, watcher 1 s, poll
    0.2 s, exponential jobs of mean 1 s, a crash about every 2 s (450 per worker-hour x 4
    workers)."""
    return Scenario(
        name="busy-pool",
        workload=Workload(jobs=5000, processing=Dist.exponential(1.0), psp_call=Dist.constant(0.0)),
        policy=Policy(
            workers=4,
            poll_interval=0.2,
            lease_ttl=2.0,
            heartbeat_interval=0.5,
            watcher_interval=1.0,
            claim_takes_expired=False,
        ),
        faults=Faults(crash_rate=450.0, crash_target=target, restart_delay=Dist.constant(1.0)),
        horizon=1000.0,
        seed=7,
    )


def test_holder_mode_kills_a_holder_at_the_pool_rate_and_uniformly():
    r = run(_busy_pool("holder"))
    crashes = r.events[r.events.kind == "crash"]
    # with a job always held, every tick of the Poisson(0.5/s) pool clock is a crash of a holder
    low, high = stats.poisson.interval(0.999, 0.5 * 1000)
    assert low <= len(crashes) <= high, len(crashes)
    assert crashes["job"].notna().all()
    assert (
        r.summary["recoveries"] >= len(crashes) - 4
    )  # the last few may still be waiting at the horizon
    counts = (
        crashes["worker"]
        .value_counts()
        .reindex([f"w{i}" for i in range(4)], fill_value=0)
        .to_numpy()
    )
    assert stats.chisquare(counts).pvalue > 0.001, counts  # the holder is chosen uniformly


def test_at_light_load_any_mode_hits_a_holder_only_as_often_as_workers_hold_jobs():
    """Poisson arrivals at 1 job/s of mean 1 s for 4 workers: each is busy about a quarter of the
    time. In "any" mode the share of crashes that hit a holder is that busy share; in "holder" mode
    it is 1."""
    light = {
        "workload.arrival": "poisson",
        "workload.rate": 1.0,
        "workload.jobs": 1000,
        "faults.restart_delay": 0.2,
    }
    r = run(_busy_pool("any"), **light)
    crashes = r.events[r.events.kind == "crash"]
    with_job = int(crashes["job"].notna().sum())
    leases = r.leases
    busy = float((leases["end"] - leases["start"]).sum()) / (4 * r.scenario.horizon)
    low, high = stats.binomtest(with_job, len(crashes)).proportion_ci(0.999)
    assert low <= busy <= high and high < 0.5, (with_job / len(crashes), busy, low, high)
    held = run(_busy_pool("holder"), **light).events.query("kind == 'crash'")
    assert len(held) > 0 and held["job"].notna().all()
