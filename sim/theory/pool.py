"""What a pool of workers can carry: capacity in jobs/s, utilisation at an arrival rate, and how
many workers a rate needs, so that no advice quotes a per-day figure for a load the workers cannot
carry.

A worker spends on each job its processing time plus ROUND_TRIPS_PER_JOB statement round trips
(the claim's select and update, the dedup marker, the ledger entry, the completion and the commit);
heartbeats go on a connection of their own and cost it nothing. Crashes take capacity twice: the
worker is away for its restart delay, and the crashed job's work so far is done again (on average
the age of a job in progress, E[T^2] / 2 E[T]). So with c crashes per worker-second and restart
delay R,

    capacity = workers (1 - c R) / (E[S] (1 + c E[A])),   E[S] = E[T] + round trips x latency

and utilisation = arrival rate / capacity: the share of the workers' time spent on jobs, the load
that sim.theory.closed_forms's busy-worker formulas take (offered load = utilisation x workers).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from sim.errors import ConfigError
from sim.scenario.dists import Dist
from sim.support.in_words import count, duration, percent
from sim.theory import closed_forms

ROUND_TRIPS_PER_JOB = 6  # tests/theory/test_pool.py counts them in a run
WARN_UTILISATION = 0.8  # from here a backlog builds quickly and crashed jobs wait for busy workers
ASSUMED_UTILISATION = 0.5  # the load assumed when no arrival rate is given
SIZED_UTILISATION = 0.7  # the utilisation a suggested pool size aims for


@dataclass(frozen=True)
class Pool:
    """Workers, the jobs they run, and the faults that take their time."""

    workers: int
    job: Dist  # processing time of one job
    latency: float = 0.0  # one statement round trip, seconds
    crash_rate: float = 0.0  # per worker-hour
    restart_delay: float = 5.0  # seconds a crashed worker is away

    @property
    def job_seconds(self) -> float:
        """Mean worker time per job without faults: processing plus its statement round trips."""
        return self.job.mean_value() + ROUND_TRIPS_PER_JOB * self.latency

    @property
    def per_worker(self) -> float:
        """Jobs per second one worker carries, crashes and restarts included."""
        c = self.crash_rate / 3600.0
        away = max(0.0, 1.0 - c * self.restart_delay)
        redone = 1.0 + c * closed_forms.worked_at_crash_mean(self.job)
        return away / (self.job_seconds * redone)

    @property
    def capacity(self) -> float:
        """Jobs per second the whole pool carries at 100% utilisation."""
        return self.workers * self.per_worker

    def utilisation(self, arrival_rate: float) -> float:
        return arrival_rate / self.capacity

    def offered_load(self, arrival_rate: float) -> float:
        """Busy workers on average (Erlangs): utilisation x workers."""
        return arrival_rate / self.per_worker

    def workers_for(self, arrival_rate: float, utilisation: float = SIZED_UTILISATION) -> int:
        """The fewest workers that carry `arrival_rate` at or below `utilisation`."""
        return max(1, math.ceil(arrival_rate / (self.per_worker * utilisation) - 1e-9))

    def describe(self) -> str:
        """'4 workers carry 1.78 jobs/s (mean job 2.24 s)'."""
        verb = "carries" if self.workers == 1 else "carry"
        return (
            f"{count(self.workers, 'worker')} {verb} {self.capacity:.3g} jobs/s "
            f"(mean job {duration(self.job_seconds)})"
        )

    def capacity_words(self) -> str:
        """'the 1.78 jobs/s that 4 workers carry (mean job 2.24 s)'."""
        verb = "carries" if self.workers == 1 else "carry"
        return (
            f"the {self.capacity:.3g} jobs/s that {count(self.workers, 'worker')} {verb} "
            f"(mean job {duration(self.job_seconds)})"
        )

    def utilisation_with(self, workers: int, arrival_rate: float) -> float:
        return arrival_rate / (workers * self.per_worker)

    def refuse_overload(self, arrival_rate: float) -> None:
        """ConfigError naming the workers (--workers) and the capacity when the rate is too much."""
        u = self.utilisation(arrival_rate)
        if u < 1:
            return
        need = self.workers_for(arrival_rate)
        raise ConfigError(
            f"workers: {self.describe()}, but the arrival rate is {arrival_rate:.3g} jobs/s, "
            f"{percent(u)} of that; {need} workers (--workers {need}) would be "
            f"{percent(self.utilisation_with(need, arrival_rate))} busy, or give a lower arrival "
            "rate"
        )

    def load_warning(self, arrival_rate: float) -> str | None:
        """A warning from WARN_UTILISATION on, with the utilisation; None below it."""
        u = self.utilisation(arrival_rate)
        if u < WARN_UTILISATION:
            return None
        need = self.workers_for(arrival_rate)
        return (
            f"utilisation {percent(u)}: {arrival_rate:.3g} jobs/s against "
            f"{self.capacity_words()}; above {percent(WARN_UTILISATION)} a backlog builds quickly "
            "and a crashed job waits for a busy worker to finish, so recovery is slower and less "
            f"predictable; {need} workers would be "
            f"{percent(self.utilisation_with(need, arrival_rate))} busy"
        )
