"""Closed-form predictions that tests and plots put beside simulated results.

Recovery latency: the owner crashes at C while holding a job whose last
renewal was at R, so its lease ends at E = R + L. Assumptions: the crash falls at a random phase
of the heartbeat cycle, so C - R ~ U(0, h') where h' = h + one statement latency (the heartbeat
loop sleeps h after each renewal); light load: k workers are idle and poll with independent
random phases every P' = P + one latency (a poll is a select, then a sleep of P); the watcher,
when it does the requeue, ticks every W' = W + one latency from a random phase. Then

    recovery = (E - C) + watcher wait + poll wait + claim statement
    mean     = L - h'/2 + [W'/2 + latency] + P'/(k + 1) + latency

Without heartbeats R is the claim time and E - C = L - (time already worked at the crash).

Where the closed form holds, exactly: (1) jobs much longer than h (else the time since the last
renewal is shorter than h'/2: time_since_renewal_mean gives it for any job length); (2) k idle
pollers and no busy worker that could claim first (else the wait for a free poller is the minimum of
the idle pollers' phases and the busy workers' remaining work: poll_wait_mean, which gives
P'/(k + 1) with no busy worker); (3) the watcher's phase independent of the heartbeat phase (a
watcher interval that is a multiple of h' with a fixed phase can lock to it and lengthen repeat
recoveries; not modelled here). recovery_latency_mean takes `since_renewal` and `busy_workers` +
`job_duration` for (1) and (2); live mode's default check (sim.live_mode.settings: 4 busy workers,
exponential jobs of mean 1 s, h = 0.5 s) needs both.

Beside the recovery latency (mean, variance, and its distribution by sampling), this module
predicts the false-expiry probability of a lease under stop-the-world pauses, and the DB load of
the lease machinery (heartbeats, watcher ticks, idle polls); each function states its assumptions.
Rates of faults are per worker-hour, as in sim.scenario.settings.Faults; times are seconds.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
from scipy import special

from sim.scenario.dists import Dist
from sim.support.scipy_steps import (
    convolve,
    lognormal_cdf,
    lognormal_ppf,
    poisson_pmf,
    poisson_ppf,
    scipy_stats,
)

_GRID = 4096  # quantile points used for expectations over a parametric job-duration distribution


def recovery_latency_mean(
    *,
    ttl: float,
    heartbeat_interval: float | None,
    poll_interval: float,
    watcher_interval: float | None = None,
    idle_pollers: int = 1,
    latency: float = 0.0,
    worked_at_crash: float | None = None,
    since_renewal: float | None = None,
    busy_workers: int = 0,
    job_duration: Dist | None = None,
) -> float:
    """Mean time from an owner's crash to the job's next claim (see the module docstring).

    heartbeat_interval=None means no heartbeat: pass worked_at_crash (mean time worked at the
    crash). watcher_interval=None means the claim itself takes expired leases (no watcher step).
    since_renewal: the mean time since the last renewal at the crash, for short jobs
    (time_since_renewal_mean); default h'/2, the long-job limit. busy_workers (with job_duration):
    workers busy when the job becomes claimable, each of which claims it when its job ends
    (poll_wait_mean); default none, the light-load case.
    """
    if heartbeat_interval is None:
        if worked_at_crash is None:
            raise ValueError("without heartbeats, give worked_at_crash")
        lease_left = ttl - worked_at_crash
    else:
        if heartbeat_interval >= ttl:
            raise ValueError("the formula needs heartbeat_interval < ttl")
        lease_left = ttl - (
            (heartbeat_interval + latency) / 2 if since_renewal is None else since_renewal
        )
    watcher_wait = 0.0 if watcher_interval is None else (watcher_interval + latency) / 2 + latency
    poll_wait = poll_wait_mean(
        poll_interval=poll_interval,
        idle_pollers=idle_pollers,
        busy_workers=busy_workers,
        job_duration=job_duration,
        latency=latency,
    )
    return lease_left + watcher_wait + poll_wait + latency


def poll_wait_mean(
    *,
    poll_interval: float,
    idle_pollers: int = 1,
    busy_workers: int = 0,
    job_duration: Dist | None = None,
    latency: float = 0.0,
) -> float:
    """Mean wait from the moment a job becomes claimable to the claim that takes it.

    Idle pollers poll every P' = P + latency from independent uniform phases; a busy worker claims
    the job when its current job ends (it polls at once, and the job, older than the backlog, comes
    first), after the residual of a job in progress, whose survival is
    S_e(w) = int_w^inf S(t) dt / E[T] (exponential jobs: again exponential, mean E[T]). The wait is
    the first of them: P(wait > w) = (1 - w/P')^k * S_e(w)^b, so the mean is P'/(k + 1) with no busy
    worker and E[T]/b for b busy workers with exponential jobs and no idle poller. Assumes the busy
    workers' jobs are not cut short (by crashes) before they end.
    """
    cycle = poll_interval + latency
    if busy_workers <= 0:
        return cycle / (idle_pollers + 1)
    if job_duration is None:
        raise ValueError(
            "busy workers need job_duration (their remaining work decides when they claim)"
        )
    mean_job = job_duration.mean_value()
    if job_duration.kind == "exponential" and idle_pollers == 0:
        return mean_job / busy_workers
    upper = cycle if idle_pollers > 0 else _upper(job_duration)
    w = np.linspace(0.0, upper, 4097)
    s = survival(job_duration, w)
    # S_e(w) = (E[T] - int_0^w S) / E[T], the integral by the trapezoid rule on the grid
    integral = np.concatenate([[0.0], np.cumsum((s[1:] + s[:-1]) / 2 * np.diff(w))])
    residual = np.clip(1.0 - integral / mean_job, 0.0, 1.0)
    tail = residual**busy_workers * (
        np.clip(1.0 - w / cycle, 0.0, 1.0) ** idle_pollers if idle_pollers else 1.0
    )
    return float(np.sum((tail[1:] + tail[:-1]) / 2 * np.diff(w)))


def recovery_latency_variance(
    *,
    heartbeat_interval: float,
    poll_interval: float,
    watcher_interval: float | None = None,
    idle_pollers: int = 1,
    latency: float = 0.0,
) -> float:
    """Variance of the recovery latency under the same assumptions (sum of independent uniforms;
    the poll wait is the minimum of k uniforms)."""
    h, p, k = heartbeat_interval + latency, poll_interval + latency, idle_pollers
    variance = h**2 / 12 + p**2 * k / ((k + 1) ** 2 * (k + 2))
    if watcher_interval is not None:
        variance += (watcher_interval + latency) ** 2 / 12
    return variance


def recovery_latency_samples(
    n: int,
    *,
    ttl: float,
    heartbeat_interval: float | None,
    poll_interval: float,
    watcher_interval: float | None = None,
    idle_pollers: int = 1,
    latency: float = 0.0,
    worked_at_crash: float | Dist | None = None,
    seed: int = 0,
) -> np.ndarray:
    """`n` draws of the recovery latency under the assumptions of the module docstring.

    recovery = (L - U1 h') + [W' U2 + latency] + P' min(U3 .. U(k+2)) + latency, with independent
    uniforms U (h' = h + latency, W' = W + latency, P' = P + latency, k idle pollers). Without
    heartbeats (heartbeat_interval=None) the first term is L - A, A = worked_at_crash (a number,
    a Dist to draw from, or n draws such as time_since_renewal_samples), clipped at 0 (a lease that
    had already run out is claimable at once). Their mean and variance are recovery_latency_mean and
    recovery_latency_variance; use np.quantile on the draws for percentiles, or recovery_latency_cdf
    for the CDF.
    """
    rng = np.random.default_rng(seed)
    if heartbeat_interval is None:
        if worked_at_crash is None:
            raise ValueError("without heartbeats, give worked_at_crash")
        if isinstance(worked_at_crash, Dist):
            worked = worked_at_crash.sampler(rng)
            age = np.fromiter((worked() for _ in range(n)), float, n)
        elif np.ndim(worked_at_crash):
            age = np.asarray(worked_at_crash, dtype=float)
            if len(age) != n:
                raise ValueError("worked_at_crash draws must number n")
        else:
            age = np.full(n, float(worked_at_crash))
        lease_left = np.maximum(ttl - age, 0.0)
    else:
        if heartbeat_interval >= ttl:
            raise ValueError("the formula needs heartbeat_interval < ttl")
        lease_left = ttl - rng.uniform(0.0, heartbeat_interval + latency, n)
    total = lease_left + latency
    if watcher_interval is not None:
        total += rng.uniform(0.0, watcher_interval + latency, n) + latency
    total += (poll_interval + latency) * rng.uniform(0.0, 1.0, (max(1, idle_pollers), n)).min(
        axis=0
    )
    return total


def recovery_latency_cdf(x, *, n: int = 200_000, seed: int = 0, **assumptions) -> np.ndarray:
    """P(recovery latency <= x), estimated from `n` draws
    of recovery_latency_samples(**assumptions)."""
    draws = np.sort(recovery_latency_samples(n, seed=seed, **assumptions))
    return np.searchsorted(draws, np.asarray(x, dtype=float), side="right") / n


# ---- recovery under load -------------------------------------------------------------------------


def busy_at_crash(workers: int, offered_load: float) -> np.ndarray:
    """P(b of the other workers are busy when a job's owner crashes), for b = 0 .. workers - 1.

    The busy count is M/M/c's (Erlang: P(k busy) proportional to a^k / k! below c, and all c busy
    with the queue's whole mass, a^c / c! / (1 - a / c)), size-biased by k because a crash strikes a
    busy worker with probability proportional to their number; the crashed one is then not counted.
    offered_load a = utilisation x workers (busy workers on average) must be below workers. The bias
    is large: at 56% utilisation of 4 workers, the other 3 are all busy 42% of the time, not 18%.
    """
    c = int(workers)
    if c < 1:
        raise ValueError("workers must be at least 1")
    if not 0 <= offered_load < c:
        raise ValueError("offered_load must be >= 0 and below workers (a queue that keeps up)")
    if offered_load == 0:
        return np.eye(1, c)[0]
    k = np.arange(c + 1, dtype=float)
    log_terms = k * math.log(offered_load) - special.gammaln(k + 1)
    log_terms[c] -= math.log1p(-offered_load / c)
    weights = k * np.exp(log_terms - log_terms.max())
    return weights[1:] / weights.sum()


@dataclass(frozen=True)
class CrashPollWait:
    """The wait from a crashed owner's job becoming claimable to its claim, in a loaded pool.

    Then b of the other workers are busy (busy_at_crash) and the rest idle. An idle worker polls
    every P' = P + latency from a random phase; a busy one claims the job when its own job ends,
    after the residual of a job in progress (as in poll_wait_mean; the crashed job is older than any
    backlog, so it comes first). The crashed worker is away for restart_delay R, then polls at once:
    if the job became claimable D < R after the crash, the wait is at most R - D; from R on, the
    crashed worker is one more poller, idle unless the others were all busy and a backlog waited
    (M/M/c: probability a / c), when it took a job of its own. Build it once per load; mean(D) and
    samples(D) are cheap. Against the simulation (tests/theory/test_recovery_under_load) the
    recovery it gives is 2-6% low at 50-80% utilisation, where the idle-pollers form was 9-15% low:
    busy workers' remaining work is correlated (long jobs keep them busy together), and this takes
    it as independent.
    """

    grid: np.ndarray  # wait values w
    away: np.ndarray  # P(wait > w) while the crashed worker is away (workers - 1 pollers)
    back: np.ndarray  # P(wait > w) once it is back (workers pollers)
    restart_delay: float

    @classmethod
    def build(
        cls,
        *,
        workers: int,
        offered_load: float,
        poll_interval: float,
        job_duration: Dist,
        latency: float = 0.0,
        restart_delay: float = 5.0,
    ) -> CrashPollWait:
        cycle = poll_interval + latency
        longest = max(cycle, restart_delay if math.isfinite(restart_delay) else 0.0)
        top = max(longest, _upper(job_duration))
        grid = np.unique(
            np.concatenate(
                [
                    np.linspace(0.0, cycle, 1025),
                    np.linspace(0.0, longest, 1025),
                    np.geomspace(cycle / 1000, top, 2049),
                ]
            )
        )
        residual = _residual_survival(job_duration, grid)
        idle = np.clip(1.0 - grid / cycle, 0.0, 1.0)
        share = busy_at_crash(workers, offered_load)

        def tail(back: bool) -> np.ndarray:
            out = np.zeros(len(grid))
            for b in np.flatnonzero(share > 1e-15):
                out += share[b] * residual**b * idle ** (workers - 1 - b)
            if back:  # the worker back from its restart is idle, unless it took a job of a backlog
                queued = (offered_load / workers) * share[-1] * residual ** (workers - 1)
                out = out * idle + queued * (residual - idle)
            return out

        return cls(grid, tail(False), tail(True), float(restart_delay))

    def mean(self, claimable_after) -> float:
        """Mean wait for a job claimable `claimable_after` seconds after its owner's crash (a
        number, or draws of it: then the mean over them)."""
        d = np.atleast_1d(np.asarray(claimable_after, dtype=float))
        within = np.interp(np.maximum(self.restart_delay - d, 0.0), self.grid, self._away_integral)
        back = self._back_mean
        return float(np.mean(np.where(d >= self.restart_delay, back, within)))

    @functools.cached_property
    def _away_integral(self) -> np.ndarray:
        """The integral of `away` up to each grid point (once per wait: mean is called often)."""
        return _cumulative(self.grid, self.away)

    @functools.cached_property
    def _back_mean(self) -> float:
        return _integral(self.grid, self.back, self.grid[-1])

    def samples(self, claimable_after: np.ndarray, seed: int = 0) -> np.ndarray:
        """One draw of the wait per entry of `claimable_after` (inverse transform on the grid)."""
        d = np.asarray(claimable_after, dtype=float)
        u = np.random.default_rng(seed).uniform(0.0, 1.0, len(d))
        back = d >= self.restart_delay
        out = np.empty(len(d))
        out[back] = np.interp(u[back], self.back[::-1], self.grid[::-1])
        away = np.interp(u[~back], self.away[::-1], self.grid[::-1])
        out[~back] = np.minimum(away, self.restart_delay - d[~back])
        return out


def _residual_survival(job: Dist, w: np.ndarray) -> np.ndarray:
    """P(the rest of a job in progress > w) = 1 - E[min(T, w)] / E[T] (exact for an empirical T)."""
    values, weights = _support(job)
    order = np.argsort(values)
    values, weights = values[order], weights[order]
    mean = float(np.sum(weights * values))
    if mean <= 0:
        return np.zeros(len(w))
    below = np.searchsorted(values, w, side="right")
    partial = np.concatenate([[0.0], np.cumsum(weights * values)])[below]
    above = 1.0 - np.concatenate([[0.0], np.cumsum(weights)])[below]
    return np.clip(1.0 - (partial + w * above) / mean, 0.0, 1.0)


def _cumulative(grid: np.ndarray, tail: np.ndarray) -> np.ndarray:
    """The integral of `tail` from 0 to each grid point (trapezoids)."""
    return np.concatenate([[0.0], np.cumsum((tail[1:] + tail[:-1]) / 2 * np.diff(grid))])


def _integral(grid: np.ndarray, tail: np.ndarray, upto: float) -> float:
    """The integral of `tail` from 0 to `upto` (trapezoids on the grid, the last one cut)."""
    inside = grid < upto
    x = np.append(grid[inside], upto)
    y = np.append(tail[inside], np.interp(upto, grid, tail))
    return float(np.sum((y[1:] + y[:-1]) / 2 * np.diff(x)))


# ---- distributions as functions ------------------------------------------------------------------


def cdf(dist: Dist, x) -> np.ndarray:
    """P(X <= x) for a Dist, vectorised over x (empirical: the fraction of samples <= x)."""
    x = np.asarray(x, dtype=float)
    match dist.kind:
        case "constant":
            return (x >= dist.value).astype(float)
        case "exponential":
            return scipy_stats().expon.cdf(x, scale=dist.mean)
        case "uniform":
            if dist.high == dist.low:
                return (x >= dist.low).astype(float)
            return scipy_stats().uniform.cdf(x, loc=dist.low, scale=dist.high - dist.low)
        case "lognormal":
            return lognormal_cdf(x, dist.sigma, dist.median)
        case "pareto":
            return scipy_stats().pareto.cdf(x, dist.alpha, scale=dist.scale)
        case "empirical":
            samples = np.sort(np.asarray(dist.samples, dtype=float))
            return np.searchsorted(samples, x, side="right") / len(samples)
    raise ValueError(f"unknown distribution kind {dist.kind!r}")


def survival(dist: Dist, x) -> np.ndarray:
    """P(X > x), vectorised over x."""
    return 1.0 - cdf(dist, x)


def _support(dist: Dist, grid: int = _GRID) -> tuple[np.ndarray, np.ndarray]:
    """Points and weights (summing to 1) that stand for the distribution in an expectation."""
    if dist.kind == "empirical":
        values = np.asarray(dist.samples, dtype=float)
        return values, np.full(len(values), 1.0 / len(values))
    if dist.kind == "constant":
        return np.array([dist.value]), np.array([1.0])
    q = (np.arange(grid) + 0.5) / grid
    match dist.kind:
        case "exponential":
            values = scipy_stats().expon.ppf(q, scale=dist.mean)
        case "uniform":
            values = dist.low + q * (dist.high - dist.low)
        case "lognormal":
            values = lognormal_ppf(q, dist.sigma, dist.median)
        case "pareto":
            values = scipy_stats().pareto.ppf(q, dist.alpha, scale=dist.scale)
        case _:
            raise ValueError(f"unknown distribution kind {dist.kind!r}")
    return values, np.full(grid, 1.0 / grid)


def _expect(dist: Dist, fn, below: float | None = None, above_value: float = 0.0) -> float:
    """E[fn(X)]; with `below`, fn is applied where X <= below and X > below counts `above_value`
    (its probability is taken from the CDF, so a thin tail beyond `below` is not lost to the
    grid)."""
    if below is None or dist.kind in ("empirical", "constant"):
        values, weights = _support(dist)
        if below is None:
            return float(np.sum(weights * fn(values)))
        inside = values <= below
        result = np.zeros(len(values))
        result[inside] = fn(values[inside])
        result[~inside] = above_value
        return float(np.sum(weights * result))
    p_inside = float(cdf(dist, below))
    if p_inside <= 0:
        return above_value
    q = (np.arange(_GRID) + 0.5) / _GRID * p_inside
    values = np.minimum(_ppf(dist, q), below)
    return p_inside * float(np.mean(fn(values))) + (1 - p_inside) * above_value


def _ppf(dist: Dist, q: np.ndarray) -> np.ndarray:
    match dist.kind:
        case "exponential":
            return scipy_stats().expon.ppf(q, scale=dist.mean)
        case "uniform":
            return dist.low + q * (dist.high - dist.low)
        case "lognormal":
            return lognormal_ppf(q, dist.sigma, dist.median)
        case "pareto":
            return scipy_stats().pareto.ppf(q, dist.alpha, scale=dist.scale)
    raise ValueError(f"no quantile function for {dist.kind!r}")


def _upper(dist: Dist) -> float:
    """A value the distribution exceeds with negligible probability (< 1e-12)."""
    match dist.kind:
        case "constant":
            return dist.value
        case "empirical":
            return max(dist.samples)
        case "uniform":
            return dist.high
    return float(_ppf(dist, np.array([1 - 1e-12]))[0])


# ---- false expiry --------------------------------------------------------------------------------


def false_expiry_probability(
    *,
    ttl: float,
    heartbeat_interval: float | None,
    job_duration: Dist,
    pause_rate: float,
    pause_duration: Dist,
    latency: float = 0.0,
) -> float:
    """Probability that a lease lapses while its owner is alive and still working on the job.

    ttl L, heartbeat_interval h (None: no heartbeat), job_duration T (the time a job holds its
    worker when nothing pauses it), pause_rate (stop-the-world pauses per worker-hour, a Poisson
    process) and pause_duration D. Per lease, which is per job when the result is small.

    With heartbeats (h' = h + latency < L): renewals come every h' (the claim, then heartbeats); a
    pause freezes the worker and its heartbeat; the overdue heartbeat renews as the pause ends. A
    pause that starts a time phi after the last renewal therefore lapses the lease iff
    D > L - latency - phi. Pauses start in the job's working time at rate lambda, each at a phase
    phi = (working time at its start) mod h', so the expected number of lapsing pauses in a job
    of duration T is lambda * I(T), I(T) = integral over u in [0, T) of
    P(D > L - latency - u mod h'), and P(lapse | T) = 1 - exp(-lambda I(T)); the result averages
    that over T.

    Without heartbeats (or with h' >= L, when the first heartbeat comes too late anyway) the lease
    lapses iff the job's elapsed time, T plus the pauses during it, exceeds L: always when T > L;
    otherwise iff the N ~ Poisson(lambda T) pauses in its working time add up to more than L - T
    (a compound Poisson sum, computed by convolving the pause-duration distribution on a grid).

    Assumptions: pauses are rare enough not to overlap (pause_rate x mean D << 1 hour); a pause
    does not end a job (work and heartbeats resume after it); statement latencies are small next
    to h and L; the DB clock decides expiry (no clock skew); no lost or delayed heartbeats.
    """
    lapse, below = _lapse_given_duration(
        ttl=ttl,
        heartbeat_interval=heartbeat_interval,
        pause_rate=pause_rate,
        pause_duration=pause_duration,
        latency=latency,
    )
    return _expect(job_duration, lapse, below=below, above_value=1.0)


def false_expiry_by_duration(
    durations,
    *,
    ttl: float,
    heartbeat_interval: float | None,
    pause_rate: float,
    pause_duration: Dist,
    latency: float = 0.0,
) -> np.ndarray:
    """P(lapse | the job takes T) for each T in `durations`: the terms that false_expiry_probability
    averages (same assumptions), so that callers can bound that average from a finite sample."""
    values = np.asarray(durations, dtype=float)
    lapse, below = _lapse_given_duration(
        ttl=ttl,
        heartbeat_interval=heartbeat_interval,
        pause_rate=pause_rate,
        pause_duration=pause_duration,
        latency=latency,
    )
    out = np.ones(len(values))
    inside = np.ones(len(values), bool) if below is None else values <= below
    if inside.any():
        out[inside] = lapse(values[inside])
    return out


def _lapse_given_duration(
    *,
    ttl: float,
    heartbeat_interval: float | None,
    pause_rate: float,
    pause_duration: Dist,
    latency: float,
):
    """(lapse(T) vectorised, below): P(lapse | T) for T <= below; T > below always lapses (below
    None: never on length alone). See false_expiry_probability for the model."""
    if ttl <= 0:
        raise ValueError("ttl must be > 0")
    rate = pause_rate / 3600.0
    if heartbeat_interval is None or heartbeat_interval + latency >= ttl:
        paused_within = _compound_pause_cdf(rate, pause_duration, ttl)

        def lapse_by_elapsed(t):
            return 1.0 - paused_within(t, ttl - t)

        return lapse_by_elapsed, ttl
    if rate == 0:
        return (lambda t: np.zeros(np.shape(t))), None
    cycle = heartbeat_interval + latency
    phases = np.linspace(0.0, cycle, 1025)
    per_phase = survival(pause_duration, ttl - latency - phases)
    cumulative = np.concatenate(
        [[0.0], np.cumsum((per_phase[1:] + per_phase[:-1]) / 2 * np.diff(phases))]
    )

    def lapse_by_phase(t):
        cycles, rest = np.divmod(t, cycle)
        exposure = cycles * cumulative[-1] + np.interp(rest, phases, cumulative)
        return -np.expm1(-rate * exposure)

    return lapse_by_phase, None


@functools.lru_cache(maxsize=256)
def _compound_pause_cdf(rate: float, pause_duration: Dist, span: float, cells: int = 4096):
    """f(t, x) = P(the pauses starting in t seconds of working time add up to <= x), 0 <= x <= span.

    N ~ Poisson(rate t) pauses, durations iid D: sum over k of P(N = k) P(D1 + .. + Dk <= x), with
    the k-fold sums convolved on a grid of `cells` steps over [0, span] (durations rounded down to
    the grid, so the sums are slightly optimistic, by at most k steps of span / cells). Kept: a
    search asks for the same TTLs again.
    """
    step = span / cells
    edges = np.arange(cells + 1) * step
    pmf = np.diff(
        cdf(pause_duration, edges)
    )  # P(D in [j step, (j+1) step)); mass beyond span dropped
    pmf[0] += float(cdf(pause_duration, 0.0))  # (a zero-length pause)
    expected = rate * span
    most = int(poisson_ppf(1 - 1e-12, expected)) + 1 if expected > 0 else 0
    sums = [np.concatenate([[1.0], np.zeros(cells)])]  # pmf of the sum of k durations on the grid
    for _ in range(most):
        sums.append(np.clip(convolve(sums[-1], pmf)[: cells + 1], 0.0, None))
    cumulative = np.array([np.cumsum(s) for s in sums])  # [k, j] = P(S_k <= j step)

    def f(t, x):
        t, x = np.broadcast_arrays(np.asarray(t, float), np.asarray(x, float))
        index = np.clip(np.floor(x / step + 1e-9).astype(int), 0, cells)
        k = np.arange(len(sums))[:, None]
        weights = poisson_pmf(k, rate * t.ravel()[None, :])
        within = cumulative[:, index.ravel()]
        return np.where(x.ravel() < 0, 0.0, np.sum(weights * within, axis=0)).reshape(t.shape)

    return f


# ---- DB load -------------------------------------------------------------------------------------


def heartbeats_per_job(
    *, heartbeat_interval: float, job_duration: Dist, latency: float = 0.0
) -> float:
    """Mean heartbeat statements one job sends: sum over k >= 1 of P(T > k h + (k - 1) latency).

    The heartbeat loop wakes h after the claim and then h after each renewal (a statement takes
    `latency`); it sends a heartbeat at each wake-up while the job is still running, so a job of
    duration T sends floor((T + latency) / (h + latency)) of them. Pauses are ignored.
    """
    upper = _upper(job_duration)
    count = int(min(1e6, math.floor((upper + latency) / (heartbeat_interval + latency)) + 1))
    k = np.arange(1, count + 1)
    return float(np.sum(survival(job_duration, k * heartbeat_interval + (k - 1) * latency)))


def heartbeat_load(
    *,
    heartbeat_interval: float,
    busy_workers: float | None = None,
    arrival_rate: float | None = None,
    job_duration: Dist | None = None,
    latency: float = 0.0,
) -> float:
    """Heartbeat statements per second.

    With job_duration: (jobs per second) x heartbeats_per_job, where jobs per second is
    arrival_rate, or busy_workers / E[T] (Little's law). Without it: busy_workers / (h + latency),
    the long-job limit (every busy worker renews once per cycle), an upper bound that is close
    when jobs last many heartbeat intervals. Assumes a steady state (no backlog building up).
    """
    if job_duration is None:
        if busy_workers is None:
            raise ValueError("give busy_workers, or job_duration with arrival_rate or busy_workers")
        return busy_workers / (heartbeat_interval + latency)
    if arrival_rate is None:
        if busy_workers is None:
            raise ValueError("give arrival_rate or busy_workers")
        arrival_rate = busy_workers / job_duration.mean_value()
    return arrival_rate * heartbeats_per_job(
        heartbeat_interval=heartbeat_interval, job_duration=job_duration, latency=latency
    )


def watcher_load(*, watcher_interval: float, latency: float = 0.0) -> float:
    """requeue_expired statements per second: one per tick; the watcher sleeps W after each
    statement, so it ticks every W + latency (one watcher process)."""
    return 1.0 / (watcher_interval + latency)


def idle_poll_load(
    *, workers: int, busy_workers: float, poll_interval: float, latency: float = 0.0
) -> float:
    """Polls that find nothing, per second: each idle worker runs one candidate SELECT, then sleeps
    P, so it polls every P + latency; workers - busy_workers are idle on average. A worker that
    finds a job also sends that SELECT, which belongs to the claim, not to this idle load."""
    return np.maximum(0.0, workers - busy_workers) / (poll_interval + latency)


def db_load(
    *,
    workers: int,
    poll_interval: float,
    heartbeat_interval: float | None,
    watcher_interval: float | None,
    job_duration: Dist,
    arrival_rate: float | None = None,
    latency: float = 0.0,
) -> dict[str, float]:
    """Statements per second of the lease machinery, by kind, in a steady state.

    arrival_rate (jobs/s) defaults to full load: every worker busy all the time. Returns
    {"busy_workers", "heartbeat", "watcher", "idle_polls", "upkeep" (heartbeat + watcher: what the
    lease settings cost), "total" (upkeep + idle polls)}. Claims and completions (a few statements
    per job whatever the settings) are not included. See heartbeat_load, watcher_load,
    idle_poll_load for the assumptions.
    """
    mean = job_duration.mean_value()
    if arrival_rate is None:
        busy = float(workers)
        arrival_rate = workers / mean if mean > 0 else 0.0
    else:
        busy = min(float(workers), arrival_rate * mean)
        arrival_rate = busy / mean if mean > 0 else arrival_rate
    out = {"busy_workers": busy}
    out["heartbeat"] = (
        0.0
        if heartbeat_interval is None
        else heartbeat_load(
            heartbeat_interval=heartbeat_interval,
            arrival_rate=arrival_rate,
            job_duration=job_duration,
            latency=latency,
        )
    )
    out["watcher"] = (
        0.0
        if watcher_interval is None
        else watcher_load(watcher_interval=watcher_interval, latency=latency)
    )
    out["idle_polls"] = idle_poll_load(
        workers=workers, busy_workers=busy, poll_interval=poll_interval, latency=latency
    )
    out["upkeep"] = out["heartbeat"] + out["watcher"]
    out["total"] = out["upkeep"] + out["idle_polls"]
    return out


def time_since_renewal_mean(
    job_duration: Dist,
    *,
    ttl: float | None = None,
    heartbeat_interval: float | None = None,
    latency: float = 0.0,
) -> float:
    """Mean time since the crashed owner's lease was last renewed, for crashes at a uniformly random
    moment of busy time (a job is hit with probability proportional to its duration T, at a uniform
    age A within it).

    With heartbeats the renewals are the claim and then every h' = h + latency, so the time since
    the last one is A mod h': h'/2 for jobs much longer than h, less for jobs that end before their
    first heartbeat. Without heartbeats it is A itself, capped at ttl (a lease that had run out is
    claimable at once). recovery_latency_mean(heartbeat_interval=None, worked_at_crash=<this>) then
    gives the mean recovery for any job length; its h'/2 shortcut is the long-job limit. Per job of
    duration t: E[A mod h' | t] = (m h'^2 / 2 + r^2 / 2) / t with t = m h' + r;
    E[min(A, L) | t] = t / 2 for t <= L, else (L^2 / 2 + L (t - L)) / t; and the job-length bias
    multiplies by t / E[T].
    """
    values, weights = _support(job_duration)
    mean = float(np.sum(weights * values))
    if mean <= 0:
        return 0.0
    if heartbeat_interval is not None:
        cycle = heartbeat_interval + latency
        cycles, rest = np.divmod(values, cycle)
        integral = cycles * cycle * cycle / 2 + rest * rest / 2
    elif ttl is None:
        integral = values * values / 2
    else:
        integral = np.where(
            values <= ttl, values * values / 2, ttl * ttl / 2 + ttl * (values - ttl)
        )
    return float(np.sum(weights * integral)) / mean


def time_since_renewal_samples(
    n: int,
    job_duration: Dist,
    *,
    ttl: float | None = None,
    heartbeat_interval: float | None = None,
    latency: float = 0.0,
    seed: int = 0,
) -> np.ndarray:
    """`n` draws of the time since the last renewal at a crash (see time_since_renewal_mean)."""
    rng = np.random.default_rng(seed)
    values, weights = _support(job_duration)
    biased = weights * values
    if biased.sum() <= 0:
        return np.zeros(n)
    jobs = values[rng.choice(len(values), size=n, p=biased / biased.sum())]
    age = rng.uniform(0.0, 1.0, n) * jobs
    if heartbeat_interval is not None:
        age = np.mod(age, heartbeat_interval + latency)
    return age if ttl is None else np.minimum(age, ttl)


def worked_at_crash_mean(job_duration: Dist, ttl: float | None = None) -> float:
    """Mean time a job had been worked on when its owner crashed (no heartbeat): the age A of a
    renewal process, E[A] = E[T^2] / (2 E[T]); with ttl, E[min(A, ttl)]. See
    time_since_renewal_mean."""
    return time_since_renewal_mean(job_duration, ttl=ttl)


# ---- the tail of a lease without heartbeat -------------------------------------------------------


def sum_survival(first: Dist, second: Dist, x: float, constant: float = 0.0) -> float:
    """P(A + B + constant > x) for independent A ~ first, B ~ second (B integrated on its quantile
    grid; exact for a constant B). Without a heartbeat a lease lapses under its owner iff the work
    (A: processing, B: the PSP call, constant: statements) outlasts the TTL x."""
    values, weights = _support(second)
    return float(np.sum(weights * survival(first, x - constant - values)))


def sum_quantile(first: Dist, second: Dist, q: float, constant: float = 0.0) -> float:
    """The x with P(A + B + constant > x) = 1 - q (bisection on sum_survival, to 1 ms). For an
    unbounded A (lognormal, exponential, pareto) every q < 1 has a finite answer and q = 1 none:
    no finite TTL makes a lapse impossible, only as rare as 1 - q."""
    if not 0 < q < 1:
        raise ValueError("q must be strictly between 0 and 1")
    low, high = 0.0, max(1.0, _upper(first) + _upper(second) + constant)
    while high - low > 1e-3:
        middle = (low + high) / 2
        if sum_survival(first, second, middle, constant) > 1 - q:
            low = middle
        else:
            high = middle
    return high
