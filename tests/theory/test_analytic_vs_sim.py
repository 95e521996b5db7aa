"""sim.theory.closed_forms against the simulation: every formula agrees with simulated runs within
its confidence interval (fixed seeds; sized to run in well under a minute on two cores).

Runs go through sim.sweep with the default process pool, so replications use every core.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from sim import run
from sim.scenario.dists import Dist
from sim.scenario.settings import Faults, Policy, Scenario, Workload
from sim.sweeps import sweep
from sim.theory import closed_forms
from sim.theory.stats import wilson_interval
from tests.model import test_recovery_theory as recovery_setup

LAT = 0.002


def _false_expiry_scenario(
    *, ttl, heartbeat_interval, job_duration, pause_rate, pause_duration, jobs_per_run, workers=20
) -> Scenario:
    """Poisson arrivals at 80% utilisation; each job gets exactly one lease (max_attempts = 1: the
    watcher marks an expired job Dead instead of requeueing it), so false expiries per lease are
    false expiries per job. No PSP call: the job's duration is its processing time."""
    rate = 0.8 * workers / job_duration.mean_value()
    return Scenario(
        name="false-expiry-theory",
        workload=Workload(
            jobs=jobs_per_run,
            arrival="poisson",
            rate=rate,
            processing=job_duration,
            psp_call=Dist.constant(0.0),
            statement_latency=Dist.constant(LAT),
        ),
        policy=Policy(
            workers=workers,
            poll_interval=5.0,
            lease_ttl=ttl,
            heartbeat=heartbeat_interval is not None,
            heartbeat_interval=heartbeat_interval or 10.0,
            watcher_interval=5.0,
            claim_takes_expired=False,
            max_attempts=1,
        ),
        faults=Faults(pause_rate=pause_rate, pause_duration=pause_duration),
        horizon=jobs_per_run / rate + 3 * job_duration.quantile(0.99),
    )


def _assert_fraction_matches(false_expiries: int, leases: int, predicted: float) -> None:
    low, high = wilson_interval(false_expiries, leases, 0.99)
    assert low <= predicted <= high, (
        f"predicted {predicted:.4%} outside the 99% Wilson interval [{low:.4%}, {high:.4%}] "
        f"of {false_expiries} false expiries in {leases} leases"
    )


@pytest.mark.slow  # replications: make test only
@pytest.mark.parametrize(
    "case",
    [
        # heartbeats: a pause lapses the lease when it outlasts L minus the time since renewal
        dict(
            ttl=10.0,
            heartbeat_interval=4.0,
            job_duration=Dist.lognormal(40.0, 200.0),
            pause_rate=20.0,
            pause_duration=Dist.lognormal(1.0, 20.0),
            jobs_per_run=1250,
            runs=8,
        ),
        # no heartbeat: the lease lapses when the job, plus the pauses during it, outlasts L
        dict(
            ttl=40.0,
            heartbeat_interval=None,
            job_duration=Dist.lognormal(10.0, 60.0),
            pause_rate=30.0,
            pause_duration=Dist.lognormal(2.0, 30.0),
            jobs_per_run=2500,
            runs=4,
        ),
    ],
    ids=["heartbeat", "no-heartbeat"],
)
def test_false_expiry_probability_matches_simulated_fraction(case):
    case = dict(case)
    runs = case.pop("runs")
    scenario = _false_expiry_scenario(**case)
    result = sweep(
        scenario, {}, runs, seed=11, metrics=["jobs", "leases", "false_expiries"], progress=False
    )
    totals = result.runs[["jobs", "leases", "false_expiries"]].sum()
    assert totals["leases"] == totals["jobs"] >= 9_000  # one lease per job
    case.pop("jobs_per_run")
    predicted = closed_forms.false_expiry_probability(latency=LAT, **case)
    assert 0.01 < predicted < 0.06  # large enough for the interval to mean something
    _assert_fraction_matches(int(totals["false_expiries"]), int(totals["leases"]), predicted)


def test_false_expiry_is_zero_without_pauses_when_jobs_fit_or_heartbeat():
    short = Dist.uniform(1.0, 5.0)
    assert (
        closed_forms.false_expiry_probability(
            ttl=10,
            heartbeat_interval=3,
            job_duration=Dist.lognormal(30, 300),
            pause_rate=0,
            pause_duration=Dist.constant(1),
        )
        == 0
    )
    assert (
        closed_forms.false_expiry_probability(
            ttl=10,
            heartbeat_interval=None,
            job_duration=short,
            pause_rate=0,
            pause_duration=Dist.constant(1),
        )
        == 0
    )
    scenario = _false_expiry_scenario(
        ttl=10.0,
        heartbeat_interval=3.0,
        job_duration=Dist.lognormal(30, 300),
        pause_rate=0.0,
        pause_duration=Dist.constant(1.0),
        jobs_per_run=300,
    )
    assert run(scenario, seed=5).summary["false_expiries"] == 0


# ---- DB load -------------------------------------------------------------------------------------

H, W, P, WORKERS = 4.0, 7.0, 1.5, 8
JOB = Dist.lognormal(6.0, 40.0)


@pytest.fixture(scope="module")
def load_runs():
    """8 fault-free runs of 3000 s: Poisson arrivals at 0.6 jobs/s, ~45% of 8 workers busy."""
    scenario = Scenario(
        name="db-load-theory",
        workload=Workload(
            jobs=100_000,
            arrival="poisson",
            rate=0.6,
            processing=JOB,
            psp_call=Dist.constant(0.0),
            statement_latency=Dist.constant(LAT),
        ),
        policy=Policy(
            workers=WORKERS,
            poll_interval=P,
            lease_ttl=20.0,
            heartbeat_interval=H,
            watcher_interval=W,
        ),
        horizon=3000.0,
    )
    return scenario, sweep(scenario, {}, 8, seed=5, progress=False).runs


def _ratio_interval(ratios) -> tuple[float, float, float]:
    ratios = np.asarray(ratios, dtype=float)
    low, high = stats.t.interval(0.99, len(ratios) - 1, loc=ratios.mean(), scale=stats.sem(ratios))
    return ratios.mean(), low, high


@pytest.mark.slow  # replications: make test only
def test_heartbeat_load_from_arrival_rate(load_runs):
    scenario, runs = load_runs
    arrivals = runs["jobs"] / scenario.horizon  # each run's realised arrival rate
    predicted = closed_forms.heartbeat_load(
        heartbeat_interval=H, arrival_rate=arrivals, job_duration=JOB, latency=LAT
    )
    mean, low, high = _ratio_interval(runs["db_heartbeat_per_s"] / predicted)
    assert low <= 1.0 <= high, (
        f"simulated / predicted heartbeats per second: {mean:.3f} [{low:.3f}, {high:.3f}]"
    )
    assert abs(mean - 1) < 0.03


@pytest.mark.slow  # replications: make test only
def test_heartbeat_load_from_busy_workers_is_the_long_job_limit(load_runs):
    """busy/h' counts a renewal per cycle of busy time; each job sends floor(T/h') heartbeats,
    between T/h' - 1 and T/h', so the simulated rate lies between busy/h' - throughput and
    busy/h'."""
    scenario, runs = load_runs
    busy = runs["jobs"] / scenario.horizon * JOB.mean_value()
    upper = closed_forms.heartbeat_load(heartbeat_interval=H, busy_workers=busy, latency=LAT)
    lower = upper - runs["jobs"] / scenario.horizon
    assert (runs["db_heartbeat_per_s"] < upper * 1.05).all()
    assert (runs["db_heartbeat_per_s"] > lower * 0.95).all()


@pytest.mark.slow  # replications: make test only
def test_watcher_load_is_one_statement_per_interval(load_runs):
    _, runs = load_runs
    predicted = closed_forms.watcher_load(watcher_interval=W, latency=LAT)
    assert np.allclose(runs["db_requeue_expired_per_s"], predicted, rtol=0.01)


@pytest.mark.slow  # replications: make test only
def test_idle_poll_load_from_idle_workers(load_runs):
    scenario, runs = load_runs
    busy = runs["jobs"] / scenario.horizon * JOB.mean_value()
    predicted = closed_forms.idle_poll_load(
        workers=WORKERS, busy_workers=busy, poll_interval=P, latency=LAT
    )
    idle_polls = (
        runs["db_select_candidates_per_s"] - runs["db_claim_conditional_per_s"]
    )  # a claim's own SELECT
    mean, low, high = _ratio_interval(idle_polls / predicted)
    assert low <= 1.0 <= high, (
        f"simulated / predicted idle polls per second: {mean:.3f} [{low:.3f}, {high:.3f}]"
    )
    assert abs(mean - 1) < 0.03


def test_db_load_adds_up():
    load = closed_forms.db_load(
        workers=WORKERS,
        poll_interval=P,
        heartbeat_interval=H,
        watcher_interval=W,
        job_duration=JOB,
        arrival_rate=0.6,
        latency=LAT,
    )
    assert load["busy_workers"] == pytest.approx(0.6 * JOB.mean_value())
    assert load["upkeep"] == pytest.approx(load["heartbeat"] + load["watcher"])
    assert load["total"] == pytest.approx(load["upkeep"] + load["idle_polls"])
    full = closed_forms.db_load(
        workers=WORKERS,
        poll_interval=P,
        heartbeat_interval=None,
        watcher_interval=None,
        job_duration=JOB,
    )
    assert (
        full["busy_workers"] == WORKERS
        and full["heartbeat"] == full["watcher"] == full["idle_polls"] == 0
    )


# ---- recovery latency distribution ---------------------------------------------------------------


def _recovery_scenarios(watcher: bool, replications: int) -> list[Scenario]:
    """The scenario of tests/model/test_recovery_theory.py at uniformly random crash times."""
    crash_times = np.random.default_rng(7).uniform(100.0, 200.0, replications)
    return [
        recovery_setup.recovery_scenario(at, seed, watcher=watcher)
        for seed, at in enumerate(crash_times, start=100)
    ]


@pytest.mark.slow  # replications: make test only
@pytest.mark.parametrize("watcher", [True, False], ids=["watcher", "claim-takes-expired"])
def test_recovery_latency_distribution_matches_simulation(watcher):
    simulated = np.array(
        [run(s).recoveries["latency"].iloc[0] for s in _recovery_scenarios(watcher, 200)]
    )
    assumptions = dict(
        ttl=recovery_setup.TTL,
        heartbeat_interval=recovery_setup.H,
        poll_interval=recovery_setup.P,
        watcher_interval=recovery_setup.W if watcher else None,
        latency=LAT,
    )
    theory = closed_forms.recovery_latency_samples(100_000, seed=1, **assumptions)
    assert theory.mean() == pytest.approx(
        closed_forms.recovery_latency_mean(**assumptions), abs=0.1
    )
    assert theory.var() == pytest.approx(
        closed_forms.recovery_latency_variance(
            **{k: v for k, v in assumptions.items() if k != "ttl"}
        ),
        rel=0.02,
    )
    result = stats.ks_2samp(simulated, theory)
    assert result.pvalue > 0.01, f"KS statistic {result.statistic:.3f}, p = {result.pvalue:.4f}"
    # the CDF agrees at the simulated quartiles within the Dvoretzky-Kiefer-Wolfowitz 99% band
    band = np.sqrt(np.log(2 / 0.01) / (2 * len(simulated)))
    quartiles = np.quantile(simulated, [0.25, 0.5, 0.75])
    assert np.all(
        np.abs(closed_forms.recovery_latency_cdf(quartiles, **assumptions) - [0.25, 0.5, 0.75])
        < band
    )
