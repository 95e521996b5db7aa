"""Lease settings advice: TTL, heartbeat interval and watcher interval for observed job durations.

    import sim
    advice = sim.advise("sample", arrival_rate=1, pause_rate=2, target_false_expiry=1e-3)
    print(advice)            # A: TTL 2 s, heartbeat every 0.5 s, watcher every 1 s: 8.5 false ...
    advice.candidates        # every setting considered, with its predictions and feasibility
    advice.shortlist         # the named settings (A the recommendation, B, C ...: shortlist.py)
    advice.sensitivity       # how A's risk and the choice move with the assumptions
    advice.evidence          # the named settings simulated beside their predictions
    sim.run(advice.scenario())  # A; advice.scenario(setting="B") for another named setting

How it chooses (all predictions come from sim.theory.closed_forms, whose docstrings give the
assumptions):

1. The load. The pool's capacity is sim.theory.pool's (workers / mean worker time per job, crashes
   included). An arrival rate at or above it is refused (ConfigError naming workers and the
   capacity, with the pool size that would carry it); from 80% utilisation the advice warns. With
   no arrival rate the advice assumes half the capacity, and says so.
2. Each candidate (TTL L, heartbeat interval h or none, watcher interval W) gets a predicted
   false-expiry probability per job with its 95% upper bound (sim.advice.risk), a predicted mean
   recovery latency after a crash (the lease left after the time since the last renewal, the
   watcher's wait, then the wait for a worker: idle ones polling, busy ones finishing their job,
   the crashed one back after its restart; closed_forms.CrashPollWait), and the DB load it costs
   (the heartbeat and watcher statements per second, "upkeep") at the arrival rate.
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

5. What it rests on: the fault assumptions moved one at a time (pause rate and tail x0.5 and x2,
   one DB failover of 10 s or 30 s a day), with A's risk and the choice under each
   (sim.advice.sensitivity, from the risk model: no simulation before the answer).

With verify=True the named settings A, B and C are simulated (sim.sweep) and the evidence table
puts simulated figures, with confidence intervals, next to the predictions; each moved assumption
is simulated at A too. When the simulated recovery interval excludes the prediction, the advice
gives the simulated figure and says so as a finding; it also says whether the simulation confirms
the target. The sentences are sim.advice.text's, each built beside its numbers.

The inputs, read and checked, are sim.advice.inputs's (the bundled example, "sample", too).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from sim.advice import evidence as advice_evidence
from sim.advice import inputs as advice_inputs
from sim.advice import sensitivity as advice_sensitivity
from sim.advice import shortlist as advice_shortlist
from sim.advice import text as advice_text
from sim.advice.candidates import CANDIDATE_COLUMNS, CandidateModel, feasibility_rules
from sim.advice.inputs import read, sample_durations, sample_durations_path, write_sample_durations
from sim.advice.options import NUMBERS, check_arguments, command_line_arguments
from sim.advice.risk import Assumptions
from sim.advice.search import Found, search
from sim.advice.text import infeasible_reasons
from sim.errors import ConfigError, expect_flag, expect_text
from sim.scenario.dists import Dist
from sim.scenario.durations import PAUSES, Durations
from sim.scenario.settings import Faults, LeaseWarning, Policy, Scenario, Workload, dumps
from sim.support import output_paths

__all__ = [  # what the rest of Lease Lab and its users import from here
    "CANDIDATE_COLUMNS",
    "Advice",
    "advise",
    "command_line_arguments",
    "feasibility_rules",
    "infeasible_reasons",
    "read",
    "sample_durations",
    "sample_durations_path",
    "write_sample_durations",
]

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
    model: CandidateModel = field(repr=False)  # the predictions of every table of this advice
    inputs: dict = field(default_factory=dict)
    predicted_false_expiry_high: float = np.nan  # 95% upper bound per job (durations are a sample)
    false_expiries_per_day: float = np.nan  # at the arrival rate (assumed if none was given)
    false_expiries_per_day_high: float = np.nan
    position: list[str] = field(default_factory=list)  # where the TTL sits, and why
    target_per_day: float | None = None  # the target as given per day, if it was
    shortlist: pd.DataFrame | None = field(default=None, repr=False)  # the named settings, A first
    sensitivity_evidence: pd.DataFrame | None = field(default=None, repr=False)  # simulated
    _sensitivity: pd.DataFrame | None = field(default=None, repr=False)

    def verify(
        self,
        *,
        replications: int = 4,
        evidence_jobs: int = 1500,
        seed: int = 0,
        executor=None,
        progress: bool | None = None,
    ) -> Advice:
        """Simulate the named settings A, B and C (`replications` runs of `evidence_jobs` jobs
        each, or more for a fast queue, through sim.sweep) and each moved assumption at A: the
        evidence and sensitivity_evidence tables (advise(verify=True) does this). Returns self."""
        _evidence_argument_types(seed, progress, executor)
        for rule in NUMBERS:
            if rule.keyword in ("replications", "evidence_jobs"):
                rule.check_argument(locals()[rule.keyword])
        floor = self.inputs["min_ttl"]
        floored = [t for t in self.inputs["searched"]["ttl"] if floor is None or t >= floor]
        self.evidence = advice_evidence.simulate(
            self, floored, int(replications), int(evidence_jobs), seed, executor, progress
        )
        self.sensitivity_evidence = advice_sensitivity.simulate(
            self, int(evidence_jobs), seed, executor, progress
        )
        return self

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
    def sensitivity(self) -> pd.DataFrame:
        """A's risk and the choice when each assumption moves (sim.advice.sensitivity.table),
        computed from the risk model the first time it is asked for."""
        if self._sensitivity is None:
            self._sensitivity = advice_sensitivity.table(self)
        return self._sensitivity

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
        setting: str = "A",
    ) -> Scenario:
        """A runnable Scenario with a named setting (A, the recommendation, by default), the
        observed durations (resampled) as processing times, the assumed faults (pauses, crashes
        and restarts, heartbeat delay; a DB stall as a hanging partition of each worker), and
        Poisson arrivals at the advice's rate (given, or assumed: half the pool's capacity) long
        enough for `jobs` jobs; the horizon leaves `tail` times the durations' 99.9th percentile
        after the last arrival."""
        inputs = self.inputs
        a = self.assumptions
        workers = inputs["workers"]
        rate = arrival_rate or inputs["jobs_per_s"]
        horizon = jobs / rate + tail * self.durations.quantile(0.999)
        ttl, h, w = self.ttl, self.heartbeat_interval, self.watcher_interval
        if setting != "A":
            try:
                row = advice_shortlist.row(self, setting)
            except KeyError:
                names = ", ".join(self.shortlist["name"]) if self.shortlist is not None else "A"
                raise ConfigError(f"setting: {setting!r} is not one of {names}") from None
            ttl, h, w = row["ttl"], advice_shortlist.heartbeat_of(row), row["watcher_interval"]
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
                f"Advised lease settings, {setting}: {advice_shortlist.setting_words(ttl, h, w)}. "
                f"Processing times resampled from {inputs['durations_n']} observed durations."
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
                lease_ttl=float(ttl),
                heartbeat=h is not None,
                heartbeat_interval=h if h is not None else Policy.heartbeat_interval,
                watcher=True,
                watcher_interval=float(w),
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

    # ---- in words: sim.advice.text ---------------------------------------------------------------

    def headline(self) -> str:
        return advice_text.headline(self)

    def target_text(self) -> str:
        return advice_text.target_text(self)

    def load_line(self) -> str:
        return advice_text.load_line(self)

    def risk_lines(self) -> list[str]:
        return advice_text.risk_lines(self)

    def slack_line(self) -> str:
        return advice_text.slack_line(self)

    def tradeoff_lines(self) -> list[str]:
        return advice_text.tradeoff_lines(self)

    def heartbeat_line(self) -> str:
        return advice_text.heartbeat_line(self)

    def choice_rule(self) -> str:
        return advice_text.choice_rule(self)

    def shortfall(self) -> str | None:
        return advice_text.shortfall(self)

    def recovery_line(self) -> str:
        return advice_text.recovery_line(self)

    def counts_line(self) -> str:
        return advice_text.counts_line(self)

    def rests_on(self) -> str:
        """What A's risk comes from, and what a DB failover would add (one sentence)."""
        return advice_sensitivity.rests_on(self)

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
        """The input's warnings: the durations (and pauses) as read, and a load of 80% or more."""
        i = self.inputs
        out = list(i.get("durations_read", {}).get("warnings", []))
        out += list(i.get("pauses_read", {}).get("warnings", []))
        return out + ([i["load_warning"]] if i.get("load_warning") else [])

    def text(self, settings=None) -> str:
        """The advice as printed; `settings` (sim.advice.queue_terms.in_queue_terms) adds A in a
        queue's own setting names under the headline."""
        return advice_text.text(self, settings)

    def __str__(self) -> str:
        return self.text()

    def save(self, directory: str | Path, *, overwrite: bool = False) -> list[Path]:
        """Write advice.txt (as printed), candidates.csv, scenario.toml (the advised setting) and,
        when verified, evidence.csv into `directory` (created if missing; one that holds files
        only with `overwrite`). Returns the files written."""
        out = output_paths.directory(directory, overwrite)
        written = [out / "advice.txt", out / "candidates.csv", out / "scenario.toml"]
        written[0].write_text(str(self) + "\n", encoding="utf-8")
        self.candidates.to_csv(written[1], index=False)
        written[2].write_text(dumps(self.scenario()), encoding="utf-8")
        if self.evidence is not None:
            written.append(out / "evidence.csv")
            self.evidence.to_csv(written[-1], index=False)
        return written

    def save_report(self, path: str | Path, *, review=None, settings=None) -> Path:
        """One self-contained HTML file: the answer on its first screen (A, in a queue's own
        settings when `settings` (in_queue_terms) or a queue name is given, what it costs a day,
        what it rests on), then the named settings, the chart, the evidence (and a design review
        of it, if given); sim.advice.page writes it."""
        from sim.advice.page import advice_report

        return advice_report(self, path, review=review, settings=settings)


def _argument_types(column, unit, takes_expired, verify, candidates) -> None:
    """ConfigError naming the first argument of advise() whose type cannot be right."""
    expect_text("column", column, none_ok=True)
    expect_text("unit", unit)
    expect_flag("claim_takes_expired", takes_expired)
    expect_flag("verify", verify)
    if candidates is not None and not isinstance(candidates, Mapping):
        raise ConfigError(
            f"candidates: expected a dict of ladders, got {type(candidates).__name__}"
        )


def _evidence_argument_types(seed, progress, executor) -> None:
    """ConfigError naming the first argument of the evidence whose type cannot be right."""
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer):
        raise ConfigError(f"seed: expected a whole number, got {type(seed).__name__} {seed!r:.60}")
    expect_flag("progress", progress, none_ok=True)
    if not (executor in (None, "serial") or callable(getattr(executor, "map", None))):
        raise ConfigError(
            f"executor: expected 'serial' or a concurrent.futures.Executor, got {executor!r:.60}"
        )


def advise(
    durations,
    *,
    column: str | None = None,
    unit: str = "s",
    pause_rate: float | None = None,
    pause_duration: Dist | None = None,
    pauses=None,
    pause_column: str | None = None,
    pause_unit: str = "s",
    pause_hours: float | None = None,
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
    `unit` (sim.scenario.durations: the column must be named when several could be durations), or
    "sample" (the bundled example). The fault assumptions (sim.advice.risk.Assumptions): pause_rate
    (default 2) and crash_rate per worker-hour; restart_delay, seconds until a crashed worker polls
    again; pause_duration a Dist (default lognormal, median 0.5 s, p99 5 s), or pauses: measured
    pause durations instead (a CSV path read like the durations, with pause_column and pause_unit,
    or an array-like), and pause_hours, the worker-hours they cover (the pause rate is then
    measured: pauses / pause_hours); heartbeat_delay, the heartbeat statement's extra delay (default
    lognormal, median 10 ms, p99 200 ms); db_stall_rate DB failovers or stalls per day (default 0),
    each db_stall_duration long (seconds or a Dist, default 30 s). workers and poll_interval
    describe the consumers; arrival_rate (jobs/s) sets the load and the per-day risk (default: half
    of what the workers can carry, said in the advice); a rate the workers cannot carry is refused
    (naming the unit when the durations look like another one and would be carried in it).
    target_false_expiry (per job, default 0.001) or target_per_day (false expiries a day at
    arrival_rate): the risk to stay under. prefer: "safety", "recovery" or "balanced" (default), how
    the choice weighs recovery against risk. claim_takes_expired: whether claims take expired leases
    themselves (then the watcher is only a backstop and not on the recovery path); by default the
    watcher does the requeue. candidates: {"ttl": [...], "heartbeat_interval": [..., None],
    "watcher_interval": [...]} to replace the default ladders (None: no heartbeat); default ladders
    are extended when the best setting sits at their end. min_ttl: a floor in seconds; shorter TTLs
    are infeasible (and left out of the evidence). verify: simulate the named settings A, B and C
    (`replications` runs of `evidence_jobs` jobs each, or more for a fast queue, through sim.sweep)
    and each moved assumption at A.
    """
    given = dict(locals())
    _argument_types(column, unit, claim_takes_expired, verify, candidates)
    _evidence_argument_types(seed, progress, executor)
    read_in = read(durations, column, unit)
    measured = None if pauses is None else read(pauses, pause_column, pause_unit, kind=PAUSES)
    check_arguments(given)
    advice = _searched(read_in, measured, given)
    if verify:
        advice.verify(
            replications=replications,
            evidence_jobs=evidence_jobs,
            seed=seed,
            executor=executor,
            progress=progress,
        )
    return advice


def _searched(read_in: Durations, measured: Durations | None, given: dict) -> Advice:
    """The advice before its evidence: the inputs read and checked (their warnings warned), the
    load, the target per job, the search and the named settings."""
    assumptions = advice_inputs.assumptions(measured, given)
    candidates = dict(given["candidates"] or {})
    ladders = advice_inputs.ladders(candidates, given["min_ttl"])
    job = advice_inputs.durations_dist(read_in.seconds)
    load = advice_inputs.load(
        job, int(given["workers"]), given["arrival_rate"], assumptions, read_in
    )
    for said in (*read_in.warnings, *(measured.warnings if measured else ()), load["load_warning"]):
        if said:
            warnings.warn(said, LeaseWarning, stacklevel=3)
    inputs = advice_inputs.inputs(read_in, measured, load, assumptions, given)
    per_day, per_job = given["target_per_day"], given["target_false_expiry"]
    target = (
        advice_inputs.per_job_target(per_day, load["jobs_per_s"])
        if per_day is not None
        else 1e-3
        if per_job is None
        else float(per_job)
    )
    model = CandidateModel.of(job, inputs)
    found = search(model, ladders, target, inputs, candidates)
    inputs["searched"] = found.searched
    advice = _advice(model, found, target, per_day, inputs)
    advice.shortlist = advice_shortlist.build(advice, found.searched["ttl"])
    advice.position = found.extended + advice_text.position(advice)
    return advice


def _advice(model: CandidateModel, found: Found, target, target_per_day, inputs) -> Advice:
    chosen = found.chosen
    h = None if pd.isna(chosen["heartbeat_interval"]) else float(chosen["heartbeat_interval"])
    draws = model.recovery_draws(float(chosen["ttl"]), h, float(chosen["watcher_interval"]))
    return Advice(
        ttl=float(chosen["ttl"]),
        heartbeat_interval=h,
        watcher_interval=float(chosen["watcher_interval"]),
        predicted_false_expiry=float(chosen["predicted_false_expiry"]),
        predicted_recovery_mean=float(chosen["predicted_recovery_mean"]),
        predicted_recovery_p95=float(np.quantile(draws, 0.95)),
        db_load=float(chosen["db_load"]),
        heartbeat_load=float(chosen["heartbeat_load"]),
        watcher_load=float(chosen["watcher_load"]),
        target_false_expiry=target,
        met=found.met,
        candidates=found.table,
        evidence=None,
        durations=model.job,
        model=model,
        inputs=inputs,
        predicted_false_expiry_high=float(chosen["predicted_false_expiry_high"]),
        false_expiries_per_day=float(chosen["false_expiries_per_day"]),
        false_expiries_per_day_high=float(chosen["false_expiries_per_day_high"]),
        target_per_day=None if target_per_day is None else float(target_per_day),
    )
