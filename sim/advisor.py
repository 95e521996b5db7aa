"""Lease settings advice: TTL, heartbeat interval and watcher interval for observed job durations.

    import sim
    advice = sim.advise("durations.csv", pause_rate=2, target_false_expiry=1e-3)
    print(advice)            # TTL 20 s, heartbeat every 5 s, watcher every 5 s: predicted ...
    advice.candidates        # every setting considered, with its predictions and feasibility
    advice.evidence          # a small simulated sweep around the recommendation
    sim.run(advice.scenario())

How it chooses (all predictions come from sim.analytic, whose docstrings give the assumptions):

1. Each candidate (TTL L, heartbeat interval h or none, watcher interval W) gets a predicted
   false-expiry probability per job (stop-the-world pauses; without heartbeats also jobs that
   outlast L), a predicted mean recovery latency after a crash, and the DB load it costs: the
   heartbeat and watcher statements per second ("upkeep"), at full load unless an arrival rate
   is given.
2. Feasible: predicted false expiry <= target / margin (margin 2 by default: the formulas are
   approximations, and a recommendation should meet the target in simulation too, not only on
   paper); L >= heartbeats_per_ttl x h (default 2: one lost heartbeat does not lapse the lease);
   upkeep <= max_db_load when given; L >= min_ttl when a floor is given (teams often impose one
   for GC pauses and deploys that the durations do not show).
3. Among the feasible, the fastest predicted recovery R* is found; the recommendation is the
   cheapest in DB load whose predicted recovery is within recovery_tolerance (10%) of R*. Ties go
   to the faster recovery, then to the lower false expiry. If none is feasible, the advice says
   NOT MET and gives the lowest predicted false expiry (at or above the TTL floor, if any).

With verify=True the recommendation is simulated (sim.sweep) beside its neighbouring TTLs, and
the evidence table puts simulated figures, with confidence intervals, next to the predictions.

The bundled example, sim/data/sample_durations.csv (`python -m sim advise sample`), holds 2000
payment processing times made by sample_durations() below (seed 20260515), written by
`python -c "import sim.advisor as a; a.write_sample_durations('sim/data/sample_durations.csv')"`;
tests/analysis/test_advisor.py checks that the file and the function still agree.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd

from sim import analytic, files, lease_risk
from sim.dists import Dist
from sim.durations import Durations, from_values, read_durations
from sim.errors import ConfigError
from sim.lease_risk import SECONDS_PER_DAY, Assumptions
from sim.limits import MAX_SECONDS, MAX_WORKERS
from sim.scenario import Faults, LeaseWarning, Policy, Scenario, Workload, dumps
from sim.stats import wilson_interval
from sim.wording import NO_VALUE, count, duration, percent

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
LONGEST_WHY = "a lease of more than a day leaves a crashed job waiting a day; split the job or add a heartbeat"
MAX_SAMPLES = 20_000  # longer duration lists are represented by this many quantiles
SAMPLE_SEED = 20260515
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
    "feasible",
]


def sample_durations_path() -> Path:
    """The bundled example CSV of payment processing times (column processing_seconds)."""
    return Path(str(resources.files("sim") / "data" / "sample_durations.csv"))


def sample_durations(n: int = 2000, seed: int = SAMPLE_SEED) -> pd.DataFrame:
    """Synthetic payment processing times: 96% card payments, lognormal (median 1.2 s, p99 6 s);
    4% slow paths (3-D Secure challenge, PSP retry), lognormal (median 12 s, p99 90 s); ms resolution."""
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
    """Observed durations as sim.durations.Durations (seconds + how they were read): from a CSV path
    ("sample" is the bundled example), an array-like in `unit`, or a Durations; ConfigError if bad."""
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
    out = []
    for v in values:
        if v is None and allow_none:
            out.append(None)
            continue
        _positive(f"candidates.{name}", v)
        out.append(float(v))
    if not out:
        raise ConfigError(f"candidates.{name}: has no values")
    return sorted(set(out), key=lambda v: (v is not None, v or 0.0))


# ---- the advice -----------------------------------------------------------------------------------


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
    target_false_expiry: float
    met: bool  # some candidate met the target (else this is the lowest false expiry found)
    candidates: pd.DataFrame  # every setting considered (CANDIDATE_COLUMNS)
    evidence: pd.DataFrame | None  # simulated neighbourhood of the recommendation (verify=True)
    durations: Dist = field(repr=False)
    inputs: dict = field(default_factory=dict)
    predicted_false_expiry_high: float = (
        np.nan
    )  # 95% upper bound per job (the durations are a sample)
    false_expiries_per_day: float = np.nan  # at the arrival rate (full load if none was given)
    false_expiries_per_day_high: float = np.nan
    position: list[str] = field(
        default_factory=list
    )  # where the TTL sits in the searched range, and why

    @property
    def assumptions(self) -> Assumptions:
        return self.inputs["assumptions"]

    def scenario(
        self,
        *,
        jobs: int = 2000,
        seed: int = 1,
        arrival_rate: float | None = None,
        name: str = "advised",
    ) -> Scenario:
        """A runnable Scenario with the recommended settings, the observed durations (resampled) as
        processing times, the assumed faults (pauses, crashes, heartbeat delay; a DB stall as a hanging
        partition of each worker), and Poisson arrivals (the given arrival rate, else 50% utilisation
        of the workers) long enough for `jobs` jobs."""
        inputs = self.inputs
        a = self.assumptions
        workers = inputs["workers"]
        mean = self.durations.mean_value()
        rate = arrival_rate or inputs.get("arrival_rate") or 0.5 * workers / mean
        horizon = jobs / rate + 3 * self.durations.quantile(0.999)
        h = self.heartbeat_interval
        stalls = (
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
                pause_rate=a.pause_rate,
                pause_duration=a.pause_duration,
                heartbeat_delay=a.heartbeat_delay if h is not None else Faults.heartbeat_delay,
                **stalls,
            ),
            horizon=float(horizon),
            seed=seed,
        )

    def headline(self) -> str:
        heartbeat = (
            "no heartbeat"
            if self.heartbeat_interval is None
            else f"heartbeat every {duration(self.heartbeat_interval)}"
        )
        return (
            f"TTL {duration(self.ttl)}, {heartbeat}, watcher every {duration(self.watcher_interval)}: predicted false expiry "
            f"{percent(self.predicted_false_expiry)} per job (target {percent(self.target_false_expiry)}), "
            f"recovery ~ {duration(self.predicted_recovery_mean)}, {self.db_load:.2g} heartbeat + watcher statements/s"
        )

    def risk_lines(self) -> list[str]:
        """The false-expiry risk per job, per day and per year at the queue's rate, with 95% upper bounds."""
        i = self.inputs
        rate = i["jobs_per_s"]
        where = (
            f"at {rate:.3g} jobs/s (arrival_rate)"
            if i["arrival_rate"] is not None
            else f"at full load, {rate:.3g} jobs/s (give arrival_rate for your queue's)"
        )
        per_year, per_year_high = (
            365 * self.false_expiries_per_day,
            365 * self.false_expiries_per_day_high,
        )
        return [
            f"risk {where}: {percent(self.predicted_false_expiry)} of jobs (95% upper bound "
            f"{percent(self.predicted_false_expiry_high)}) = {_events(self.false_expiries_per_day)} false expiries a day "
            f"(upper bound {_events(self.false_expiries_per_day_high)})",
            f"  duplicate external effects: up to {_events(per_year)} a year (upper bound {_events(per_year_high)}); "
            "each false expiry lets a second worker repeat the PSP call, harmless only with an idempotency key",
            "  " + self.slack_line(),
        ]

    def slack_line(self) -> str:
        """What a lease survives, against the declared tails (the review's item 2, before any run)."""
        a, h = self.assumptions, self.heartbeat_interval
        if h is None:
            over = float(np.mean(np.asarray(self.durations.samples) > self.ttl))
            return (
                f"slack: no heartbeat, so the lease must outlast the whole job; {percent(over)} of the observed "
                f"jobs took longer than the {duration(self.ttl)} TTL"
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
            f"slack: a lease survives a stall of up to {duration(slack)} (TTL - heartbeat interval - statement "
            f"latency); of the declared tails, longer than that: {', '.join(longer)}"
        )

    def shortfall(self) -> str | None:
        """'NOT MET: ...' when no candidate met the target (the headline's figure is then the lowest found); else None."""
        if self.met:
            return None
        floor = self.inputs.get("min_ttl")
        above = f" with TTL >= the {duration(floor)} floor (min_ttl)" if floor is not None else ""
        return (
            f"NOT MET: no candidate{above} is predicted below "
            f"{percent(self.target_false_expiry / self.inputs['margin'])} (target / margin); this is the lowest "
            f"predicted false expiry found{' at or above the floor' if floor is not None else ''}."
        )

    def __str__(self) -> str:
        i = self.inputs
        lines = [self.headline()]
        floor = i.get("min_ttl")
        if not self.met:
            lines.append("  " + self.shortfall())
        load = "at full load" if i["arrival_rate"] is None else f"at {i['arrival_rate']:.3g} jobs/s"
        read = i.get("durations_read", {})
        lines += ["  " + line for line in self.risk_lines()]
        lines += [f"  where it sits: {line}" for line in self.position]
        lines += [
            f"  durations: {read['echo']}"
            if read.get("echo")
            else f"  durations: {count(i['durations_n'], 'job')}, median {duration(i['durations_median'])}, "
            f"p99 {duration(i['durations_p99'])}, max {duration(i['durations_max'])}"
        ]
        lines += [f"  warning: {w}" for w in read.get("warnings", [])]
        lines += ["  assumptions: " + self.assumptions.lines()[0]]
        lines += ["               " + line for line in self.assumptions.lines()[1:]]
        lines += [
            f"  recovery after a crash: mean {duration(self.predicted_recovery_mean)}, p95 {duration(self.predicted_recovery_p95)} "
            f"({count(i['workers'], 'worker')} polling every {duration(i['poll_interval'])}; "
            + (
                "the watcher requeues expired leases)"
                if not i["claim_takes_expired"]
                else "claims take expired leases)"
            ),
            f"  DB load {load}: {self.heartbeat_load:.2g} heartbeats/s + {self.watcher_load:.2g} watcher ticks/s",
            f"  chosen from {count(len(self.candidates), 'candidate')} ({int(self.candidates['feasible'].sum())} feasible): "
            f"the cheapest within {percent(i['recovery_tolerance'])} of the fastest feasible recovery",
        ]
        if floor is not None:
            below = int((self.candidates["ttl"] < floor).sum())
            lines.append(
                f"  TTL floor: {duration(floor)} (min_ttl); {count(below, 'candidate')} with a shorter TTL "
                f"{'was' if below == 1 else 'were'} ruled out"
            )
        if self.evidence is not None and len(self.evidence):
            lines.append("  evidence (simulated, 95% intervals):")
            for row in self.evidence.itertuples():
                mark = "*" if row.recommended else " "
                lines.append(
                    f"   {mark} TTL {duration(row.ttl)}: false expiry {percent(row.false_expiry)} "
                    f"[{percent(row.false_expiry_ci_low)}, {percent(row.false_expiry_ci_high)}] of {count(row.leases, 'lease')} "
                    f"(predicted {percent(row.predicted_false_expiry)}); recovery {duration(row.recovery_mean)} "
                    f"[{duration(row.recovery_ci_low)}, {duration(row.recovery_ci_high)}] over {count(row.recoveries, 'crash', 'crashes')} "
                    f"(predicted {duration(row.predicted_recovery_mean)})"
                )
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


def _events(n) -> str:
    """An expected count: '0', '< 0.001', '0.42', '1.7', '230'."""
    if not np.isfinite(n):
        return NO_VALUE
    if n == 0:
        return "0"
    if n < 0.001:
        return "< 0.001"
    return f"{n:.2g}" if n < 100 else f"{n:,.0f}"


def advise(
    durations,
    *,
    column: str | None = None,
    unit: str = "s",
    pause_rate: float = 2.0,
    pause_duration: Dist | None = None,
    crash_rate: float = 1.0,
    heartbeat_delay: Dist | None = None,
    db_stall_rate: float = 0.0,
    db_stall_duration: Dist | float = 30.0,
    target_false_expiry: float = 1e-3,
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
    crash_rate per worker-hour; pause_duration a Dist (default lognormal, median 0.5 s, p99 5 s);
    heartbeat_delay, the heartbeat statement's extra delay (default lognormal, median 10 ms, p99
    200 ms); db_stall_rate DB failovers or stalls per day (default 0), each db_stall_duration long
    (seconds or a Dist, default 30 s). workers and poll_interval describe the consumers;
    arrival_rate (jobs/s) sets the load and the per-day risk (default: full load).
    claim_takes_expired: whether claims take expired leases themselves (then the watcher is only a
    backstop and not on the recovery path); by default the watcher does the requeue.
    candidates: {"ttl": [...], "heartbeat_interval": [..., None], "watcher_interval": [...]} to
    replace the default ladders (None: no heartbeat); default ladders are extended when the best
    setting sits at their end. min_ttl: a floor in seconds; shorter TTLs are infeasible (and left
    out of the evidence). verify: simulate the recommendation and its neighbouring TTLs
    (`replications` runs of `evidence_jobs` jobs each, through sim.sweep).
    """
    read_in = read(durations, column, unit)
    values = read_in.seconds
    for warning in read_in.warnings:
        warnings.warn(warning, LeaseWarning, stacklevel=2)
    _positive("target_false_expiry", target_false_expiry)
    if target_false_expiry >= 1:
        raise ConfigError(
            f"target_false_expiry: must be a probability below 1, got {target_false_expiry!r}"
        )
    _positive("pause_rate", pause_rate, zero_ok=True)
    _positive("crash_rate", crash_rate, zero_ok=True)
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
    ).check()
    workers = int(workers)
    candidates = dict(candidates or {})
    unknown = set(candidates) - {"ttl", "heartbeat_interval", "watcher_interval"}
    if unknown:
        raise ConfigError(
            f"candidates: unknown key {sorted(unknown)[0]!r}; use ttl, heartbeat_interval, watcher_interval"
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
    mean = job.mean_value()
    jobs_per_s = float(arrival_rate) if arrival_rate is not None else workers / mean
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
        "arrival_rate": arrival_rate,
        "jobs_per_s": jobs_per_s,
        "claim_takes_expired": bool(claim_takes_expired),
        "statement_latency": float(statement_latency),
        "assumptions": assumptions,
        "margin": float(margin),
        "recovery_tolerance": float(recovery_tolerance),
        "heartbeats_per_ttl": float(heartbeats_per_ttl),
        "max_db_load": max_db_load,
        "min_ttl": None if min_ttl is None else float(min_ttl),
        "seed": seed,
    }
    searched = {"ttl": ttls, "heartbeat_interval": heartbeats, "watcher_interval": watchers}
    table, chosen, met = _search(job, searched, target_false_expiry, inputs)
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
                f"shorter TTLs ({duration(min(SHORT_TTLS))} to {duration(max(SHORT_TTLS))}) were searched because "
                f"the best setting sat at {duration(min(ttls))}, the end of the default ladder"
            )
        elif chosen["ttl"] == max(allowed):
            searched = {
                **searched,
                "ttl": _merge(ttls, LONG_TTLS),
                "heartbeat_interval": _merge(heartbeats, LONG_HEARTBEATS),
            }
            extended.append(
                f"longer TTLs (up to {duration(max(LONG_TTLS))}) were searched because the best setting sat "
                f"at {duration(max(ttls))}, the end of the default ladder"
            )
        if extended:
            table, chosen, met = _search(job, searched, target_false_expiry, inputs)
    inputs["searched"] = {k: [v for v in vs] for k, vs in searched.items()}
    h = None if pd.isna(chosen["heartbeat_interval"]) else float(chosen["heartbeat_interval"])
    p95 = float(
        np.quantile(
            _recovery_draws(
                job, float(chosen["ttl"]), h, float(chosen["watcher_interval"]), inputs
            ),
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
        target_false_expiry=float(target_false_expiry),
        met=met,
        candidates=table,
        evidence=None,
        durations=job,
        inputs=inputs,
        predicted_false_expiry_high=float(chosen["predicted_false_expiry_high"]),
        false_expiries_per_day=float(chosen["false_expiries_per_day"]),
        false_expiries_per_day_high=float(chosen["false_expiries_per_day_high"]),
    )
    advice.position = extended + _position(advice, searched["ttl"])
    if verify:
        floored = [t for t in searched["ttl"] if min_ttl is None or t >= min_ttl]
        advice.evidence = _evidence(
            advice, floored, int(replications), int(evidence_jobs), seed, executor, progress
        )
    return advice


def _merge(ladder: list, extra) -> list:
    return sorted(set(ladder) | {float(v) for v in extra}, key=lambda v: (v is not None, v or 0.0))


def _search(
    job: Dist, ladders: dict, target: float, inputs: dict
) -> tuple[pd.DataFrame, pd.Series, bool]:
    """(the candidate table with feasibility, the chosen row, whether the target was met)."""
    table = candidate_table(
        job,
        ttls=ladders["ttl"],
        heartbeats=ladders["heartbeat_interval"],
        watchers=ladders["watcher_interval"],
        **_model_inputs(inputs),
    )
    rules = feasibility_rules(table, target, inputs)
    feasible = rules.all(axis=1)
    table["feasible"] = feasible
    met = bool(feasible.any())
    return table, _choose(table, feasible, rules["min_ttl"], inputs["recovery_tolerance"]), met


def _choose(
    table: pd.DataFrame, feasible: pd.Series, allowed: pd.Series, tolerance: float
) -> pd.Series:
    """The module docstring's rule: the cheapest feasible within `tolerance` of the fastest feasible
    recovery; with none feasible, the lowest predicted false expiry among the `allowed`."""
    if feasible.any():
        pool = table[feasible]
        fastest = pool["predicted_recovery_mean"].min()
        near = pool[pool["predicted_recovery_mean"] <= fastest * (1 + tolerance) + 1e-9]
        return near.sort_values(
            ["db_load", "predicted_recovery_mean", "predicted_false_expiry", "ttl"]
        ).iloc[0]
    return (
        table[allowed]
        .sort_values(["predicted_false_expiry", "predicted_recovery_mean", "db_load"])
        .iloc[0]
    )


def _position(advice: Advice, ttls: list[float]) -> list[str]:
    """Where the recommended TTL sits in the searched range, and why not one step either side."""
    inputs, table, ttl = advice.inputs, advice.candidates, advice.ttl
    floor = inputs["min_ttl"]
    rules = feasibility_rules(table, advice.target_false_expiry, inputs)
    lines = []
    if floor is not None and ttl == min(t for t in ttls if t >= floor):
        free = _choose(
            table,
            rules.drop(columns="min_ttl").all(axis=1),
            pd.Series(True, index=table.index),
            inputs["recovery_tolerance"],
        )
        if free["ttl"] < ttl:
            return [
                f"at your floor: min_ttl {duration(floor)}; without it the advisor would choose TTL {duration(free['ttl'])} "
                "(of the TTLs searched), which the floor rules out"
            ]
    if ttl == min(ttls):
        return [f"at the range's end: TTL {duration(ttl)} is the shortest searched; {SHORTEST_WHY}"]
    if ttl == max(ttls):
        return [f"at the range's end: TTL {duration(ttl)} is the longest searched; {LONGEST_WHY}"]
    i = ttls.index(ttl)
    for step, other in (("shorter", ttls[i - 1]), ("longer", ttls[i + 1])):
        lines.append(
            f"one step {step}, TTL {duration(other)}: {_why_not(advice, table, rules, other)}"
        )
    return ["interior: the search went past it on both sides"] + lines


def _why_not(advice: Advice, table: pd.DataFrame, rules: pd.DataFrame, ttl: float) -> str:
    """Why the best setting at TTL `ttl` lost to the recommendation, in words."""
    at = table["ttl"] == ttl
    ok = table["feasible"] & at
    inputs = advice.inputs
    if ok.any():
        best = _choose(table[at], table.loc[at, "feasible"], at[at], inputs["recovery_tolerance"])
        if best["db_load"] > advice.db_load + 1e-12:
            return (
                f"feasible, recovery ~ {duration(best['predicted_recovery_mean'])}, but it costs "
                f"{best['db_load']:.2g} statements/s against {advice.db_load:.2g}"
            )
        return (
            f"feasible, but recovery ~ {duration(best['predicted_recovery_mean'])} against "
            f"{duration(advice.predicted_recovery_mean)}"
        )
    row = table[at].sort_values(["predicted_false_expiry", "db_load"]).iloc[0]
    failed = [rule for rule, passed in rules.loc[row.name].items() if not passed]
    words = {
        "target": f"predicted false expiry {percent(row['predicted_false_expiry'])} per job is over the target / "
        f"margin ({percent(advice.target_false_expiry / inputs['margin'])})",
        "heartbeats_per_ttl": f"it would need a heartbeat shorter than TTL / {inputs['heartbeats_per_ttl']:g}",
        "max_db_load": f"its {row['db_load']:.2g} statements/s are over max_db_load",
        "min_ttl": "below min_ttl",
    }
    return "no setting is feasible: " + "; ".join(words[rule] for rule in failed)


def feasibility_rules(
    table: pd.DataFrame, target_false_expiry: float, inputs: dict
) -> pd.DataFrame:
    """One boolean column per feasibility rule of the module docstring (True: the candidate passes
    it): target, heartbeats_per_ttl, max_db_load, min_ttl. A candidate is feasible if it passes all."""
    rules = pd.DataFrame(index=table.index)
    rules["target"] = table["predicted_false_expiry"] <= target_false_expiry / inputs["margin"]
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


def _model_inputs(inputs: dict) -> dict:
    return {
        k: inputs[k]
        for k in ("workers", "poll_interval", "arrival_rate", "claim_takes_expired", "assumptions")
    }


def _idle_pollers(job: Dist, workers: int, arrival_rate: float | None) -> int:
    return max(1, int(math.floor(workers - _busy(job, workers, arrival_rate) + 0.5)))


def _busy(job: Dist, workers: int, arrival_rate: float | None) -> float:
    """Workers holding a job on average: all of them at full load."""
    return workers if arrival_rate is None else min(workers, arrival_rate * job.mean_value())


def candidate_table(
    job: Dist,
    *,
    ttls,
    heartbeats,
    watchers,
    workers: int,
    poll_interval: float,
    arrival_rate: float | None,
    claim_takes_expired: bool,
    assumptions: Assumptions,
    seed: int = 0,
) -> pd.DataFrame:
    """Predictions for every (ttl, heartbeat_interval, watcher_interval) combination (no feasibility).

    heartbeat intervals with interval + statement latency >= ttl are skipped (the lease would lapse
    between heartbeats). False expiries per job and per day, with 95% upper bounds, come from
    sim.lease_risk under `assumptions`. Recovery assumes at least one idle poller (workers - busy, rounded, at least 1);
    DB load and the per-day figures are at full load unless arrival_rate is given.
    """
    a = assumptions
    lat = a.statement_latency
    pollers = _idle_pollers(job, workers, arrival_rate)
    samples = np.asarray(job.samples, dtype=float)
    weights = lease_risk.bootstrap_weights(len(samples), seed)
    mean = job.mean_value()
    busy = _busy(job, workers, arrival_rate)
    jobs_per_day = (arrival_rate if arrival_rate is not None else workers / mean) * SECONDS_PER_DAY
    rows = []
    for ttl in ttls:
        for h in heartbeats:
            if h is not None and h + lat >= ttl:
                continue
            fe, fe_high = lease_risk.per_job(samples, ttl, h, a, weights)
            stall_per_day = (
                a.db_stall_rate * busy * lease_risk.stall_lapse_probability(job, ttl, h, a, seed)
            )
            per_day, per_day_high = (
                fe * jobs_per_day + stall_per_day,
                fe_high * jobs_per_day + stall_per_day,
            )
            fe, fe_high = (
                fe + stall_per_day / jobs_per_day,
                min(1.0, fe_high + stall_per_day / jobs_per_day),
            )
            # the lease left at a crash: L minus the time since the last renewal (exact for short jobs too)
            since = analytic.time_since_renewal_mean(
                job, ttl=ttl, heartbeat_interval=h, latency=lat
            )
            for w in watchers:
                recovery = analytic.recovery_latency_mean(
                    ttl=ttl,
                    heartbeat_interval=None,
                    poll_interval=poll_interval,
                    watcher_interval=None if claim_takes_expired else w,
                    idle_pollers=pollers,
                    latency=lat,
                    worked_at_crash=since,
                )
                load = analytic.db_load(
                    workers=workers,
                    poll_interval=poll_interval,
                    heartbeat_interval=h,
                    watcher_interval=w,
                    job_duration=job,
                    arrival_rate=arrival_rate,
                    latency=lat,
                )
                rows.append(
                    (
                        ttl,
                        np.nan if h is None else h,
                        w,
                        fe,
                        fe_high,
                        per_day,
                        per_day_high,
                        recovery,
                        load["heartbeat"],
                        load["watcher"],
                        load["upkeep"],
                        True,
                    )
                )
    return pd.DataFrame(rows, columns=CANDIDATE_COLUMNS)


def _recovery_draws(
    job: Dist, ttl: float, h: float | None, w: float, inputs: dict, n: int = 100_000
) -> np.ndarray:
    lat, seed = inputs["statement_latency"], inputs["seed"]
    since = analytic.time_since_renewal_samples(
        n, job, ttl=ttl, heartbeat_interval=h, latency=lat, seed=seed
    )
    return analytic.recovery_latency_samples(
        n,
        ttl=ttl,
        heartbeat_interval=None,
        poll_interval=inputs["poll_interval"],
        watcher_interval=None if inputs["claim_takes_expired"] else w,
        idle_pollers=_idle_pollers(job, inputs["workers"], inputs["arrival_rate"]),
        latency=lat,
        worked_at_crash=since,
        seed=seed + 1,
    )


def _evidence(
    advice: Advice, ttls: list[float], replications: int, jobs: int, seed: int, executor, progress
) -> pd.DataFrame:
    """Simulate the recommendation and its neighbouring TTLs; simulated figures beside predictions.

    Crashes are made frequent enough (~40 per run, about half of them while holding a job) to measure recovery; the crash rate
    does not enter the predicted recovery latency or false-expiry probability.
    """
    from sim.sweep import sweep

    i = ttls.index(advice.ttl)
    h = advice.heartbeat_interval
    lat = advice.inputs["statement_latency"]
    around = [t for t in ttls[max(0, i - 1) : i + 2] if h is None or h + lat < t]
    base = advice.scenario(jobs=jobs, name="advice-evidence")
    worker_hours = base.policy.workers * base.horizon / 3600
    crash_rate = max(advice.inputs["crash_rate"], 40 / worker_hours)
    base = base.replace(faults=dataclasses.replace(base.faults, crash_rate=crash_rate))
    metrics = [
        "jobs",
        "leases",
        "false_expiries",
        "recoveries",
        "recovery_latency_mean",
        "db_heartbeat_per_s",
        "db_requeue_expired_per_s",
    ]
    result = sweep(
        base,
        {"policy.lease_ttl": around},
        replications,
        seed=seed,
        executor=executor,
        progress=progress,
        metrics=metrics,
    )
    aggregate = result.aggregate(["recovery_latency_mean"]).set_index("policy.lease_ttl")
    model = _model_inputs(advice.inputs) | {"arrival_rate": base.workload.rate}
    predicted = candidate_table(
        advice.durations, ttls=around, heartbeats=[h], watchers=[advice.watcher_interval], **model
    ).set_index("ttl")
    rows = []
    for ttl, runs in result.runs.groupby("policy.lease_ttl", sort=True):
        leases, fe = int(runs["leases"].sum()), int(runs["false_expiries"].sum())
        low, high = wilson_interval(fe, leases, 0.95)
        upkeep = runs["db_heartbeat_per_s"] + runs["db_requeue_expired_per_s"]
        rows.append(
            {
                "ttl": float(ttl),
                "heartbeat_interval": np.nan if h is None else h,
                "watcher_interval": advice.watcher_interval,
                "recommended": float(ttl) == advice.ttl,
                "runs": len(runs),
                "crash_rate": crash_rate,
                "leases": leases,
                "false_expiries": fe,
                "false_expiry": fe / leases if leases else np.nan,
                "false_expiry_ci_low": low,
                "false_expiry_ci_high": high,
                "predicted_false_expiry": float(predicted.loc[ttl, "predicted_false_expiry"]),
                "recoveries": int(runs["recoveries"].sum()),
                "recovery_mean": float(aggregate.loc[ttl, "recovery_latency_mean_mean"]),
                "recovery_ci_low": float(aggregate.loc[ttl, "recovery_latency_mean_ci_low"]),
                "recovery_ci_high": float(aggregate.loc[ttl, "recovery_latency_mean_ci_high"]),
                "predicted_recovery_mean": float(predicted.loc[ttl, "predicted_recovery_mean"]),
                "db_load": float(upkeep.mean()),
                "predicted_db_load": float(predicted.loc[ttl, "db_load"]),
            }
        )
    return pd.DataFrame(rows)


# ---- the command line's options: checked here, beside advise() (sim/__main__ only parses them) ---


def command_line_arguments(options) -> dict:
    """advise()'s keyword arguments (all but the durations) from the options of `python -m sim
    advise` (an argparse namespace: target, pause_rate, pause_p99, ...), each checked first:
    ConfigError names the first bad one by its flag ("--pause-p99 0: must be > 0 seconds").
    A p99 option becomes a lognormal with its median at p99/10 (pauses) or p99/20 (heartbeat
    statement delay)."""
    o = options
    checks = [
        ("--target", o.target, 0 < o.target < 1, "must be a probability between 0 and 1"),
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
    return {
        "column": o.column,
        "unit": o.unit,
        "target_false_expiry": o.target,
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
