"""Recovery latency against theory (sim.theory.closed_forms), over 200 replications with fixed
seeds.

Assumptions met by the scenario: light load (one job, one idle poller: the other worker), the crash
falls at a uniformly random time long after the claim (random heartbeat phase), random poll and
watcher phases, a constant 2 ms statement latency, the crashed worker never comes back.
"""

import numpy as np
from scipy import stats

from sim import run
from sim.scenario.dists import Dist
from sim.scenario.settings import Faults, Policy, Scenario, ScriptedCrash, Workload
from sim.theory import closed_forms

TTL, H, W, P, LAT = 30.0, 10.0, 30.0, 2.0, 0.002
REPLICATIONS = 200


def recovery_scenario(crash_at: float, seed: int, *, watcher: bool) -> Scenario:
    """One endless job, two workers; the owner crashes at `crash_at`, long after the claim, and
    never returns; the other worker is the idle poller. With no watcher the claim takes expired
    leases."""
    return Scenario(
        name="recovery-theory",
        workload=Workload(
            jobs=1,
            processing=Dist.constant(10_000.0),
            psp_call=Dist.constant(0.0),
            statement_latency=Dist.constant(LAT),
        ),
        policy=Policy(
            workers=2,
            poll_interval=P,
            lease_ttl=TTL,
            heartbeat_interval=H,
            watcher=watcher,
            watcher_interval=W,
            claim_takes_expired=not watcher,
        ),
        faults=Faults(
            crashes=(ScriptedCrash(at=float(crash_at), job=1),), restart_delay=Dist.constant(1e6)
        ),
        horizon=float(crash_at) + TTL + W + P + 5,
        seed=seed,
    )


def _recovery_latencies(*, watcher: bool) -> np.ndarray:
    crash_times = np.random.default_rng(2026).uniform(100.0, 200.0, REPLICATIONS)
    latencies = []
    for seed, crash_at in enumerate(crash_times, start=1):
        recoveries = run(recovery_scenario(crash_at, seed, watcher=watcher)).recoveries
        assert len(recoveries) == 1
        latencies.append(recoveries["latency"].iloc[0])
    values = np.asarray(latencies)
    assert not np.isnan(values).any(), "every crash must be recovered within the horizon"
    return values


def _assert_mean_within_ci(values: np.ndarray, predicted: float) -> None:
    mean, sem = values.mean(), stats.sem(values)
    low, high = stats.t.interval(0.99, len(values) - 1, loc=mean, scale=sem)
    assert low <= predicted <= high, (
        f"predicted {predicted:.3f} s outside the 99% CI [{low:.3f}, {high:.3f}] of the mean"
    )


def test_watcher_recovery_matches_L_minus_h_half_plus_W_half_plus_P_half():
    values = _recovery_latencies(watcher=True)
    predicted = closed_forms.recovery_latency_mean(
        ttl=TTL, heartbeat_interval=H, poll_interval=P, watcher_interval=W, latency=LAT
    )
    assert abs(predicted - (TTL - H / 2 + W / 2 + P / 2)) < 0.02
    _assert_mean_within_ci(values, predicted)
    variance = closed_forms.recovery_latency_variance(
        heartbeat_interval=H, poll_interval=P, watcher_interval=W, latency=LAT
    )
    assert (
        0.7 < values.var(ddof=1) / variance < 1.4
    )  # chi-square 99% band for 199 d.o.f. is [0.75, 1.29]


def test_claim_takes_expired_recovery_matches_L_minus_h_half_plus_P_half():
    values = _recovery_latencies(watcher=False)
    predicted = closed_forms.recovery_latency_mean(
        ttl=TTL, heartbeat_interval=H, poll_interval=P, latency=LAT
    )
    _assert_mean_within_ci(values, predicted)
    # the job can never come back before its lease has run out: at least L - h - latency after the
    # crash
    assert values.min() >= TTL - H - 2 * LAT
