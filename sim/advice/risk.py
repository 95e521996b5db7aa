"""False-expiry risk of a lease setting under named fault assumptions: per job and per day, each
with a 95% upper bound, so that an advice can be defended in numbers a team can check.

Sources of a false expiry (a lease lapsing under a live owner), each an assumption the user names:
- stop-the-world pauses (GC, VM migration): `pause_rate` per worker-hour, `pause_duration`;
  and, without a heartbeat, jobs that outlast the TTL
  (sim.theory.closed_forms.false_expiry_probability);
- heartbeat statement delay (the statement-latency tail, lock waits, a starved pool): a heartbeat
  that reaches the DB more than TTL - interval - latency after the last renewal lands too late;
  P(lapse | T) = 1 - (1 - q)^n(T), q = P(delay > L - h - latency), n(T) heartbeats in a job of T;
- DB failover or stall (optional): `db_stall_rate` per day, each lasting `db_stall_duration`;
  nothing renews during it, so every busy worker's lease whose time left is shorter than the stall
  lapses: per stall, busy workers x P(stall > L - latency - time since renewal). Those come in
  bursts.

Per-job figures average P(lapse | T) over the observed durations. Their 95% upper bound covers
the durations being a sample: a bootstrap percentile of that average, plus, without a heartbeat,
the exact (Clopper-Pearson) bound on the share of jobs longer than the TTL (when none of n
observed jobs is, that share can still be about 3/n). The fault assumptions are taken as given:
a bound cannot cover a pause tail that is wrong, so they are printed beside every figure.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
from scipy import special

from sim.errors import ConfigError
from sim.scenario.dists import Dist
from sim.support.in_words import count, duration
from sim.support.scipy_steps import beta_ppf
from sim.theory import closed_forms

SECONDS_PER_DAY = 86_400.0
BOOTSTRAP = 400
STALL_DRAWS = 20_000
CONFIDENCE = 0.95


@dataclass(frozen=True)
class Assumptions:
    """The fault model an advice rests on (rates per worker-hour unless named otherwise)."""

    pause_rate: float = 2.0
    pause_duration: Dist = Dist.lognormal(0.5, 5.0)
    crash_rate: float = 1.0
    statement_latency: float = 0.002  # a typical DB round trip, seconds
    heartbeat_delay: Dist = Dist.lognormal(0.01, 0.2)  # extra delay of a heartbeat statement
    db_stall_rate: float = 0.0  # DB failovers or stalls per day (all workers at once)
    db_stall_duration: Dist = Dist.constant(30.0)
    restart_delay: float = 5.0  # seconds until a crashed worker polls again (recovery only)

    def check(self) -> Assumptions:
        """ConfigError naming the first bad field."""
        for name in (
            "pause_rate",
            "crash_rate",
            "statement_latency",
            "db_stall_rate",
            "restart_delay",
        ):
            value = getattr(self, name)
            if (
                isinstance(value, bool)
                or not isinstance(value, int | float | np.number)
                or not math.isfinite(value)
                or value < 0
            ):
                raise ConfigError(f"{name}: must be a number >= 0, got {value!r}")
        for name in ("pause_duration", "heartbeat_delay", "db_stall_duration"):
            value = getattr(self, name)
            if not isinstance(value, Dist):
                raise ConfigError(f"{name}: expected a sim.Dist, got {type(value).__name__}")
            problems = value.problems(name)
            if problems:
                raise ConfigError(problems[0])
        return self

    def lines(self) -> list[str]:
        """One line per assumption, in words, with its numbers."""
        pauses = (
            f"{count(self.pause_rate, 'stop-the-world pause')} per worker-hour "
            f"({describe(self.pause_duration)})"
            if self.pause_rate
            else "no stop-the-world pauses"
        )
        stalls = (
            f"{count(self.db_stall_rate, 'DB failover or stall', 'DB failovers or stalls')} a day "
            f"({describe(self.db_stall_duration)}), every worker at once"
            if self.db_stall_rate
            else "no DB failover or stall (db_stall_rate 0)"
        )
        crashes = (
            f"{count(self.crash_rate, 'crash', 'crashes')} per worker-hour, the worker back after "
            f"{duration(self.restart_delay, ms=True)}"
            if self.crash_rate
            else "no crashes"
        )
        return [
            f"pauses: {pauses}",
            f"statement latency: {self.statement_latency * 1000:g} ms typical; heartbeat "
            f"statement delay {describe(self.heartbeat_delay)} (the latency tail, lock waits)",
            f"DB: {stalls}",
            f"crashes: {crashes} (recovery only; a crash is not a false expiry)",
        ]


def describe(d: Dist) -> str:
    """'median 500 ms, p99 5 s', '30 s each', ... for an assumption's distribution."""
    if d.kind == "lognormal":
        return f"median {duration(d.median, ms=True)}, p99 {duration(d.p99, ms=True)}"
    if d.kind == "constant":
        return f"{duration(d.value, ms=True)} each"
    if d.kind == "empirical":
        median, p99 = (duration(d.quantile(q), ms=True) for q in (0.5, 0.99))
        return f"median {median}, p99 {p99} of {count(len(d.samples), 'value')}"
    return (
        f"{d.kind}, mean {duration(d.mean_value(), ms=True)}, p99 "
        f"{duration(d.quantile(0.99), ms=True)}"
    )


def delay_lapse_by_duration(
    durations: np.ndarray,
    *,
    ttl: float,
    heartbeat_interval: float | None,
    heartbeat_delay: Dist,
    latency: float,
) -> np.ndarray:
    """P(some heartbeat of a job of T lands after its lease ran out), per T
    (0 without a heartbeat)."""
    if heartbeat_interval is None or heartbeat_interval + latency >= ttl:
        return np.zeros(len(durations))
    q = float(closed_forms.survival(heartbeat_delay, ttl - heartbeat_interval - latency))
    if q <= 0:
        return np.zeros(len(durations))
    beats = np.floor((np.asarray(durations, float) + latency) / (heartbeat_interval + latency))
    return -np.expm1(beats * math.log1p(-min(q, 1 - 1e-16)))


def lapse_by_duration(
    durations: np.ndarray, ttl: float, heartbeat_interval: float | None, a: Assumptions
) -> np.ndarray:
    """P(false expiry | the job takes T) from pauses (and length,
    without heartbeat) and heartbeat delay."""
    paused = closed_forms.false_expiry_by_duration(
        durations,
        ttl=ttl,
        heartbeat_interval=heartbeat_interval,
        pause_rate=a.pause_rate,
        pause_duration=a.pause_duration,
        latency=a.statement_latency,
    )
    delayed = delay_lapse_by_duration(
        durations,
        ttl=ttl,
        heartbeat_interval=heartbeat_interval,
        heartbeat_delay=a.heartbeat_delay,
        latency=a.statement_latency,
    )
    return np.minimum(1.0, paused + delayed)


def stall_lapse_probability(
    job: Dist, ttl: float, heartbeat_interval: float | None, a: Assumptions, seed: int = 0
) -> float:
    """P(a lease in flight when the DB stalls lapses because of the stall): the stall outlasts the
    time its lease had left (L - latency - time since the last renewal). Leases that had already run
    out on their own are not counted here."""
    if not a.db_stall_rate:
        return 0.0
    since = _since_renewal(job, heartbeat_interval, a.statement_latency, seed)
    left = ttl - a.statement_latency - since
    alive = left > 0
    return float(
        np.mean(
            np.where(alive, closed_forms.survival(a.db_stall_duration, np.maximum(left, 0.0)), 0.0)
        )
    )


# ---- many (TTL, heartbeat) pairs at once: the candidate table and its sensitivity rows ----------

PAIR_CELLS = 2_000_000  # matrix cells (pairs x durations) computed at once


def scaled(d: Dist, factor: float) -> Dist:
    """`d` with every duration multiplied by `factor` (a pause tail twice as long, say)."""
    k = float(factor)
    match d.kind:
        case "constant":
            return Dist.constant(d.value * k)
        case "exponential":
            return Dist.exponential(d.mean * k)
        case "uniform":
            return Dist.uniform(d.low * k, d.high * k)
        case "lognormal":
            return Dist.lognormal(d.median * k, d.p99 * k)
        case "pareto":
            return Dist.pareto(d.scale * k, d.alpha)
    return Dist.empirical(np.asarray(d.samples, float) * k)


def stop_loss(d: Dist, x) -> np.ndarray:
    """E[(D - x)+] = the integral of P(D > u) from x to infinity, vectorised over x (E[D] - x for
    x <= 0). A pause of D within a renewal cycle outlasts the lease left at phase p with probability
    P(D > left(p)); integrated over the cycle that is a difference of two of these, exact for each
    kind of distribution (no grid), and accurate far into the tail."""
    x = np.asarray(x, dtype=float)
    mean = d.mean_value()
    below = mean - x  # x <= 0 (and, for bounded kinds, x at or below their support)
    match d.kind:
        case "constant":
            return np.maximum(d.value - x, 0.0)
        case "exponential":
            return np.where(x <= 0, below, d.mean * np.exp(-np.maximum(x, 0.0) / d.mean))
        case "uniform":
            if d.high == d.low:
                return np.maximum(d.low - x, 0.0)
            inside = (d.high - np.clip(x, d.low, d.high)) ** 2 / (2 * (d.high - d.low))
            return np.where(x <= d.low, below, inside)
        case "lognormal":
            mu, s = math.log(d.median), d.sigma
            logx = np.log(np.maximum(x, 1e-300))
            tail = mean * special.ndtr((mu + s * s - logx) / s) - x * special.ndtr((mu - logx) / s)
            return np.where(x <= 0, below, np.maximum(tail, 0.0))
        case "pareto":
            tail = d.scale**d.alpha * np.maximum(x, d.scale) ** (1 - d.alpha) / (d.alpha - 1)
            return np.where(x <= d.scale, below, tail)
    values = np.sort(np.asarray(d.samples, dtype=float))
    above = np.concatenate([np.cumsum(values[::-1])[::-1], [0.0]])  # sum of values[k:]
    k = np.searchsorted(values, x, side="right")
    return np.where(x <= 0, below, (above[k] - x * (len(values) - k)) / len(values))


def pair_lapse(
    durations: np.ndarray, ttls: np.ndarray, heartbeats: np.ndarray, a: Assumptions
) -> np.ndarray:
    """P(false expiry | the job takes T) for each pair (rows) and each duration T (columns), for
    pairs that renew (heartbeat + latency < TTL): lapse_by_duration's model, all pairs at once.

    Pauses start at rate r per second of work; one starting at phase p of a renewal cycle of length
    c = h + latency lapses the lease if it outlasts the L - latency - p left, so a cycle's exposure
    is the integral of P(pause > L - latency - p) over p in [0, c] (stop_loss differences) and
    P(lapse | T) = 1 - exp(-r x exposure of T's cycles); a late heartbeat adds delay_lapse's term.
    """
    lat = a.statement_latency
    t = np.asarray(durations, dtype=float)[None, :]
    ttl, h = np.asarray(ttls, float)[:, None], np.asarray(heartbeats, float)[:, None]
    cycle, left = h + lat, ttl - lat
    cycles, rest = np.divmod(t, cycle)
    paused = np.zeros((ttl.shape[0], t.shape[1]))
    if a.pause_rate:
        end = stop_loss(a.pause_duration, left)
        exposure = cycles * (stop_loss(a.pause_duration, left - cycle) - end) + (
            stop_loss(a.pause_duration, left - rest) - end
        )
        paused = -np.expm1(-(a.pause_rate / 3600.0) * np.maximum(exposure, 0.0))
    q = np.minimum(closed_forms.survival(a.heartbeat_delay, ttl - h - lat), 1 - 1e-16)
    beats = np.floor((t + lat) / cycle)
    delayed = -np.expm1(beats * np.log1p(-q))
    return np.minimum(1.0, paused + delayed)


def pairs_per_job(
    durations: np.ndarray,
    ttls,
    heartbeats,
    a: Assumptions,
    weights: np.ndarray,
    *,
    only: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """per_job for many (TTL, heartbeat) pairs (a heartbeat of NaN: none): (predicted false-expiry
    probabilities, their 95% upper bounds), NaN where `only` (a mask) leaves a pair out. Pairs that
    renew are computed together (pair_lapse, one matrix product for the bootstrap); the others
    one TTL at a time (their pauses add up within a job: closed_forms' compound model)."""
    ttls, hbs = np.asarray(ttls, float), np.asarray(heartbeats, float)
    point, high = np.full(len(ttls), np.nan), np.full(len(ttls), np.nan)
    wanted = np.ones(len(ttls), bool) if only is None else np.asarray(only, bool)
    renews = wanted & np.isfinite(hbs) & (hbs + a.statement_latency < ttls)
    rows = np.flatnonzero(renews)
    step = max(1, PAIR_CELLS // max(1, len(durations)))
    for start in range(0, len(rows), step):
        at = rows[start : start + step]
        lapse = pair_lapse(durations, ttls[at], hbs[at], a)
        point[at] = lapse.mean(axis=1)
        high[at] = np.quantile(weights @ lapse.T, CONFIDENCE, axis=0)
    for i in np.flatnonzero(wanted & ~renews):
        h = None if not np.isfinite(hbs[i]) else float(hbs[i])
        point[i], high[i] = per_job(durations, float(ttls[i]), h, a, weights)
    high = np.minimum(1.0, np.maximum(high, point))
    return point, high


def pairs_stall_lapse(
    job: Dist, ttls, heartbeats, a: Assumptions, seed: int = 0, *, only: np.ndarray | None = None
) -> np.ndarray:
    """stall_lapse_probability for many (TTL, heartbeat) pairs (NaN heartbeat: none), the draws of
    the time since the last renewal shared by the pairs of one heartbeat."""
    ttls, hbs = np.asarray(ttls, float), np.asarray(heartbeats, float)
    out = np.zeros(len(ttls))
    if not a.db_stall_rate:
        return out
    wanted = np.ones(len(ttls), bool) if only is None else np.asarray(only, bool)
    lat = a.statement_latency
    keys = np.where(np.isfinite(hbs), hbs, -1.0)
    for key in np.unique(keys[wanted]):
        at = np.flatnonzero(wanted & (keys == key))
        since = _since_renewal(job, None if key < 0 else float(key), lat, seed)
        left = ttls[at][:, None] - lat - since[None, :]
        lapse = closed_forms.survival(a.db_stall_duration, np.maximum(left, 0.0))
        out[at] = np.mean(np.where(left > 0, lapse, 0.0), axis=1)
    return out


def pair_risk(
    job: Dist,
    pairs,
    a: Assumptions,
    *,
    busy: float,
    jobs_per_day: float,
    seed: int = 0,
    only: np.ndarray | None = None,
) -> np.ndarray:
    """One row per (TTL, heartbeat or None) pair: the false-expiry probability per job, its 95%
    upper bound, false expiries a day and its upper bound, with DB stalls (`busy` leases in flight
    at each, a.db_stall_rate a day) added to each; NaN rows where `only` leaves a pair out."""
    ttls = np.array([float(t) for t, _ in pairs])
    hbs = np.array([np.nan if h is None else float(h) for _, h in pairs])
    samples = np.asarray(job.samples, dtype=float)
    point, high = pairs_per_job(
        samples, ttls, hbs, a, bootstrap_weights(len(samples), seed), only=only
    )
    stall = a.db_stall_rate * busy * pairs_stall_lapse(job, ttls, hbs, a, seed, only=only)
    return np.column_stack(
        [
            point + stall / jobs_per_day,
            np.minimum(1.0, high + stall / jobs_per_day),
            point * jobs_per_day + stall,
            high * jobs_per_day + stall,
        ]
    )


@functools.lru_cache(maxsize=64)
def _since_renewal(job: Dist, heartbeat: float | None, latency: float, seed: int) -> np.ndarray:
    """STALL_DRAWS draws of the time since the last renewal (kept: every moved assumption of
    the sensitivity table asks for the same ones)."""
    draws = closed_forms.time_since_renewal_samples(
        STALL_DRAWS, job, heartbeat_interval=heartbeat, latency=latency, seed=seed
    )
    draws.flags.writeable = False
    return draws


@functools.lru_cache(maxsize=4)
def bootstrap_weights(n: int, seed: int, draws: int = BOOTSTRAP) -> np.ndarray:
    """Resampling weights (draws x n, each row sums to 1): row i @ values is one bootstrap mean
    (the same for the same n and seed: kept, read-only, for the next search)."""
    rng = np.random.default_rng(seed)
    weights = rng.multinomial(n, np.full(n, 1.0 / n), size=draws) / float(n)
    weights.flags.writeable = False
    return weights


def share_upper_bound(k: int, n: int, confidence: float = CONFIDENCE) -> float:
    """One-sided exact (Clopper-Pearson) upper bound of a share seen k times in n
    (3/n-ish for k = 0)."""
    if k >= n:
        return 1.0
    return float(beta_ppf(confidence, k + 1, n - k))


def per_job(
    durations: np.ndarray,
    ttl: float,
    heartbeat_interval: float | None,
    a: Assumptions,
    weights: np.ndarray,
) -> tuple[float, float]:
    """(predicted false-expiry probability per job, its 95% upper bound) from the
    observed durations."""
    lapse = lapse_by_duration(durations, ttl, heartbeat_interval, a)
    point = float(lapse.mean())
    if heartbeat_interval is None or heartbeat_interval + a.statement_latency >= ttl:
        longer = durations > ttl
        rest = np.where(longer, 0.0, lapse)
        high = share_upper_bound(int(longer.sum()), len(durations)) + _percentile(
            _means(weights, rest)
        )
    else:
        high = _percentile(_means(weights, lapse))
    return point, float(min(1.0, max(high, point)))


def _means(weights: np.ndarray, values: np.ndarray) -> np.ndarray:
    """The bootstrap means (einsum: single-threaded, faster here than a BLAS call on a
    busy machine)."""
    return np.einsum("ij,j->i", weights, values)


def _percentile(means: np.ndarray) -> float:
    return float(np.quantile(means, CONFIDENCE))
