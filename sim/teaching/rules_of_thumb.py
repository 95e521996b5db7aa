"""Two settings rules of thumb, measured (the cheat sheet, notebook 11; figures in sim.plots.rules).

- Avoid a watcher interval that is a multiple of the heartbeat interval. A job the watcher
  requeued is claimed just after a watcher tick; its new owner renews every h from that claim,
  so if it crashes too, its lease ends at (tick + a short poll + j h + L). When W is a multiple
  of h, that end can only fall at W/h phases of the watcher's cycle, h apart, right after a
  tick (if L is a multiple of h too): the wait for the next tick takes the values W, W - h, ...,
  h (less the poll), mean W/2 + h/2 instead of the formula's W/2. `repeat_recovery()` measures
  the second recovery of a job whose owners crash one after another.
- Use the simulation, not the closed form, for percentiles or above light load. The closed form
  (sim.theory.closed_forms.recovery_latency_mean) is a mean under light load (idle pollers).
  `load_recovery()` measures mean and 95th percentile against it as the workers get busier.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd

from sim.scenario.dists import Dist
from sim.scenario.settings import Faults, Policy, Scenario, ScriptedCrash, Workload, validate
from sim.theory import closed_forms
from sim.theory.stats import mean_ci

LATENCY = 0.002  # constant statement latency of both experiments (s)


def repeat_recovery_scenario(
    *,
    watcher_interval: float,
    heartbeat_interval: float = 10.0,
    ttl: float = 30.0,
    poll_interval: float = 2.0,
    seed: int = 1,
) -> Scenario:
    """One endless job and three workers; the job's owner crashes at 1000 s and for good, then
    the worker that recovered it crashes at 1500 s. The job arrives at a random time (mean 100 s),
    so the first crash falls at a random phase; the second owner's renewals start from its claim,
    which follows a watcher tick."""
    return validate(
        Scenario(
            name="repeat-recovery",
            description=(
                "Two crashes of one job's successive owners: is the second recovery phase-locked?"
            ),
            workload=Workload(
                jobs=1,
                arrival="poisson",
                rate=1.0 / 100.0,
                processing=Dist.constant(1e7),
                psp_call=Dist.constant(0.0),
                statement_latency=Dist.constant(LATENCY),
            ),
            policy=Policy(
                workers=3,
                poll_interval=poll_interval,
                lease_ttl=ttl,
                heartbeat_interval=heartbeat_interval,
                watcher_interval=watcher_interval,
                claim_takes_expired=False,
            ),
            faults=Faults(
                crashes=(ScriptedCrash(at=1000.0, job=1), ScriptedCrash(at=1500.0, job=1)),
                restart_delay=Dist.constant(1e7),
            ),
            horizon=1500.0 + ttl + 2 * watcher_interval + 4 * poll_interval + 10.0,
            seed=seed,
        )
    )


def repeat_recovery(
    watcher_intervals: Iterable[float],
    *,
    heartbeat_interval: float = 10.0,
    ttl: float = 30.0,
    poll_interval: float = 2.0,
    replications: int = 40,
    seed: int = 1,
) -> pd.DataFrame:
    """Per watcher interval: the mean second recovery latency (95% CI over `replications` seeds),
    the closed form's mean (one idle poller left), the excess over it, and whether W is a
    multiple of h."""
    from sim import runner

    rows = []
    for w in watcher_intervals:
        latencies = []
        for k in range(replications):
            run = runner.run(
                repeat_recovery_scenario(
                    watcher_interval=float(w),
                    heartbeat_interval=heartbeat_interval,
                    ttl=ttl,
                    poll_interval=poll_interval,
                    seed=seed + k,
                )
            )
            second = run.recoveries.sort_values("crash_at")["latency"]
            latencies.append(float(second.iloc[1]) if len(second) > 1 else np.nan)
        mean, low, high, n = mean_ci(latencies)
        theory = closed_forms.recovery_latency_mean(
            ttl=ttl,
            heartbeat_interval=heartbeat_interval,
            poll_interval=poll_interval,
            watcher_interval=float(w),
            idle_pollers=1,
            latency=LATENCY,
        )
        ratio = float(w) / heartbeat_interval
        rows.append(
            {
                "watcher_interval": float(w),
                "heartbeat_interval": heartbeat_interval,
                "n": n,
                "replications": replications,
                "mean": mean,
                "ci_low": low,
                "ci_high": high,
                "theory": theory,
                "excess": mean - theory,
                "multiple": bool(abs(ratio - round(ratio)) < 1e-9),
            }
        )
    return pd.DataFrame(rows)


def loaded_queue(
    utilization: float,
    *,
    workers: int = 4,
    work: float = 60.0,
    jobs: int = 200,
    crash_rate: float = 3.0,
    seed: int = 1,
) -> Scenario:
    """Jobs of `work` seconds (longer than the heartbeat cycle, so a crash falls at a random
    renewal phase) arriving at a Poisson rate that keeps the workers `utilization` busy; workers
    crash `crash_rate` times per worker-hour and are back 20 s later (before the lease ends)."""
    rate = utilization * workers / work
    return validate(
        Scenario(
            name="loaded-queue",
            description=(
                "Recovery latency as the workers get busier: where the light-load closed "
                "form stops holding."
            ),
            workload=Workload(
                jobs=jobs,
                arrival="poisson",
                rate=rate,
                processing=Dist.constant(work),
                psp_call=Dist.constant(0.0),
                statement_latency=Dist.constant(LATENCY),
            ),
            policy=Policy(
                workers=workers,
                poll_interval=2.0,
                lease_ttl=30.0,
                heartbeat_interval=10.0,
                watcher_interval=30.0,
                claim_takes_expired=False,
            ),
            faults=Faults(crash_rate=crash_rate, restart_delay=Dist.constant(20.0)),
            horizon=jobs / rate + 600.0,
            seed=seed,
        )
    )


def load_recovery(
    utilizations: Iterable[float], *, replications: int = 6, jobs: int = 200, seed: int = 1
) -> pd.DataFrame:
    """Per utilization: simulated mean and 95th percentile of the recovery latency (95% CIs over
    replications), beside the closed form's mean and the 95th percentile of its light-load
    distribution (every worker idle when the job becomes claimable)."""
    from sim.sweeps import sweep

    rows = []
    for u in utilizations:
        scenario = loaded_queue(float(u), jobs=jobs)
        result = sweep(
            scenario,
            {},
            replications=replications,
            seed=seed,
            metrics=["recoveries", "recovery_latency_mean", "recovery_latency_p95"],
            executor="serial",
            progress=False,
        )
        a = result.aggregate().iloc[0]
        p = scenario.policy
        light: dict[str, Any] = dict(
            ttl=p.lease_ttl,
            heartbeat_interval=p.heartbeat_interval,
            poll_interval=p.poll_interval,
            watcher_interval=p.watcher_interval,
            idle_pollers=p.workers,
            latency=LATENCY,
        )
        rows.append(
            {
                "utilization": float(u),
                "runs": int(a["n"]),
                "recoveries": float(result.runs["recoveries"].sum()),
                "mean": a["recovery_latency_mean_mean"],
                "mean_ci_low": a["recovery_latency_mean_ci_low"],
                "mean_ci_high": a["recovery_latency_mean_ci_high"],
                "p95": a["recovery_latency_p95_mean"],
                "p95_ci_low": a["recovery_latency_p95_ci_low"],
                "p95_ci_high": a["recovery_latency_p95_ci_high"],
                "closed_form_mean": closed_forms.recovery_latency_mean(**light),
                "closed_form_p95": float(
                    np.quantile(
                        closed_forms.recovery_latency_samples(100_000, seed=seed, **light), 0.95
                    )
                ),
            }
        )
    frame = pd.DataFrame(rows)
    frame["mean_inside"] = frame["closed_form_mean"].between(
        frame["mean_ci_low"], frame["mean_ci_high"]
    )
    return frame
