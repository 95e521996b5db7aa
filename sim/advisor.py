"""Lease settings advice: TTL, heartbeat interval and watcher interval for observed job durations.

    import sim
    advice = sim.advise("sample", arrival_rate=1, pause_rate=2, target_false_expiry=1e-3)
    print(advice)            # TTL 2 s, heartbeat every 0.5 s, watcher every 1 s: predicted ...
    advice.candidates        # every setting considered, with its predictions and feasibility
    advice.neighbours        # the choice beside the best setting one TTL step either side
    advice.evidence          # a small simulated sweep around the recommendation
    sim.run(advice.scenario())

How it chooses (all predictions come from sim.analytic, whose docstrings give the assumptions):

1. The load. The pool's capacity is sim.pool's (workers / mean worker time per job, crashes
   included). An arrival rate at or above it is refused (ConfigError naming workers and the
   capacity, with the pool size that would carry it); from 80% utilisation the advice warns. With
   no arrival rate the advice assumes half the capacity, and says so.
2. Each candidate (TTL L, heartbeat interval h or none, watcher interval W) gets a predicted
   false-expiry probability per job with its 95% upper bound (sim.lease_risk), a predicted mean
   recovery latency after a crash (the lease left after the time since the last renewal, the
   watcher's wait, then the wait for a worker: idle ones polling, busy ones finishing their job,
   the crashed one back after its restart; analytic.CrashPollWait), and the DB load it costs (the
   heartbeat and watcher statements per second, "upkeep") at the arrival rate.
3. Feasible: the false expiry's 95% upper bound <= target / margin (margin 2 by default: the
   formulas are approximations, and a recommendation should meet the target in simulation too);
   L >= heartbeats_per_ttl x (h + latency) (default 2: one lost heartbeat does not lapse the
   lease); upkeep <= max_db_load when given; L >= min_ttl when a floor is given. The target is per
   job (target_false_expiry), or per day (target_per_day, at the arrival rate).
4. The choice weighs recovery against risk by `prefer`: each feasible setting scores
   recovery x (1 + w x risk upper bound / target), w = 0 (recovery), 1 (balanced, the default: a
   setting at the target counts as recovering twice as slowly) or 10 (safety); the recommendation
   is the cheapest in DB load whose score is within recovery_tolerance (10%) of the lowest. Ties go
   to the lower score, then to the lower risk. If none is feasible, the advice says NOT MET and
   gives the lowest risk found (at or above the TTL floor, if any).

With verify=True the recommendation is simulated (sim.sweep) beside its neighbouring TTLs, and
the evidence table puts simulated figures, with confidence intervals, next to the predictions.
When the simulated recovery interval excludes the prediction, the advice gives the simulated
figure and says so as a finding; it also says whether the simulation confirms the target.

The bundled example, sim/data/sample_durations.csv (`python -m sim advise sample`), holds 2000
payment processing times made by sample_durations() below (seed 20260515), written by
`python -c "import sim.advisor as a; a.write_sample_durations('sim/data/sample_durations.csv')"`;
tests/analysis/test_advisor.py checks that the file and the function still agree.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from sim import advice_evidence, analytic, files
from sim.advice_candidates import (
    CANDIDATE_COLUMNS,
    PREFER,
    candidate_table,
    choose,
    feasibility_rules,
    pool_of,
    prefer_rule,
    rate_of,
    recovery_draws,
    score,
)
from sim.dists import Dist
from sim.durations import Durations, from_values, read_durations
from sim.errors import ConfigError, expect_flag, expect_text
from sim.lease_risk import SECONDS_PER_DAY, Assumptions
from sim.limits import MAX_RUNS, MAX_SECONDS, MAX_WORKERS
from sim.scenario import Faults, LeaseWarning, Policy, Scenario, Workload, dumps
from sim.wording import amount, count, duration, percent

DEFAULT_TTLS = (5, 10, 15, 20, 30, 45, 60, 90, 120, 180, 300, 600, 900, 1800, 3600)
DEFAULT_HEARTBEATS = (None, 1, 2, 3, 5, 10, 15, 20, 30, 60, 120, 300, 600, 1800)
DEFAULT_WATCHERS = (1, 2, 5, 10, 15, 30, 60, 120, 300)
# searched only when the best setting sits at an end of the default ladders (the range adapts)
SHORT_TTLS, SHORT_HEARTBEATS, SHORT_WATCHERS = (1, 1.5, 2, 3, 4), (0.25, 0.5), (0.5,)
LONG_TTLS, LONG_HEARTBEATS = (7200, 14400, 43200, 86400), (3600,)
SHORTEST_WHY = (
    "below 1 s, scheduling jitter and connection hiccups that this model leaves out would decide "
    "(set min_ttl to a floor you trust)"
)
LONGEST_WHY = (
    "a lease of more than a day leaves a crashed job waiting a day; split the job or add a "
    "heartbeat"
)
MAX_SAMPLES = 20_000  # longer duration lists are represented by this many quantiles
SAMPLE_SEED = 20260515


def sample_durations_path() -> Path:
    """The bundled example CSV of payment processing times (column processing_seconds)."""
    return Path(str(resources.files("sim") / "data" / "sample_durations.csv"))


def sample_durations(n: int = 2000, seed: int = SAMPLE_SEED) -> pd.DataFrame:
    """Synthetic payment processing times: 96% card payments, lognormal (median 1.2 s, p99 6 s);
    4% slow paths (3-D Secure challenge, PSP retry), lognormal (median 12 s, p99 90 s); ms
    resolution."""
    rng = np.random.default_rng(seed)
    slow = rng.random(n) < 0.04
    fast_sigma = math.log(6.0 / 1.2) / 2.326348
    slow_sigma = math.log(90.0 / 12.0) / 2.326348
    seconds = np.where(
        slow,
        rng.lognormal(math.log(12.0), slow_sigma, n),
        rng.lognormal(math.log(1.2), fast_sigma, n),
    )
    method = np.where(slow, "3ds", rng.choice(["card", "wallet", "sepa"], n, p=[0.7, 0.2, 0.1]))
    return pd.DataFrame({"processing_seconds": np.round(seconds, 3), "method": method})


def write_sample_durations(path: str | Path) -> Path:
    path = Path(path)
    sample_durations().to_csv(path, index=False, float_format="%.3f", lineterminator="\n")
    return path


# ---- inputs -------------------------------------------------------------------------------------


def read(durations, column: str | None = None, unit: str = "s") -> Durations:
    """Observed durations as sim.durations.Durations (seconds + how they were read): from a CSV
    path ("sample" is the bundled example), an array-like in `unit`, or a Durations; ConfigError
    if bad."""
    if isinstance(durations, Durations):
        if column is not None:
            raise ConfigError("column: only applies when durations is a CSV path")
        return durations
    if isinstance(durations, str | Path):
        if str(durations) == "sample" and not Path(durations).exists():
            durations = sample_durations_path()
        return read_durations(durations, column, unit)
    if column is not None:
        raise ConfigError("column: only applies when durations is a CSV path")
    if isinstance(durations, pd.DataFrame):
        raise ConfigError("durations: give one column (a Series or array), not a DataFrame")
    return from_values(durations, unit)


def _durations_dist(values: np.ndarray) -> Dist:
    if len(values) > MAX_SAMPLES:
        values = np.quantile(values, (np.arange(MAX_SAMPLES) + 0.5) / MAX_SAMPLES)
    return Dist.empirical(np.round(values, 6))


def _positive(name: str, value, *, zero_ok: bool = False, whole: bool = False) -> None:
    ok = (
        isinstance(value, int | float | np.number)
        and not isinstance(value, bool)
        and math.isfinite(value)
    )
    if ok and whole:
        ok = float(value).is_integer()
    if not ok or value < 0 or (value == 0 and not zero_ok):
        bound = ">= 0" if zero_ok else "> 0"
        kind = "a whole number" if whole else "a number"
        raise ConfigError(f"{name}: must be {kind} {bound}, got {value!r}")


def _ladder(name: str, values, *, allow_none: bool = False) -> list:
    if isinstance(values, str) or not isinstance(values, Sequence | np.ndarray):
        raise ConfigError(f"candidates.{name}: expected a list of seconds, got {values!r}")
    out: list[float | None] = []
    for v in values:
        if v is None and allow_none:
            out.append(None)
            continue
        _positive(f"candidates.{name}", v)
        out.append(float(v))
    if not out:
        raise ConfigError(f"candidates.{name}: has no values")
    return sorted(set(out), key=lambda v: (v is not None, v or 0.0))


# ---- the advice ----------------------------------------------------------------------------------


@dataclass
class Advice:
    """A recommended lease setting, what it is predicted to cost and achieve, and the evidence."""

    ttl: float
    heartbeat_interval: float | None  # None: no heartbeat
    watcher_interval: float
    predicted_false_expiry: float  # per job
    predicted_recovery_mean: float  # seconds from an owner's crash to the job's next claim
    predicted_recovery_p95: float
    db_load: float  # statements/s of heartbeats + watcher ticks ("upkeep")
    heartbeat_load: float
    watcher_load: float
    target_false_expiry: float  # per job (with target_per_day: its equivalent at the arrival rate)
    met: bool  # some candidate met the target (else this is the lowest false expiry found)
    candidates: pd.DataFrame  # every setting considered (CANDIDATE_COLUMNS)
    evidence: pd.DataFrame | None  # simulated neighbourhood of the recommendation (verify=True)
    durations: Dist = field(repr=False)
    inputs: dict = field(default_factory=dict)
    predicted_false_expiry_high: float = np.nan  # 95% upper bound per job (durations are a sample)
    false_expiries_per_day: float = np.nan  # at the arrival rate (assumed if none was given)
    false_expiries_per_day_high: float = np.nan
    position: list[str] = field(default_factory=list)  # where the TTL sits, and why
    target_per_day: float | None = None  # the target as given per day, if it was
    neighbours: pd.DataFrame | None = field(default=None, repr=False)  # NEIGHBOUR_COLUMNS

    @property
    def assumptions(self) -> Assumptions:
        return self.inputs["assumptions"]

    @property
    def prefer(self) -> str:
        return self.inputs["prefer"]

    @property
    def utilisation(self) -> float:
        """The workers' busy share at the arrival rate (assumed ASSUMED_UTILISATION without one)."""
        return self.inputs["utilisation"]

    @property
    def recovery_mean(self) -> float:
        """The mean recovery the advice gives: predicted, or simulated when the evidence excludes
        the prediction (advice_evidence.recovery_answer)."""
        return advice_evidence.recovery_answer(self)[0]

    @property
    def recovery_source(self) -> str:
        """'predicted' or 'simulated': where recovery_mean comes from."""
        return advice_evidence.recovery_answer(self)[1]

    def scenario(
        self,
        *,
        jobs: int = 2000,
        seed: int = 1,
        arrival_rate: float | None = None,
        name: str = "advised",
        tail: float = 3.0,
    ) -> Scenario:
        """A runnable Scenario with the recommended settings, the observed durations (resampled) as
        processing times, the assumed faults (pauses, crashes and restarts, heartbeat delay; a DB
        stall as a hanging partition of each worker), and Poisson arrivals at the advice's rate
        (given, or assumed: half the pool's capacity) long enough for `jobs` jobs; the horizon
        leaves `tail` times the durations' 99.9th percentile after the last arrival."""
        inputs = self.inputs
        a = self.assumptions
        workers = inputs["workers"]
        rate = arrival_rate or inputs["jobs_per_s"]
        horizon = jobs / rate + tail * self.durations.quantile(0.999)
        h = self.heartbeat_interval
        stalls: dict[str, Any] = (
            {}
            if not a.db_stall_rate
            else {
                "partition_rate": a.db_stall_rate / 24.0,
                "partition_duration": a.db_stall_duration,
                "partition_mode": "hang",
            }
        )
        return Scenario(
            name=name,
            description=(
                f"Advised lease settings: {self.headline()}. Processing times resampled from "
                f"{inputs['durations_n']} observed durations."
            ),
            workload=Workload(
                jobs=jobs,
                arrival="poisson",
                rate=rate,
                processing=self.durations,
                psp_at=0.5,
                psp_call=Dist.constant(0.0),
                statement_latency=Dist.constant(inputs["statement_latency"]),
            ),
            policy=Policy(
                workers=workers,
                poll_interval=inputs["poll_interval"],
                lease_ttl=self.ttl,
                heartbeat=h is not None,
                heartbeat_interval=h if h is not None else Policy.heartbeat_interval,
                watcher=True,
                watcher_interval=self.watcher_interval,
                claim_takes_expired=inputs["claim_takes_expired"],
                fencing=True,
                dedup=True,
                idempotency_key=True,
            ),
            faults=Faults(
                crash_rate=a.crash_rate,
                restart_delay=Dist.constant(a.restart_delay),
                pause_rate=a.pause_rate,
                pause_duration=a.pause_duration,
                heartbeat_delay=a.heartbeat_delay if h is not None else Faults.heartbeat_delay,
                **stalls,
            ),
            horizon=float(horizon),
            seed=seed,
        )

    # ---- in words --------------------------------------------------------------------------------

    def headline(self) -> str:
        simulated = " (simulated)" if self.recovery_source == "simulated" else ""
        return (
            f"{_setting(self.ttl, self.heartbeat_interval, self.watcher_interval)}: predicted "
            f"false expiry {percent(self.predicted_false_expiry)} per job (95% upper bound "
            f"{percent(self.predicted_false_expiry_high)}; {self.target_text()}), recovery ~ "
            f"{duration(self.recovery_mean)}{simulated}, {amount(self.db_load)} heartbeat + "
            "watcher statements/s"
        )

    def target_text(self) -> str:
        """'target 0.1%' or 'target 10 a day = 0.012% per job at 1 jobs/s'."""
        if self.target_per_day is None:
            return f"target {percent(self.target_false_expiry)}"
        return (
            f"target {amount(self.target_per_day)} a day = {percent(self.target_false_expiry)} per "
            f"job at {self.inputs['jobs_per_s']:.3g} jobs/s"
        )

    def load_line(self) -> str:
        """The load the figures are at: the arrival rate and the workers' busy share."""
        i = self.inputs
        pool = i["pool"]
        if i["arrival_rate"] is None:
            return (
                f"load: {i['jobs_per_s']:.3g} jobs/s assumed (give arrival_rate for your queue's), "
                f"{percent(self.utilisation)} of {pool.capacity_words()}"
            )
        return (
            f"load: {i['jobs_per_s']:.3g} jobs/s (arrival_rate), {percent(self.utilisation)} of "
            f"{pool.capacity_words()}"
        )

    def risk_lines(self) -> list[str]:
        """The false-expiry risk per job, per day and per year at the queue's rate, with 95%
        upper bounds."""
        i = self.inputs
        rate = i["jobs_per_s"]
        where = (
            f"at {rate:.3g} jobs/s (arrival_rate)"
            if i["arrival_rate"] is not None
            else f"at {rate:.3g} jobs/s (assumed; give arrival_rate for your queue's)"
        )
        per_year, per_year_high = (
            365 * self.false_expiries_per_day,
            365 * self.false_expiries_per_day_high,
        )
        return [
            f"risk {where}: {percent(self.predicted_false_expiry)} of jobs (95% upper bound "
            f"{percent(self.predicted_false_expiry_high)}) = {amount(self.false_expiries_per_day)} "
            f"false expiries a day (upper bound {amount(self.false_expiries_per_day_high)})",
            f"  duplicate external effects: up to {amount(per_year)} a year (upper bound "
            f"{amount(per_year_high)}); each false expiry lets a second worker repeat the PSP "
            "call, harmless only with an idempotency key",
            "  " + self.slack_line(),
        ]

    def slack_line(self) -> str:
        """What a lease survives, against the declared tails (the review's item 2, before any
        run)."""
        a, h = self.assumptions, self.heartbeat_interval
        if h is None:
            over = float(np.mean(np.asarray(self.durations.samples) > self.ttl))
            return (
                f"slack: no heartbeat, so the lease must outlast the whole job; {percent(over)} of "
                f"the observed jobs took longer than the {duration(self.ttl)} TTL"
            )
        slack = self.ttl - h - a.statement_latency
        longer = [
            f"{percent(float(analytic.survival(d, slack)))} of the {name}"
            for d, name, declared in (
                (a.pause_duration, "pauses", a.pause_rate),
                (a.heartbeat_delay, "heartbeat delays", True),
                (a.db_stall_duration, "DB stalls", a.db_stall_rate),
            )
            if declared
        ]
        return (
            f"slack: a lease survives a stall of up to {duration(slack)} (TTL - heartbeat interval "
            f"- statement latency); of the declared tails, longer than that: {', '.join(longer)}"
        )

    def tradeoff_lines(self) -> list[str]:
        """The choice beside the best setting one TTL step either side: risk and recovery side by
        side."""
        if self.neighbours is None or not len(self.neighbours):
            return []
        lowest = f"; the lowest is {_lowest_scored(self)}" if self.met else ""
        lines = [f"trade-off ({self.choice_rule()}{lowest}); the best setting at each TTL step:"]
        for row in self.neighbours.itertuples():
            mark = "*" if row.step == "chosen" else " "
            h = None if pd.isna(row.heartbeat_interval) else row.heartbeat_interval
            scored = f"score {duration(row.score)}" if row.feasible else "not feasible"
            lines.append(
                f" {mark} {_setting(row.ttl, h, row.watcher_interval)}: false expiry "
                f"{percent(row.predicted_false_expiry)} (upper bound "
                f"{percent(row.predicted_false_expiry_high)}), "
                f"{amount(row.false_expiries_per_day)} a day; recovery "
                f"{duration(row.predicted_recovery_mean)}; {amount(row.db_load)} statements/s; "
                f"{scored}"
            )
        return lines

    def heartbeat_line(self) -> str:
        """Without a heartbeat against with one, at the recommended watcher interval: the shortest
        feasible TTL of each, its recovery, and what the heartbeat costs at the load."""
        table = self.candidates[self.candidates["watcher_interval"] == self.watcher_interval]
        bare = table[table["heartbeat_interval"].isna()]
        feasible = bare[bare["feasible"]]
        if len(feasible):
            first = feasible.loc[feasible["ttl"].idxmin()]
            without = (
                "without a heartbeat the lease must outlast nearly every job: the shortest "
                f"feasible TTL is {duration(first['ttl'])}, and a crash then waits about "
                f"{duration(first['predicted_recovery_mean'])}"
            )
        elif len(bare):
            safest = bare.loc[bare["predicted_false_expiry_high"].idxmin()]
            allowed = self.target_false_expiry / self.inputs["margin"]
            why = (
                f" (predicted {percent(safest['predicted_false_expiry'])}: "
                f"{count(self.inputs['durations_n'], 'observed job')} cannot show a smaller share "
                "outlasting the TTL)"
                if safest["predicted_false_expiry"] <= allowed
                else ""
            )
            without = (
                "without a heartbeat no TTL searched is feasible: the lowest false-expiry upper "
                f"bound is {percent(safest['predicted_false_expiry_high'])} per job{why}, over "
                f"target / margin ({percent(allowed)})"
            )
        else:
            without = "no TTL without a heartbeat was searched"
        h = self.heartbeat_interval
        if h is None:
            return f"{without}; the recommendation needs no heartbeat"
        return (
            f"{without}; with a heartbeat every {duration(h)} the TTL only has to outlast the gap "
            f"between renewals: {duration(self.ttl)}, recovering in about "
            f"{duration(self.recovery_mean)}, for {amount(self.heartbeat_load)} heartbeat "
            f"statements/s at {self.inputs['jobs_per_s']:.3g} jobs/s"
        )

    def choice_rule(self) -> str:
        """How the recommendation was chosen among the feasible (its `prefer`), in words."""
        return prefer_rule(self.prefer, self.inputs["recovery_tolerance"])

    def shortfall(self) -> str | None:
        """'NOT MET: ...' when no candidate met the target (the headline's figure is then the
        lowest found); else None."""
        if self.met:
            return None
        floor = self.inputs.get("min_ttl")
        above = f" with TTL >= the {duration(floor)} floor (min_ttl)" if floor is not None else ""
        return (
            f"NOT MET: no candidate{above} has a false-expiry upper bound below "
            f"{percent(self.target_false_expiry / self.inputs['margin'])} (target / margin); this "
            f"is the lowest found{' at or above the floor' if floor is not None else ''}."
        )

    def verdict(self) -> str | None:
        """One line: whether the evidence agrees with the prediction (None without evidence)."""
        return advice_evidence.verdict(self)

    def target_line(self) -> str | None:
        """Whether the simulation confirms the target (None without evidence)."""
        return advice_evidence.target_line(self)

    def findings(self) -> list[str]:
        """Where the simulation and the closed form part, and which figure the advice gives."""
        return advice_evidence.findings(self)

    def warnings(self) -> list[str]:
        """The input's warnings: the durations as read, and a load of 80% or more."""
        i = self.inputs
        out = list(i.get("durations_read", {}).get("warnings", []))
        return out + ([i["load_warning"]] if i.get("load_warning") else [])

    def recovery_line(self) -> str:
        i = self.inputs
        source = (
            "simulated, see the finding" if self.recovery_source == "simulated" else "predicted"
        )
        step = (
            "the watcher requeues expired leases"
            if not i["claim_takes_expired"]
            else "claims take expired leases"
        )
        return (
            f"recovery after a crash: mean {duration(self.recovery_mean)} ({source}), p95 "
            f"{duration(self.predicted_recovery_p95)} (predicted); {count(i['workers'], 'worker')} "
            f"polling every {duration(i['poll_interval'])}, {percent(self.utilisation)} busy: a "
            "crashed job waits for an idle worker's poll or a busy one's next free moment, the "
            f"crashed worker back after {duration(self.assumptions.restart_delay)}; {step}"
        )

    def counts_line(self) -> str:
        """How many candidates met the target and how many were feasible, with the rules."""
        table, i = self.candidates, self.inputs
        rules = [f"upper bound within target / margin {i['margin']:g}"]
        if i["heartbeats_per_ttl"]:
            rules.append(f"TTL at least {i['heartbeats_per_ttl']:g} heartbeat intervals")
        if i["max_db_load"] is not None:
            rules.append(f"DB load within {i['max_db_load']:g} statements/s")
        if i["min_ttl"] is not None:
            rules.append(f"TTL at least {duration(i['min_ttl'])}")
        met, feasible = int(table["meets_target"].sum()), int(table["feasible"].sum())
        return (
            f"chosen from {count(len(table), 'candidate')}: {met} meet the target (95% upper bound "
            f"within {percent(self.target_false_expiry)}), {feasible} "
            f"{'is' if feasible == 1 else 'are'} feasible ({', '.join(rules)})"
        )

    def __str__(self) -> str:
        i = self.inputs
        floor = i.get("min_ttl")
        lines = [self.headline()]
        shortfall = self.shortfall()  # None when met
        if shortfall is not None:
            lines.append("  " + shortfall)
        lines += [f"  warning: {w}" for w in self.warnings()]
        lines.append("  " + self.load_line())
        lines += ["  " + line for line in self.risk_lines()]
        lines += ["  " + line for line in self.tradeoff_lines()]
        lines += [f"  where it sits: {line}" for line in self.position]
        read = i.get("durations_read", {})
        lines += [
            f"  durations: {read['echo']}"
            if read.get("echo")
            else f"  durations: {count(i['durations_n'], 'job')}, "
            f"median {duration(i['durations_median'])}, "
            f"p99 {duration(i['durations_p99'])}, max {duration(i['durations_max'])}"
        ]
        lines += ["  assumptions: " + self.assumptions.lines()[0]]
        lines += ["               " + line for line in self.assumptions.lines()[1:]]
        rate = f"at {i['jobs_per_s']:.3g} jobs/s"
        lines += [
            "  " + self.recovery_line(),
            f"  DB load {rate}: {amount(self.heartbeat_load)} heartbeats/s + "
            f"{amount(self.watcher_load)} watcher ticks/s",
            "  " + self.counts_line(),
        ]
        if floor is not None:
            below = int((self.candidates["ttl"] < floor).sum())
            lines.append(
                f"  TTL floor: {duration(floor)} (min_ttl); {count(below, 'candidate')} with a "
                f"shorter TTL {'was' if below == 1 else 'were'} ruled out"
            )
        if self.evidence is not None and len(self.evidence):
            lines.append("  evidence (simulated, 95% intervals):")
            lines += ["   " + line for line in evidence_lines(self.evidence)]
            lines += ["  " + line for line in (self.verdict(), self.target_line()) if line]
            lines += ["  " + line for line in self.findings()]
        return "\n".join(lines)

    def save(self, directory: str | Path, *, overwrite: bool = False) -> list[Path]:
        """Write advice.txt (as printed), candidates.csv, scenario.toml (the advised setting) and,
        when verified, evidence.csv into `directory` (created if missing; one that holds files
        only with `overwrite`). Returns the files written."""
        out = files.directory(directory, overwrite)
        written = [out / "advice.txt", out / "candidates.csv", out / "scenario.toml"]
        written[0].write_text(str(self) + "\n", encoding="utf-8")
        self.candidates.to_csv(written[1], index=False)
        written[2].write_text(dumps(self.scenario()), encoding="utf-8")
        if self.evidence is not None:
            written.append(out / "evidence.csv")
            self.evidence.to_csv(written[-1], index=False)
        return written

    def save_report(self, path: str | Path, *, review=None) -> Path:
        """One self-contained HTML file: the advice, its assumptions, risk, trade-off chart and
        evidence (and a design review of it, if given); sim.report writes it."""
        from sim.report import advice_report

        return advice_report(self, path, review=review)


def _setting(ttl: float, h: float | None, w: float) -> str:
    """'TTL 2 s, heartbeat every 0.5 s, watcher every 1 s'."""
    beat = "no heartbeat" if h is None else f"heartbeat every {duration(h)}"
    return f"TTL {duration(ttl)}, {beat}, watcher every {duration(w)}"


def evidence_lines(evidence: pd.DataFrame) -> list[str]:
    """One line per simulated TTL: false expiry and recovery with their 95% intervals and
    predictions."""
    lines = []
    for row in evidence.itertuples():
        mark = "*" if row.recommended else " "
        interval = (
            f"[{duration(row.recovery_ci_low)}, {duration(row.recovery_ci_high)}]"
            if np.isfinite(row.recovery_ci_low)
            else "(too few crashes for an interval)"
        )
        lines.append(
            f"{mark} TTL {duration(row.ttl)}: false expiry {percent(row.false_expiry)} "
            f"[{percent(row.false_expiry_ci_low)}, {percent(row.false_expiry_ci_high)}] of "
            f"{count(row.leases, 'lease')} (predicted {percent(row.predicted_false_expiry)}); "
            f"recovery {duration(row.recovery_mean)} {interval} over "
            f"{count(row.recoveries, 'crash', 'crashes')} (predicted "
            f"{duration(row.predicted_recovery_mean)}); {percent(row.utilisation)} busy with "
            f"{count(row.crash_rate, 'crash', 'crashes')} per worker-hour"
        )
    return lines


def _argument_types(column, unit, seed, takes_expired, verify, progress, candidates, executor):
    """ConfigError naming the first argument of advise() whose type cannot be right."""
    expect_text("column", column, none_ok=True)
    expect_text("unit", unit)
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer):
        raise ConfigError(f"seed: expected a whole number, got {type(seed).__name__} {seed!r:.60}")
    expect_flag("claim_takes_expired", takes_expired)
    expect_flag("verify", verify)
    expect_flag("progress", progress, none_ok=True)
    if candidates is not None and not isinstance(candidates, Mapping):
        raise ConfigError(
            f"candidates: expected a dict of ladders, got {type(candidates).__name__}"
        )
    if not (executor is None or callable(getattr(executor, "map", None))):
        raise ConfigError(f"executor: expected a concurrent.futures.Executor, got {executor!r:.60}")


def advise(
    durations,
    *,
    column: str | None = None,
    unit: str = "s",
    pause_rate: float = 2.0,
    pause_duration: Dist | None = None,
    crash_rate: float = 1.0,
    restart_delay: float = 5.0,
    heartbeat_delay: Dist | None = None,
    db_stall_rate: float = 0.0,
    db_stall_duration: Dist | float = 30.0,
    target_false_expiry: float | None = None,
    target_per_day: float | None = None,
    prefer: str = "balanced",
    poll_interval: float = 1.0,
    workers: int = 4,
    arrival_rate: float | None = None,
    claim_takes_expired: bool = False,
    statement_latency: float = 0.002,
    candidates: Mapping[str, Sequence] | None = None,
    margin: float = 2.0,
    recovery_tolerance: float = 0.1,
    heartbeats_per_ttl: float = 2.0,
    max_db_load: float | None = None,
    min_ttl: float | None = None,
    verify: bool = True,
    replications: int = 4,
    evidence_jobs: int = 1500,
    seed: int = 0,
    executor=None,
    progress: bool | None = None,
) -> Advice:
    """Recommend lease TTL, heartbeat interval and watcher interval (see the module docstring).

    durations: observed processing times (array-like in `unit`), a CSV path read with `column` and
    `unit` (sim.durations: the column must be named when several could be durations), or "sample"
    (the bundled example). The fault assumptions (sim.lease_risk.Assumptions): pause_rate and
    crash_rate per worker-hour; restart_delay, seconds until a crashed worker polls again;
    pause_duration a Dist (default lognormal, median 0.5 s, p99 5 s); heartbeat_delay, the
    heartbeat statement's extra delay (default lognormal, median 10 ms, p99 200 ms); db_stall_rate
    DB failovers or stalls per day (default 0), each db_stall_duration long (seconds or a Dist,
    default 30 s). workers and poll_interval describe the consumers; arrival_rate (jobs/s) sets the
    load and the per-day risk (default: half of what the workers can carry, said in the advice); a
    rate the workers cannot carry is refused. target_false_expiry (per job, default 0.001) or
    target_per_day (false expiries a day at arrival_rate): the risk to stay under. prefer: "safety",
    "recovery" or "balanced" (default), how the choice weighs recovery against risk.
    claim_takes_expired: whether claims take expired leases themselves (then the watcher is only a
    backstop and not on the recovery path); by default the watcher does the requeue.
    candidates: {"ttl": [...], "heartbeat_interval": [..., None], "watcher_interval": [...]} to
    replace the default ladders (None: no heartbeat); default ladders are extended when the best
    setting sits at their end. min_ttl: a floor in seconds; shorter TTLs are infeasible (and left
    out of the evidence). verify: simulate the recommendation and its neighbouring TTLs
    (`replications` runs of `evidence_jobs` jobs each, or more for a fast queue, through sim.sweep).
    """
    _argument_types(column, unit, seed, claim_takes_expired, verify, progress, candidates, executor)
    read_in = read(durations, column, unit)
    values = read_in.seconds
    for warning in read_in.warnings:
        warnings.warn(warning, LeaseWarning, stacklevel=2)
    _check_choice(target_false_expiry, target_per_day, prefer)
    _positive("pause_rate", pause_rate, zero_ok=True)
    _positive("crash_rate", crash_rate, zero_ok=True)
    _positive("restart_delay", restart_delay, zero_ok=True)
    _positive("poll_interval", poll_interval)
    _positive("workers", workers, whole=True)
    _positive("statement_latency", statement_latency, zero_ok=True)
    _positive("recovery_tolerance", recovery_tolerance, zero_ok=True)
    _positive("heartbeats_per_ttl", heartbeats_per_ttl)
    _positive("replications", replications, whole=True)
    _positive("evidence_jobs", evidence_jobs, whole=True)
    _positive("db_stall_rate", db_stall_rate, zero_ok=True)
    if arrival_rate is not None:
        _positive("arrival_rate", arrival_rate)
    if max_db_load is not None:
        _positive("max_db_load", max_db_load)
    if min_ttl is not None:
        _positive("min_ttl", min_ttl)
    _positive("margin", margin)
    if margin < 1:
        raise ConfigError(
            f"margin: must be >= 1 (predicted false expiry <= target / margin), got {margin!r}"
        )
    if not isinstance(db_stall_duration, Dist):
        _positive("db_stall_duration", db_stall_duration)
        db_stall_duration = Dist.constant(db_stall_duration)
    assumptions = Assumptions(
        pause_rate=float(pause_rate),
        pause_duration=Dist.lognormal(0.5, 5.0) if pause_duration is None else pause_duration,
        crash_rate=float(crash_rate),
        statement_latency=float(statement_latency),
        heartbeat_delay=Assumptions.heartbeat_delay if heartbeat_delay is None else heartbeat_delay,
        db_stall_rate=float(db_stall_rate),
        db_stall_duration=db_stall_duration,
        restart_delay=float(restart_delay),
    ).check()
    workers = int(workers)
    candidates = dict(candidates or {})
    unknown = set(candidates) - {"ttl", "heartbeat_interval", "watcher_interval"}
    if unknown:
        raise ConfigError(
            f"candidates: unknown key {sorted(unknown)[0]!r}; use ttl, heartbeat_interval, "
            "watcher_interval"
        )
    ttls = _ladder("ttl", candidates.get("ttl", DEFAULT_TTLS))
    heartbeats = _ladder(
        "heartbeat_interval",
        candidates.get("heartbeat_interval", DEFAULT_HEARTBEATS),
        allow_none=True,
    )
    watchers = _ladder("watcher_interval", candidates.get("watcher_interval", DEFAULT_WATCHERS))
    if min_ttl is not None and min_ttl > max(ttls):
        raise ConfigError(
            f"min_ttl: {min_ttl:g} s is above every candidate TTL (the longest considered is "
            f"{max(ttls):g} s); lower it or add longer TTLs to candidates['ttl']"
        )

    job = _durations_dist(values)
    load = _load(job, workers, arrival_rate, assumptions, target_per_day)
    if load["load_warning"]:
        warnings.warn(load["load_warning"], LeaseWarning, stacklevel=2)
    target = (
        _per_job_target(target_per_day, load["jobs_per_s"])
        if target_per_day is not None
        else 1e-3
        if target_false_expiry is None
        else float(target_false_expiry)
    )
    inputs = {
        "durations_n": int(len(values)),
        "durations_median": float(np.median(values)),
        "durations_p99": float(np.quantile(values, 0.99)),
        "durations_max": float(values.max()),
        "durations_read": {**read_in.facts(), "echo": read_in.echo()},
        "pause_rate": float(pause_rate),
        "pause_duration": assumptions.pause_duration,
        "crash_rate": float(crash_rate),
        "workers": workers,
        "poll_interval": float(poll_interval),
        "arrival_rate": None if arrival_rate is None else float(arrival_rate),
        **load,
        "claim_takes_expired": bool(claim_takes_expired),
        "statement_latency": float(statement_latency),
        "assumptions": assumptions,
        "margin": float(margin),
        "recovery_tolerance": float(recovery_tolerance),
        "heartbeats_per_ttl": float(heartbeats_per_ttl),
        "max_db_load": max_db_load,
        "min_ttl": None if min_ttl is None else float(min_ttl),
        "prefer": prefer,
        "seed": seed,
    }
    searched = {"ttl": ttls, "heartbeat_interval": heartbeats, "watcher_interval": watchers}
    table, chosen, met = _search(job, searched, target, inputs)
    extended = []
    if "ttl" not in candidates:  # the default ladders adapt when the choice sits at their end
        allowed = [t for t in ttls if min_ttl is None or t >= min_ttl]
        if chosen["ttl"] == min(ttls) and (min_ttl is None or min_ttl < min(ttls)):
            searched = {
                "ttl": _merge(ttls, SHORT_TTLS),
                "heartbeat_interval": _merge(heartbeats, SHORT_HEARTBEATS),
                "watcher_interval": _merge(watchers, SHORT_WATCHERS),
            }
            extended.append(
                f"shorter TTLs ({duration(min(SHORT_TTLS))} to {duration(max(SHORT_TTLS))}) were "
                f"searched because the best setting sat at {duration(min(ttls))}, the end of the "
                "default ladder"
            )
        elif chosen["ttl"] == max(allowed):
            searched = {
                **searched,
                "ttl": _merge(ttls, LONG_TTLS),
                "heartbeat_interval": _merge(heartbeats, LONG_HEARTBEATS),
            }
            extended.append(
                f"longer TTLs (up to {duration(max(LONG_TTLS))}) were searched because the best "
                f"setting sat at {duration(max(ttls))}, the end of the default ladder"
            )
        if extended:
            table, chosen, met = _search(job, searched, target, inputs)
    inputs["searched"] = {k: [v for v in vs] for k, vs in searched.items()}
    h = None if pd.isna(chosen["heartbeat_interval"]) else float(chosen["heartbeat_interval"])
    p95 = float(
        np.quantile(
            recovery_draws(job, float(chosen["ttl"]), h, float(chosen["watcher_interval"]), inputs),
            0.95,
        )
    )
    advice = Advice(
        ttl=float(chosen["ttl"]),
        heartbeat_interval=h,
        watcher_interval=float(chosen["watcher_interval"]),
        predicted_false_expiry=float(chosen["predicted_false_expiry"]),
        predicted_recovery_mean=float(chosen["predicted_recovery_mean"]),
        predicted_recovery_p95=p95,
        db_load=float(chosen["db_load"]),
        heartbeat_load=float(chosen["heartbeat_load"]),
        watcher_load=float(chosen["watcher_load"]),
        target_false_expiry=target,
        met=met,
        candidates=table,
        evidence=None,
        durations=job,
        inputs=inputs,
        predicted_false_expiry_high=float(chosen["predicted_false_expiry_high"]),
        false_expiries_per_day=float(chosen["false_expiries_per_day"]),
        false_expiries_per_day_high=float(chosen["false_expiries_per_day_high"]),
        target_per_day=None if target_per_day is None else float(target_per_day),
    )
    neighbours = _neighbours(advice, searched["ttl"])
    advice.neighbours = neighbours
    advice.position = extended + _position(advice, neighbours, searched["ttl"])
    if verify:
        floored = [t for t in searched["ttl"] if min_ttl is None or t >= min_ttl]
        advice.evidence = advice_evidence.simulate(
            advice, floored, int(replications), int(evidence_jobs), seed, executor, progress
        )
    return advice


def _check_choice(target_false_expiry, target_per_day, prefer) -> None:
    """ConfigError for a bad target (per job or per day, not both) or preference."""
    if target_false_expiry is not None and target_per_day is not None:
        raise ConfigError(
            "target_per_day: give a target per job (target_false_expiry) or per day, not both"
        )
    if target_false_expiry is not None:
        _positive("target_false_expiry", target_false_expiry)
        if target_false_expiry >= 1:
            raise ConfigError(
                f"target_false_expiry: must be a probability below 1, got {target_false_expiry!r}"
            )
    if target_per_day is not None:
        _positive("target_per_day", target_per_day)
    if not isinstance(prefer, str) or prefer not in PREFER:
        raise ConfigError(f"prefer: {prefer!r} is not one of {', '.join(PREFER)}")


def _load(job: Dist, workers: int, arrival_rate, assumptions: Assumptions, target_per_day) -> dict:
    """The pool and its load: an arrival rate it cannot carry is refused (naming workers and the
    capacity); without a rate, half the capacity is assumed (a per-day target needs the rate)."""
    pool = pool_of(job, workers, assumptions)
    if arrival_rate is None and target_per_day is not None:
        raise ConfigError(
            "target_per_day: needs arrival_rate (jobs/s), since how many jobs a day there are "
            "decides what a per-day target asks of each job"
        )
    if arrival_rate is not None:
        pool.refuse_overload(float(arrival_rate))
    rate = rate_of(pool, arrival_rate)
    return {
        "pool": pool,
        "jobs_per_s": rate,
        "capacity": pool.capacity,
        "utilisation": pool.utilisation(rate),
        "load_warning": None if arrival_rate is None else pool.load_warning(rate),
    }


def _per_job_target(per_day: float, jobs_per_s: float) -> float:
    jobs_per_day = jobs_per_s * SECONDS_PER_DAY
    if per_day >= jobs_per_day:
        raise ConfigError(
            f"target_per_day: {per_day:g} a day is not below the {jobs_per_day:,.0f} jobs a day at "
            f"{jobs_per_s:g} jobs/s; a target must be a share of them"
        )
    return per_day / jobs_per_day


def _merge(ladder: list, extra) -> list:
    return sorted(set(ladder) | {float(v) for v in extra}, key=lambda v: (v is not None, v or 0.0))


def _search(
    job: Dist, ladders: dict, target: float, inputs: dict
) -> tuple[pd.DataFrame, pd.Series, bool]:
    """(the candidate table with feasibility and scores, the chosen row, whether the target was
    met)."""
    table = candidate_table(
        job,
        ttls=ladders["ttl"],
        heartbeats=ladders["heartbeat_interval"],
        watchers=ladders["watcher_interval"],
        **_model_inputs(inputs),
    )
    rules = feasibility_rules(table, target, inputs)
    feasible = rules.all(axis=1)
    table["meets_target"] = table["predicted_false_expiry_high"] <= target
    table["feasible"] = feasible
    table["score"] = score(table, target, inputs["prefer"])
    met = bool(feasible.any())
    return table, choose(table, feasible, rules["min_ttl"], inputs["recovery_tolerance"]), met


# a neighbour is a candidate row (without its load split and meets_target) at one TTL step
NEIGHBOUR_COLUMNS = ["step"] + [
    c for c in CANDIDATE_COLUMNS if c not in ("heartbeat_load", "watcher_load", "meets_target")
]


def _neighbours(advice: Advice, ttls: list[float]) -> pd.DataFrame:
    """The chosen setting and the best setting one TTL step shorter and longer (by the same rule;
    with none feasible at a TTL, its lowest risk), for the trade-off lines and the report."""
    table, i = advice.candidates, ttls.index(advice.ttl)
    chosen = _row_of(advice)
    rows = []
    for step, at in (("shorter", i - 1), ("chosen", i), ("longer", i + 1)):
        if not 0 <= at < len(ttls):
            continue
        if step == "chosen":
            row = chosen
        else:
            here = table[table["ttl"] == ttls[at]]
            if here.empty:
                continue
            everything = pd.Series(True, index=here.index)
            row = choose(here, here["feasible"], everything, advice.inputs["recovery_tolerance"])
        rows.append({"step": step, **{k: row[k] for k in NEIGHBOUR_COLUMNS[1:]}})
    return pd.DataFrame(rows, columns=NEIGHBOUR_COLUMNS)


def _row_of(advice: Advice) -> pd.Series:
    """The candidate-table row of the recommendation."""
    table = advice.candidates
    hb = table["heartbeat_interval"]
    same = (
        (table["ttl"] == advice.ttl)
        & (hb.isna() if advice.heartbeat_interval is None else hb == advice.heartbeat_interval)
        & (table["watcher_interval"] == advice.watcher_interval)
    )
    return table[same].iloc[0]


def _position(advice: Advice, neighbours: pd.DataFrame, ttls: list[float]) -> list[str]:
    """Where the recommended TTL sits in the searched range, and why not one step either side
    (`neighbours`: the advice's NEIGHBOUR_COLUMNS table)."""
    inputs, table, ttl = advice.inputs, advice.candidates, advice.ttl
    floor = inputs["min_ttl"]
    rules = feasibility_rules(table, advice.target_false_expiry, inputs)
    if floor is not None and ttl == min(t for t in ttls if t >= floor):
        free = choose(
            table,
            rules.drop(columns="min_ttl").all(axis=1),
            pd.Series(True, index=table.index),
            inputs["recovery_tolerance"],
        )
        if free["ttl"] < ttl:
            return [
                f"at your floor: min_ttl {duration(floor)}; without it the advisor would choose "
                f"TTL {duration(free['ttl'])} (of the TTLs searched), which the floor rules out"
            ]
    if ttl == min(ttls):
        return [f"at the range's end: TTL {duration(ttl)} is the shortest searched; {SHORTEST_WHY}"]
    if ttl == max(ttls):
        return [f"at the range's end: TTL {duration(ttl)} is the longest searched; {LONGEST_WHY}"]
    lines = ["interior: the search went past it on both sides"]
    for row in neighbours.itertuples():
        if row.step != "chosen":
            lines.append(
                f"one step {row.step}, TTL {duration(row.ttl)}: {_why_not(advice, row, rules)}"
            )
    return lines


def _why_not(advice: Advice, row, rules: pd.DataFrame) -> str:
    """Why the best setting at a neighbouring TTL lost to the recommendation, with both sides'
    figures."""
    if not row.feasible:
        at = advice.candidates.index[
            (advice.candidates["ttl"] == row.ttl)
            & (advice.candidates["watcher_interval"] == row.watcher_interval)
            & (
                advice.candidates["heartbeat_interval"].isna()
                if pd.isna(row.heartbeat_interval)
                else advice.candidates["heartbeat_interval"] == row.heartbeat_interval
            )
        ][0]
        return "not feasible: " + "; ".join(infeasible_reasons(advice.candidates.loc[at], advice))
    risk = _ratio(advice.predicted_false_expiry, row.predicted_false_expiry)
    slower = row.predicted_recovery_mean / advice.predicted_recovery_mean - 1
    sides = (
        f"false expiry {percent(row.predicted_false_expiry)} against "
        f"{percent(advice.predicted_false_expiry)} ({risk}), recovery "
        f"{duration(row.predicted_recovery_mean)} against "
        f"{duration(advice.predicted_recovery_mean)} ({percent(abs(slower))} "
        f"{'slower' if slower >= 0 else 'faster'})"
    )
    lowest = _lowest_score(advice)
    tolerance = advice.inputs["recovery_tolerance"]
    score = f"its score {duration(row.score)}"
    if row.score > lowest * (1 + tolerance) + 1e-9:
        return (
            f"feasible, {sides}; {score} is more than {tolerance:.0%} above the lowest, "
            f"{duration(lowest)} (prefer {advice.prefer})"
        )
    near = f"feasible, {sides}; {score} is within {tolerance:.0%} of the lowest, {duration(lowest)}"
    if row.db_load > advice.db_load + 1e-12:
        return (
            f"{near}, but it costs {amount(row.db_load)} statements/s against "
            f"{amount(advice.db_load)}"
        )
    return f"{near}, at the same DB load, and the recommendation's is no higher"


def _lowest_score(advice: Advice) -> float:
    """The lowest score among the feasible candidates (NaN when none is feasible)."""
    table = advice.candidates
    return float(table.loc[table["feasible"], "score"].min())


def _lowest_scored(advice: Advice) -> str:
    """'3.39 s, at TTL 2 s, heartbeat every 0.5 s, watcher every 1 s': the lowest score among the
    feasible candidates and the setting that has it."""
    table = advice.candidates
    row = table.loc[table.loc[table["feasible"], "score"].idxmin()]
    h = None if pd.isna(row["heartbeat_interval"]) else row["heartbeat_interval"]
    return f"{duration(row['score'])}, at {_setting(row['ttl'], h, row['watcher_interval'])}"


def _ratio(mine: float, theirs: float) -> str:
    """'3.7 times less risk', '2 times more risk', 'the same risk'."""
    if theirs == mine:
        return "the same risk"
    if theirs == 0:
        return "no risk predicted"
    factor = mine / theirs
    return f"{factor:.2g} times less risk" if factor > 1 else f"{1 / factor:.2g} times more risk"


def infeasible_reasons(row: pd.Series, advice) -> list[str]:
    """The feasibility rules a candidate (a row of advice.candidates) breaks, in words with
    numbers."""
    inputs = advice.inputs
    passed = feasibility_rules(row.to_frame().T, advice.target_false_expiry, inputs).iloc[0]
    hb, per_ttl, latency = (
        row["heartbeat_interval"],
        inputs["heartbeats_per_ttl"],
        inputs["statement_latency"],
    )
    words = {
        "target": lambda: (
            f"its false-expiry upper bound {percent(row['predicted_false_expiry_high'])} per job "
            f"(predicted {percent(row['predicted_false_expiry'])}) is over the target / margin "
            f"({percent(advice.target_false_expiry)} / {inputs['margin']:g} = "
            f"{percent(advice.target_false_expiry / inputs['margin'])})"
        ),
        "heartbeats_per_ttl": lambda: (
            f"a TTL must last at least {per_ttl:g} heartbeat intervals plus statement latency "
            f"({per_ttl:g} x ({hb:g} s + {1000 * latency:g} ms) = {per_ttl * (hb + latency):.6g} "
            "s), so that one lost heartbeat does not lapse the lease"
        ),
        "max_db_load": lambda: (
            f"its {row['db_load']:.3g} statements/s are over max_db_load "
            f"({inputs['max_db_load']:g})"
        ),
        "min_ttl": lambda: f"it is below the TTL floor of {inputs['min_ttl']:g} s",
    }
    return [words[rule]() for rule, ok in passed.items() if not ok]


def _model_inputs(inputs: dict) -> dict:
    return {
        k: inputs[k]
        for k in ("workers", "poll_interval", "arrival_rate", "claim_takes_expired", "assumptions")
    } | {"seed": inputs["seed"]}


# ---- the command line's options: checked here, beside advise() (sim/__main__ only parses them) ---


def command_line_arguments(options) -> dict:
    """advise()'s keyword arguments (all but the durations) from the options of `python -m sim
    advise` (an argparse namespace: target, pause_rate, pause_p99, ...), each checked first:
    ConfigError names the first bad one by its flag ("--pause-p99 0: must be > 0 seconds").
    A p99 option becomes a lognormal with its median at p99/10 (pauses) or p99/20 (heartbeat
    statement delay)."""
    o = options
    checks = [
        (
            "--target",
            o.target,
            o.target is None or 0 < o.target < 1,
            "must be a probability between 0 and 1",
        ),
        (
            "--target-per-day",
            o.target_per_day,
            o.target_per_day is None or o.target_per_day > 0,
            "must be > 0 false expiries a day",
        ),
        (
            "--replications",
            o.replications,
            1 <= o.replications <= MAX_RUNS,
            f"must be from 1 to {MAX_RUNS:,}",
        ),
        ("--pause-rate", o.pause_rate, o.pause_rate >= 0, "must be >= 0 per worker-hour"),
        ("--pause-p99", o.pause_p99, o.pause_p99 > 0, "must be > 0 seconds"),
        ("--crash-rate", o.crash_rate, o.crash_rate >= 0, "must be >= 0 per worker-hour"),
        (
            "--pause-p99",
            o.pause_p99,
            o.pause_p99 <= MAX_SECONDS,
            f"must be at most {MAX_SECONDS:g} s",
        ),
        ("--workers", o.workers, o.workers >= 1, "must be at least 1"),
        ("--workers", o.workers, o.workers <= MAX_WORKERS, f"must be at most {MAX_WORKERS:,}"),
        (
            "--poll-interval",
            o.poll_interval,
            o.poll_interval <= MAX_SECONDS,
            f"must be at most {MAX_SECONDS:g} s",
        ),
        ("--poll-interval", o.poll_interval, o.poll_interval > 0, "must be > 0 seconds"),
        (
            "--arrival-rate",
            o.arrival_rate,
            o.arrival_rate is None or o.arrival_rate > 0,
            "must be > 0 jobs per second",
        ),
        ("--min-ttl", o.min_ttl, o.min_ttl is None or o.min_ttl > 0, "must be > 0 seconds"),
        (
            "--heartbeat-delay-p99",
            o.heartbeat_delay_p99,
            o.heartbeat_delay_p99 > 0,
            "must be > 0 seconds",
        ),
        ("--db-stall-rate", o.db_stall_rate, o.db_stall_rate >= 0, "must be >= 0 per day"),
        (
            "--db-stall-seconds",
            o.db_stall_seconds,
            o.db_stall_seconds > 0,
            "must be > 0 seconds",
        ),
        (
            "--max-db-load",
            o.max_db_load,
            o.max_db_load is None or o.max_db_load > 0,
            "must be > 0 statements per second",
        ),
        (
            "--min-ttl",
            o.min_ttl,
            o.min_ttl is None or not o.min_ttl > max(DEFAULT_TTLS),
            f"must be at most {max(DEFAULT_TTLS)} s, the longest TTL the advisor considers",
        ),
    ]
    for flag, value, ok, message in checks:
        if not ok or (isinstance(value, float) and not math.isfinite(value)):
            raise ConfigError(f"{flag} {value:g}: {message}")
    if o.target_per_day is not None and o.target is not None:
        raise ConfigError("--target-per-day: give it or --target (per job), not both")
    if o.target_per_day is not None and o.arrival_rate is None:
        raise ConfigError(
            f"--target-per-day {o.target_per_day:g}: needs --arrival-rate (jobs/s), since how many "
            "jobs a day there are decides what it asks of each job"
        )
    return {
        "column": o.column,
        "unit": o.unit,
        "target_false_expiry": o.target,
        "target_per_day": o.target_per_day,
        "prefer": o.prefer,
        "replications": o.replications,
        "pause_rate": o.pause_rate,
        "pause_duration": Dist.lognormal(o.pause_p99 / 10, o.pause_p99),
        "crash_rate": o.crash_rate,
        "heartbeat_delay": Dist.lognormal(o.heartbeat_delay_p99 / 20, o.heartbeat_delay_p99),
        "db_stall_rate": o.db_stall_rate,
        "db_stall_duration": o.db_stall_seconds,
        "workers": o.workers,
        "poll_interval": o.poll_interval,
        "arrival_rate": o.arrival_rate,
        "max_db_load": o.max_db_load,
        "min_ttl": o.min_ttl,
        "verify": not o.no_verify,
        "seed": o.seed,
    }
