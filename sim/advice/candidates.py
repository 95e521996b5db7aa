"""The advisor's candidates: predictions for every (TTL, heartbeat, watcher) setting, the
feasibility rules, and the choice among the feasible (sim.advice.advisor's docstring states them in
words).

A candidate's predicted recovery is the lease left at the crash (TTL minus the time since the last
renewal, which heartbeat delays lengthen), the watcher's wait, and the wait for a worker to claim
the job under the arrival rate's load (closed_forms.CrashPollWait: idle workers polling, busy ones
finishing their job, the crashed one back after its restart). Its risk is sim.advice.risk's, per job
and per day, each with a 95% upper bound; feasibility and the choice use the upper bound.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass

import numpy as np
import pandas as pd

from sim.advice.risk import SECONDS_PER_DAY, Assumptions, pair_risk
from sim.scenario.dists import Dist
from sim.theory import closed_forms
from sim.theory.pool import ASSUMED_UTILISATION, Pool

# the ladders searched: the defaults, extended only when the best setting sits at an end
DEFAULT_TTLS = (5, 10, 15, 20, 30, 45, 60, 90, 120, 180, 300, 600, 900, 1800, 3600)
DEFAULT_HEARTBEATS = (None, 1, 2, 3, 5, 10, 15, 20, 30, 60, 120, 300, 600, 1800)
DEFAULT_WATCHERS = (1, 2, 5, 10, 15, 30, 60, 120, 300)
# searched only when the best setting sits at an end of the default ladders (the range adapts)
SHORT_TTLS, SHORT_HEARTBEATS, SHORT_WATCHERS = (1, 1.5, 2, 3, 4), (0.25, 0.5), (0.5,)
LONG_TTLS, LONG_HEARTBEATS = (7200, 14400, 43200, 86400), (3600,)
CANDIDATE_COLUMNS = [
    "ttl",
    "heartbeat_interval",
    "watcher_interval",
    "predicted_false_expiry",
    "predicted_false_expiry_high",
    "false_expiries_per_day",
    "false_expiries_per_day_high",
    "predicted_recovery_mean",
    "heartbeat_load",
    "watcher_load",
    "db_load",
    "meets_target",
    "feasible",
    "score",
]
# draws of the lease left at a crash, over which the wait for a worker is averaged
SPREAD_DRAWS = 256
WATCHER_PHASES = (np.arange(16) + 0.5) / 16  # the watcher's wait, as quantiles of its cycle
# prefer -> weight w of the risk in the score: recovery x (1 + w x risk upper bound / target)
PREFER = {"recovery": 0.0, "balanced": 1.0, "safety": 10.0}


def prefer_rule(prefer: str, tolerance: float) -> str:
    """The choice rule for `prefer`, in words, with its numbers."""
    w = PREFER[prefer]
    score = (
        "score = predicted recovery"
        if w == 0
        else f"score = predicted recovery x (1 + {w:g} x false-expiry upper bound / target)"
    )
    return (
        f"prefer {prefer}: {score}; the cheapest in DB load within {tolerance:.0%} of the lowest "
        "score among the feasible"
    )


def pool_of(job: Dist, workers: int, assumptions: Assumptions) -> Pool:
    return Pool(
        workers,
        job,
        assumptions.statement_latency,
        assumptions.crash_rate,
        assumptions.restart_delay,
    )


def rate_of(pool: Pool, arrival_rate: float | None) -> float:
    """The arrival rate, or the one assumed without it (sim.theory.pool.ASSUMED_UTILISATION
    of capacity)."""
    return float(arrival_rate) if arrival_rate is not None else ASSUMED_UTILISATION * pool.capacity


def poll_waits(
    job: Dist,
    *,
    workers: int,
    poll_interval: float,
    arrival_rate: float | None,
    assumptions: Assumptions,
) -> closed_forms.CrashPollWait:
    """The wait for a worker after a crash, at this load (the pool must keep up)."""
    pool = pool_of(job, workers, assumptions)
    return closed_forms.CrashPollWait.build(
        workers=workers,
        offered_load=pool.offered_load(rate_of(pool, arrival_rate)),
        poll_interval=poll_interval,
        job_duration=job,
        latency=assumptions.statement_latency,
        restart_delay=assumptions.restart_delay,
    )


def _cycle(h: float | None, a: Assumptions) -> float | None:
    """The renewal cycle's interval part: h plus the mean heartbeat statement delay."""
    return None if h is None else h + a.heartbeat_delay.mean_value()


@dataclass(frozen=True)
class CandidateModel:
    """The prediction model of one advice: its durations, consumers, load and fault assumptions,
    with the pool and the wait for a worker after a crash built once (Advice.model). Every table
    of candidates an advice prints (the search, its named settings, a queue's own timeout, the
    evidence's predictions) is this model's."""

    job: Dist
    workers: int
    poll_interval: float
    arrival_rate: float | None
    claim_takes_expired: bool
    assumptions: Assumptions
    seed: int = 0

    @classmethod
    def of(cls, job: Dist, inputs: dict) -> CandidateModel:
        """The model of advise()'s inputs (Advice.inputs)."""
        return cls(
            job,
            inputs["workers"],
            inputs["poll_interval"],
            inputs["arrival_rate"],
            inputs["claim_takes_expired"],
            inputs["assumptions"],
            inputs["seed"],
        )

    def moved(self, **changes) -> CandidateModel:
        """The same model with some inputs changed (the evidence's crash rate and arrival rate)."""
        return dataclasses.replace(self, **changes)

    @functools.cached_property
    def pool(self) -> Pool:
        return pool_of(self.job, self.workers, self.assumptions)

    @functools.cached_property
    def rate(self) -> float:
        """The arrival rate, or the one assumed without it."""
        return rate_of(self.pool, self.arrival_rate)

    @functools.cached_property
    def waits(self) -> closed_forms.CrashPollWait:
        """The wait for a worker after a crash, at this load (the pool must keep up)."""
        return poll_waits(
            self.job,
            workers=self.workers,
            poll_interval=self.poll_interval,
            arrival_rate=self.rate,
            assumptions=self.assumptions,
        )

    def table(self, ttls, heartbeats, watchers) -> pd.DataFrame:
        """Predictions for every (ttl, heartbeat_interval, watcher_interval) combination;
        meets_target, feasible and score are left for priced (True, True and NaN here).

        heartbeat intervals with interval + statement latency >= ttl are skipped (the lease would
        lapse between heartbeats). False expiries per job and per day, with 95% upper bounds, come
        from sim.advice.risk under the assumptions; DB load, recovery and the per-day figures are at
        the arrival rate (without one, at the assumed half of the pool's capacity:
        sim.theory.pool)."""
        a, job, seed, rate = self.assumptions, self.job, self.seed, self.rate
        lat = a.statement_latency
        busy = self.pool.offered_load(rate)
        pairs = [(ttl, h) for ttl in ttls for h in heartbeats if h is None or h + lat < ttl]
        risk = pair_risk(job, pairs, a, busy=busy, jobs_per_day=rate * SECONDS_PER_DAY, seed=seed)
        rows = []
        for (ttl, h), (fe, fe_high, per_day, per_day_high) in zip(pairs, risk, strict=True):
            heartbeat_load = self._renewals(ttl, h)[2]
            for w in watchers:
                watcher = closed_forms.watcher_load(watcher_interval=w, latency=lat)
                rows.append(
                    (
                        ttl,
                        np.nan if h is None else h,
                        w,
                        fe,
                        fe_high,
                        per_day,
                        per_day_high,
                        self._recovery(ttl, h, w),
                        heartbeat_load,
                        watcher,
                        heartbeat_load + watcher,
                        True,
                        True,
                        np.nan,
                    )
                )
        return pd.DataFrame(rows, columns=CANDIDATE_COLUMNS)

    @functools.cached_property
    def _kept(self) -> dict:
        """The per-setting parts of table's rows, kept: a search that widens its ladders, and the
        named settings after it, ask for the same settings again."""
        return {}

    def _renewals(self, ttl: float, h: float | None) -> tuple[float, np.ndarray, float]:
        """(the mean lease left at a crash, draws of it, heartbeat statements/s) for (ttl, h)."""
        key = ("renewals", ttl, h)
        if key not in self._kept:
            a, job, lat = self.assumptions, self.job, self.assumptions.statement_latency
            cycle = _cycle(h, a)
            lease_left = ttl - closed_forms.time_since_renewal_mean(
                job, ttl=ttl, heartbeat_interval=cycle, latency=lat
            )
            # the wait depends on when the job becomes claimable (a restarted worker may be back)
            since = closed_forms.time_since_renewal_samples(
                SPREAD_DRAWS, job, ttl=ttl, heartbeat_interval=cycle, latency=lat, seed=self.seed
            )
            # centred on the exact mean, so that the draws add only the spread, not their noise
            left_draws = np.maximum(ttl - since, 0.0) + (lease_left - np.mean(ttl - since))
            load = closed_forms.db_load(
                workers=self.workers,
                poll_interval=self.poll_interval,
                heartbeat_interval=h,
                watcher_interval=None,
                job_duration=job,
                arrival_rate=self.rate,
                latency=lat,
            )
            self._kept[key] = (lease_left, left_draws, load["heartbeat"])
        return self._kept[key]

    def _recovery(self, ttl: float, h: float | None, w: float) -> float:
        """The predicted mean recovery after a crash of the setting (ttl, h, w)."""
        key = ("recovery", ttl, h, w)
        if key not in self._kept:
            lat = self.assumptions.statement_latency
            lease_left, left_draws, _ = self._renewals(ttl, h)
            phases = 0.0 if self.claim_takes_expired else WATCHER_PHASES * (w + lat) + lat
            claimable = np.add.outer(left_draws, phases)
            watcher_wait = 0.0 if self.claim_takes_expired else (w + lat) / 2 + lat
            self._kept[key] = lease_left + watcher_wait + self.waits.mean(claimable) + lat
        return self._kept[key]

    def priced(
        self, ttls, heartbeats, watchers, target: float, inputs: dict
    ) -> tuple[pd.DataFrame, pd.DataFrame]:
        """(the table with meets_target, feasible and score filled in, its feasibility_rules)."""
        table = self.table(ttls, heartbeats, watchers)
        rules = feasibility_rules(table, target, inputs)
        table["meets_target"] = table["predicted_false_expiry_high"] <= target
        table["feasible"] = rules.all(axis=1)
        table["score"] = score(table, target, inputs["prefer"])
        return table, rules

    def recovery_draws(self, ttl: float, h: float | None, w: float, n: int = 100_000):
        """`n` draws of the recovery latency of one setting, under table's model."""
        a, seed = self.assumptions, self.seed
        lat = a.statement_latency
        since = closed_forms.time_since_renewal_samples(
            n, self.job, ttl=ttl, heartbeat_interval=_cycle(h, a), latency=lat, seed=seed
        )
        rng = np.random.default_rng(seed + 1)
        claimable = np.maximum(ttl - since, 0.0)
        if not self.claim_takes_expired:
            claimable += rng.uniform(0.0, w + lat, n) + lat
        return claimable + self.waits.samples(claimable, seed + 2) + lat


def feasibility_rules(
    table: pd.DataFrame, target_false_expiry: float, inputs: dict
) -> pd.DataFrame:
    """One boolean column per feasibility rule of sim.advice.advisor's docstring (True: the
    candidate passes it): target (the 95% upper bound within target / margin), heartbeats_per_ttl,
    max_db_load, min_ttl. A candidate is feasible if it passes all."""
    rules = pd.DataFrame(index=table.index)
    rules["target"] = table["predicted_false_expiry_high"] <= target_false_expiry / inputs["margin"]
    per_ttl, hb = inputs["heartbeats_per_ttl"], table["heartbeat_interval"]
    rules["heartbeats_per_ttl"] = (
        hb.isna() | (table["ttl"] >= per_ttl * (hb + inputs["statement_latency"]))
        if per_ttl
        else True
    )
    load, floor = inputs["max_db_load"], inputs["min_ttl"]
    rules["max_db_load"] = table["db_load"] <= load if load is not None else True
    rules["min_ttl"] = table["ttl"] >= floor if floor is not None else True
    return rules


def score(table: pd.DataFrame, target_false_expiry: float, prefer: str) -> pd.Series:
    """recovery x (1 + w x risk upper bound / target), w = PREFER[prefer]."""
    w = PREFER[prefer]
    risk = table["predicted_false_expiry_high"] / target_false_expiry
    return table["predicted_recovery_mean"] * (1.0 + w * risk)


CHOICE_ORDER = ("db_load", "score", "predicted_false_expiry_high", "predicted_false_expiry", "ttl")
SAFEST_ORDER = (
    "predicted_false_expiry_high",
    "predicted_false_expiry",
    "predicted_recovery_mean",
    "db_load",
)


def choose_position(
    columns: dict[str, np.ndarray], feasible: np.ndarray, allowed: np.ndarray, tolerance: float
) -> int:
    """choose() on arrays (the columns of CHOICE_ORDER and SAFEST_ORDER): the position of the row
    the rule picks (ties go to the earlier row)."""
    if feasible.any():
        lowest = columns["score"][feasible].min()
        pool = np.flatnonzero(feasible & (columns["score"] <= lowest * (1 + tolerance) + 1e-9))
        keys: tuple[str, ...] = CHOICE_ORDER
    else:
        pool, keys = np.flatnonzero(allowed), SAFEST_ORDER
    order = np.lexsort([columns[k][pool] for k in reversed(keys)])
    return int(pool[order[0]])


def choose(
    table: pd.DataFrame, feasible: pd.Series, allowed: pd.Series, tolerance: float
) -> pd.Series:
    """The rule of sim.advice.advisor's docstring: the cheapest feasible within `tolerance` of the
    lowest score; with none feasible, the lowest risk (upper bound, then point) among the
    `allowed`."""
    columns = {k: table[k].to_numpy(float) for k in {*CHOICE_ORDER, *SAFEST_ORDER}}
    at = choose_position(
        columns,
        feasible.reindex(table.index).to_numpy(bool),
        allowed.reindex(table.index).to_numpy(bool),
        tolerance,
    )
    return table.iloc[at]
