"""What the advice rests on, and how it moves when its assumptions move.

With a heartbeat, a lease lapses under a live owner only when something outlasts the TTL minus
the heartbeat interval: a stop-the-world pause, a late heartbeat statement, a DB failover. The
job durations then only count how many pauses a job meets, so the recommendation rests on the
fault assumptions far more than on the durations. This module says so in numbers:

- sources(advice): A's predicted false expiries a day, split by what causes them (pauses,
  heartbeat delays, jobs longer than the TTL, DB failovers);
- table(advice): one row per moved assumption (pause rate and pause tail x0.5 and x2, one DB
  failover of 10 s or 30 s a day): A's false expiries a day under it, and the setting the same
  choice rule picks under it. Every figure comes from the risk model (sim.advice.risk) over the
  advice's own candidate table, recomputed for the pairs that can matter (a pair whose recovery
  alone exceeds the lowest feasible score by the tolerance cannot be chosen), so it costs a few
  hundredths of a second, not a search;
- simulate(advice): the evidence that the model follows each moved assumption, by simulation
  at A (pauses made frequent enough to count, compared with the model at the rate simulated;
  DB failovers scripted a few times a run, compared per failover).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from sim.advice.candidates import (
    CHOICE_ORDER,
    PREFER,
    SAFEST_ORDER,
    choose_position,
    feasibility_rules,
    pool_of,
)
from sim.advice.risk import (
    SECONDS_PER_DAY,
    Assumptions,
    describe,
    pair_risk,
    pairs_stall_lapse,
    scaled,
    share_upper_bound,
)
from sim.advice.shortlist import heartbeat_of, name_of, setting_words
from sim.scenario.dists import Dist
from sim.support.in_words import amount, claim, count, duration, percent
from sim.support.scipy_steps import chi2_ppf

FAILOVERS = (10.0, 30.0)  # seconds: one DB failover a day of each
FACTORS = (0.5, 2.0)  # pause rate and pause tail moved by these factors
MENTIONED = 0.05  # a cause of at least this share of A's false expiries is named beside the first
CHUNK = 24  # (TTL, heartbeat) pairs recomputed at a time, the cheapest recoveries first
DEFAULT_PAUSES = Assumptions()  # what a row says pauses would be, when none are assumed
TABLE_COLUMNS = [
    "change",
    "a_false_expiry",
    "a_false_expiry_high",
    "a_per_day",
    "a_per_day_high",
    "a_per_failover",
    "name",
    "ttl",
    "heartbeat_interval",
    "watcher_interval",
    "per_day",
    "per_day_high",
    "recovery",
    "met",
]


@dataclasses.dataclass(frozen=True)
class Variant:
    """One moved assumption: what changed, in words, and the assumptions it gives."""

    change: str
    assumptions: Assumptions
    failover: float | None = None  # seconds, for a DB-failover row


def variants(a: Assumptions) -> list[Variant]:
    """The rows of the table: as assumed, then the moved assumptions."""
    out = [Variant("as assumed", a)]
    if a.pause_rate:
        for k in FACTORS:
            rate = a.pause_rate * k
            out.append(
                Variant(
                    f"pause rate x{k:g}: {count(rate, 'pause')} per worker-hour",
                    dataclasses.replace(a, pause_rate=rate),
                )
            )
        for k in FACTORS:
            tail = scaled(a.pause_duration, k)
            out.append(
                Variant(
                    f"pause tail x{k:g}: {describe(tail)}",
                    dataclasses.replace(a, pause_duration=tail),
                )
            )
    else:
        d = DEFAULT_PAUSES
        out.append(
            Variant(
                f"pauses after all: {count(d.pause_rate, 'pause')} per worker-hour "
                f"({describe(d.pause_duration)})",
                dataclasses.replace(a, pause_rate=d.pause_rate, pause_duration=d.pause_duration),
            )
        )
    instead = " instead of the assumed" if a.db_stall_rate else ""
    for seconds in FAILOVERS:
        out.append(
            Variant(
                f"one DB failover a day of {duration(seconds)}{instead}",
                dataclasses.replace(a, db_stall_rate=1.0, db_stall_duration=Dist.constant(seconds)),
                failover=seconds,
            )
        )
    return out


# ---- the model -----------------------------------------------------------------------------------


def _load(advice) -> tuple[float, float]:
    """(busy workers, jobs a day) at the advice's rate."""
    i = advice.inputs
    return i["pool"].offered_load(i["jobs_per_s"]), i["jobs_per_s"] * SECONDS_PER_DAY


def risk_at(advice, a: Assumptions, ttl: float, heartbeat) -> np.ndarray:
    """(per job, its upper bound, a day, its upper bound) of one setting under `a`."""
    busy, per_day = _load(advice)
    return pair_risk(
        advice.durations,
        [(ttl, heartbeat)],
        a,
        busy=busy,
        jobs_per_day=per_day,
        seed=advice.inputs["seed"],
    )[0]


def rechoose(advice, a: Assumptions, grid: _Grid | None = None) -> tuple[pd.Series, bool]:
    """(the candidate row the advice's choice rule picks under `a`, whether it is feasible),
    recomputing the risk of the (TTL, heartbeat) pairs cheapest in recovery first and stopping
    once no pair left can come within the tolerance of the lowest feasible score (a score is at
    least the recovery). `grid`: _grid(advice), when the caller asks for several."""
    grid = grid or _grid(advice)
    inputs, target = advice.inputs, advice.target_false_expiry
    tolerance, weight = inputs["recovery_tolerance"], PREFER[inputs["prefer"]]
    busy, per_day = _load(advice)
    risk = np.full((len(grid.pairs), 4), np.nan)
    columns = dict(grid.columns)
    feasible = np.zeros(len(grid.rows), bool)
    for start in range(0, len(grid.order), CHUNK):
        only = np.zeros(len(grid.pairs), bool)
        only[grid.order[start : start + CHUNK]] = True
        found = pair_risk(
            advice.durations,
            grid.pairs,
            a,
            busy=busy,
            jobs_per_day=per_day,
            seed=inputs["seed"],
            only=only,
        )
        risk[only] = found[only]
        high = risk[grid.rows, 1]
        feasible = grid.static & (high <= target / inputs["margin"])
        columns["predicted_false_expiry"] = risk[grid.rows, 0]
        columns["predicted_false_expiry_high"] = high
        columns["score"] = columns["predicted_recovery_mean"] * (1.0 + weight * high / target)
        rest = grid.order[start + CHUNK :]
        if feasible.any() and len(rest):
            lowest = float(columns["score"][feasible].min())
            if grid.fastest[rest[0]] > lowest * (1 + tolerance) + 1e-9:
                break
    at = choose_position(columns, feasible, grid.allowed & ~np.isnan(risk[grid.rows, 1]), tolerance)
    row = advice.candidates.iloc[at].copy()
    pair = grid.rows[at]
    row[RISK_COLUMNS] = risk[pair]
    row["feasible"], row["score"] = bool(feasible[at]), columns["score"][at]
    return row, bool(feasible.any())


RISK_COLUMNS = [
    "predicted_false_expiry",
    "predicted_false_expiry_high",
    "false_expiries_per_day",
    "false_expiries_per_day_high",
]


@dataclasses.dataclass(frozen=True)
class _Grid:
    """The advice's candidates as arrays, for rechoose: each row's (TTL, heartbeat) pair, the
    rules that do not depend on the faults, and the pairs in the order to compute them."""

    pairs: list[tuple[float, float | None]]
    rows: np.ndarray  # row -> pair
    columns: dict[str, np.ndarray]
    static: np.ndarray  # rows passing every rule but the target (and not hopeless)
    allowed: np.ndarray  # rows at or above the TTL floor
    order: np.ndarray  # pairs, the cheapest possible recovery first (hopeless ones last)
    fastest: np.ndarray  # each pair's lowest recovery among its static rows (inf: none)


def _grid(advice) -> _Grid:
    table = advice.candidates
    keys = list(zip(table["ttl"], table["heartbeat_interval"].fillna(-1.0), strict=True))
    unique = list(dict.fromkeys(keys))
    index = {key: k for k, key in enumerate(unique)}
    rows = np.array([index[key] for key in keys])
    rules = feasibility_rules(table, advice.target_false_expiry, advice.inputs)
    hopeless = np.isin(rows, _hopeless(advice, unique))
    static = rules.drop(columns="target").all(axis=1).to_numpy(bool) & ~hopeless
    recovery = table["predicted_recovery_mean"].to_numpy(float)
    fastest = np.full(len(unique), np.inf)
    np.minimum.at(fastest, rows[static], recovery[static])
    order = np.argsort(fastest, kind="stable")
    return _Grid(
        pairs=[(t, None if h < 0 else h) for t, h in unique],
        rows=rows,
        columns={k: table[k].to_numpy(float) for k in {*CHOICE_ORDER, *SAFEST_ORDER}},
        static=static,
        allowed=rules["min_ttl"].to_numpy(bool),
        order=order,
        fastest=fastest,
    )


def _hopeless(advice, pairs: list[tuple[float, float]]) -> list[int]:
    """The pairs without a heartbeat (NaN-free key -1) whose upper bound is over target / margin
    on the jobs longer than the TTL alone (sim.advice.risk.per_job adds the rest to that bound)."""
    samples = np.asarray(advice.durations.samples, dtype=float)
    allowed = advice.target_false_expiry / advice.inputs["margin"]
    return [
        k
        for k, (ttl, h) in enumerate(pairs)
        if h < 0 and share_upper_bound(int((samples > ttl).sum()), len(samples)) > allowed
    ]


def table(advice) -> pd.DataFrame:
    """One row per moved assumption (TABLE_COLUMNS): A's risk under it and the advice under it."""
    busy, _ = _load(advice)
    grid = _grid(advice)
    rows = []
    for v in variants(advice.assumptions):
        if v.change == "as assumed":
            chosen, met = (
                advice.candidates[
                    (advice.candidates["ttl"] == advice.ttl)
                    & (
                        advice.candidates["heartbeat_interval"].isna()
                        if advice.heartbeat_interval is None
                        else advice.candidates["heartbeat_interval"] == advice.heartbeat_interval
                    )
                    & (advice.candidates["watcher_interval"] == advice.watcher_interval)
                ].iloc[0],
                advice.met,
            )
            mine = chosen[
                [
                    "predicted_false_expiry",
                    "predicted_false_expiry_high",
                    "false_expiries_per_day",
                    "false_expiries_per_day_high",
                ]
            ].to_numpy(float)
        else:
            chosen, met = rechoose(advice, v.assumptions, grid)
            mine = risk_at(advice, v.assumptions, advice.ttl, advice.heartbeat_interval)
        per_failover = (
            busy
            * pairs_stall_lapse(
                advice.durations,
                [advice.ttl],
                [np.nan if advice.heartbeat_interval is None else advice.heartbeat_interval],
                v.assumptions,
                advice.inputs["seed"],
            )[0]
            if v.failover
            else np.nan
        )
        h = heartbeat_of(chosen)
        rows.append(
            {
                "change": v.change,
                "a_false_expiry": mine[0],
                "a_false_expiry_high": mine[1],
                "a_per_day": mine[2],
                "a_per_day_high": mine[3],
                "a_per_failover": per_failover,
                "name": name_of(advice, chosen["ttl"], h, chosen["watcher_interval"]) or "",
                "ttl": float(chosen["ttl"]),
                "heartbeat_interval": np.nan if h is None else h,
                "watcher_interval": float(chosen["watcher_interval"]),
                "per_day": float(chosen["false_expiries_per_day"]),
                "per_day_high": float(chosen["false_expiries_per_day_high"]),
                "recovery": float(chosen["predicted_recovery_mean"]),
                "met": bool(met),
            }
        )
    return pd.DataFrame(rows, columns=TABLE_COLUMNS)


def sources(advice, row=None) -> list[tuple[str, float]]:
    """A named setting's (A by default; a row of advice.shortlist) predicted false expiries a day
    by cause, largest first: [(cause in words, a day)]."""
    a = advice.assumptions
    row = advice.shortlist.iloc[0] if row is None else row
    ttl, h = float(row["ttl"]), heartbeat_of(row)
    total = float(row["false_expiries_per_day"])
    quiet = dataclasses.replace(a, pause_rate=0.0)
    out = []
    if a.pause_rate:
        out.append(("pauses", total - risk_at(advice, quiet, ttl, h)[2]))
    if h is not None:
        steady = dataclasses.replace(a, heartbeat_delay=Dist.constant(0.0))
        out.append(("heartbeat delays", total - risk_at(advice, steady, ttl, h)[2]))
    if a.db_stall_rate:
        calm = dataclasses.replace(a, db_stall_rate=0.0)
        out.append(("DB failovers", total - risk_at(advice, calm, ttl, h)[2]))
    if h is None:
        bare = dataclasses.replace(quiet, db_stall_rate=0.0)
        out.append(("jobs longer than the TTL", risk_at(advice, bare, ttl, h)[2]))
    return sorted(((cause, max(0.0, value)) for cause, value in out), key=lambda c: -c[1])


# ---- in words ------------------------------------------------------------------------------------


CAUSES = {  # a cause in the headline's few words
    "pauses": "the {source} pauses",
    "heartbeat delays": "the assumed heartbeat delays",
    "DB failovers": "the assumed DB failovers",
    "jobs longer than the TTL": "your durations",
}


def main_cause(advice) -> str:
    """What A's false expiries come from, in a few words ('the assumed pauses'), or that none are
    predicted: the headline's last words."""
    causes = sources(advice)
    if not causes or causes[0][1] <= 0:
        return "no false expiry predicted under these assumptions"
    source = advice.inputs.get("pauses_source", "assumed")
    return "rests on " + CAUSES[causes[0][0]].format(source=source)


def rests_on(advice, row=None) -> str:
    """One sentence: what a named setting's risk (A's by default) comes from, with the shares of
    its causes (the largest first, then any other of at least MENTIONED); and, when no DB failover
    is assumed, what one of the longest in FAILOVERS a day would add."""
    a = advice.assumptions
    row = advice.shortlist.iloc[0] if row is None else row
    name, ttl, h = row["name"], float(row["ttl"]), heartbeat_of(row)
    total = float(row["false_expiries_per_day"])
    causes = sources(advice, row)
    pauses = advice.inputs.get("pauses_source", "assumed")
    words = {
        "pauses": f"the {pauses} pauses ({amount(a.pause_rate)} per worker-hour, "
        f"{describe(a.pause_duration)})",
        "heartbeat delays": "the assumed heartbeat statement delay "
        f"({describe(a.heartbeat_delay)})",
        "DB failovers": f"the assumed DB failovers ({amount(a.db_stall_rate)} a day, "
        f"{describe(a.db_stall_duration)})",
        "jobs longer than the TTL": "your durations (jobs longer than the TTL)",
    }
    if not causes or total <= 0 or causes[0][1] <= 0:
        assumed = [
            line.split(": ", 1)[1] for line in a.lines() if line.startswith(("pauses", "DB"))
        ]
        text = (
            f"rests on: {name} predicts no false expiry under these assumptions "
            f"({'; '.join(assumed)})"
        )
    else:
        (cause, value), others = causes[0], causes[1:]
        text = claim(
            all(value >= other for _, other in others),
            f"rests on {words[cause]}: they make {percent(value / total)} of {name}'s "
            f"{amount(total)} false expiries a day",
        )
        text += "".join(
            f", {words[other]} {percent(share / total)}"
            for other, share in others
            if share >= MENTIONED * total
        )
        if cause == "pauses" and h is not None:
            text += (
                f"; the durations (mean job {duration(advice.durations.mean_value())}) only "
                "count how many pauses a job meets"
            )
    if not a.db_stall_rate:
        seconds = FAILOVERS[-1]
        failover = dataclasses.replace(
            a, db_stall_rate=1.0, db_stall_duration=Dist.constant(seconds)
        )
        added = risk_at(advice, failover, ttl, h)[2] - total
        busy, _ = _load(advice)
        each = (
            busy
            * pairs_stall_lapse(
                advice.durations,
                [ttl],
                [np.nan if h is None else h],
                failover,
                advice.inputs["seed"],
            )[0]
        )
        text += claim(
            added >= -1e-9,
            f"; no DB failover assumed: one of {duration(seconds)} a day would add "
            f"{amount(added)} ({amount(each)} leases lapse in each)",
        )
    return text


def lines(advice, moved: pd.DataFrame) -> list[str]:
    """The table in words, one line per moved assumption."""
    out = ["if the assumptions move (A's false expiries a day, 95% upper bound; the advice then):"]
    for row in moved.itertuples():
        each = (
            f", {amount(row.a_per_failover)} leases lapse in each failover"
            if np.isfinite(row.a_per_failover)
            else ""
        )
        h = None if pd.isna(row.heartbeat_interval) else row.heartbeat_interval
        here = setting_words(row.ttl, h, row.watcher_interval)
        same = row.name == "A"
        setting = (row.ttl, h, row.watcher_interval)
        then = claim(
            same == (setting == (advice.ttl, advice.heartbeat_interval, advice.watcher_interval)),
            "A, unchanged"
            if same
            else f"moves to {row.name + ', ' if row.name else ''}{here}"
            + ("" if row.met else " (the lowest risk found: none feasible)")
            + f": {amount(row.per_day)} a day (upper bound {amount(row.per_day_high)}), "
            f"recovery {duration(row.recovery)}",
        )
        out.append(
            f"  {row.change}: A {amount(row.a_per_day)} a day (upper bound "
            f"{amount(row.a_per_day_high)}){each}; advice {then}"
        )
    return out


# ---- the evidence: the model against simulation, one run per moved assumption ------------------

SIMULATED = ("pause rate x2", "pause tail x2", "pauses after all")  # and the failovers: the moves
# that raise the risk are the ones simulated (the others only scale the same model down)
SIMULATED_SHARE = 0.01  # pauses made frequent enough that about this share of jobs lapses
# ... but workers paused at most this share of the time: more, and pauses that run into each other
# (one long pause to the lease) make the simulation part from a model of independent pauses
PAUSED_AT_MOST = 0.025
EVIDENCE_COLUMNS = [
    "change",
    "simulated_as",
    "leases",
    "false_expiries",
    "measure",
    "simulated",
    "ci_low",
    "ci_high",
    "predicted",
]


def _quiet(advice, a: Assumptions) -> Assumptions:
    """`a` without crashes (they cause no false expiry) or the faults a row does not move."""
    return dataclasses.replace(a, crash_rate=0.0)


def _pause_case(advice, v: Variant) -> tuple[dict, float, str]:
    """(the run's faults, the predicted share per job, what was simulated) for a pause row: the
    pause rate raised until about SIMULATED_SHARE of jobs lapse (paused PAUSED_AT_MOST of the time
    at most), the prediction made at the rate simulated."""
    a = dataclasses.replace(_quiet(advice, v.assumptions), db_stall_rate=0.0)
    base = risk_at(advice, a, advice.ttl, advice.heartbeat_interval)[0]
    most = PAUSED_AT_MOST * 3600 / (a.pause_rate * a.pause_duration.mean_value())
    k = max(1.0, min(most, SIMULATED_SHARE / base if base > 0 else most))
    boosted = dataclasses.replace(a, pause_rate=a.pause_rate * k)
    predicted = risk_at(advice, boosted, advice.ttl, advice.heartbeat_interval)[0]
    return (
        _faults(advice, boosted),
        predicted,
        f"{amount(boosted.pause_rate)} pauses per worker-hour",
    )


def _failover_gap(advice, seconds: float) -> float:
    """Seconds from one scripted failover to the next: the failover and two TTLs, the time the
    backlog it leaves takes to drain at the pool's spare capacity, and five of the jobs' 99th
    percentile, so that each failover meets the pool in its steady state, as the model does."""
    i = advice.inputs
    backlog = i["jobs_per_s"] * (seconds + advice.ttl)
    spare = max(i["capacity"] - i["jobs_per_s"], 0.05 * i["capacity"])
    return seconds + 2 * advice.ttl + backlog / spare + 5 * i["durations_p99"] + 10.0


def failover_case(advice, v: Variant, horizon: float) -> tuple[dict, float, str, int]:
    """(the run's faults, predicted leases lapsing per failover, what was simulated, failovers)
    for a failover row: every worker's DB calls hang at once, as often as the run allows."""
    from sim.scenario.settings import ScriptedOutage

    a = dataclasses.replace(_quiet(advice, v.assumptions), pause_rate=0.0)
    busy = pool_of(advice.durations, advice.inputs["workers"], a).offered_load(
        advice.inputs["jobs_per_s"]
    )
    h = advice.heartbeat_interval
    predicted = (
        busy
        * pairs_stall_lapse(
            advice.durations, [advice.ttl], [np.nan if h is None else h], a, advice.inputs["seed"]
        )[0]
    )
    seconds = float(v.failover or 0.0)
    gap = _failover_gap(advice, seconds)
    times = np.arange(1, max(2, int(horizon // gap))) * gap  # a gap before each, one at least
    outages = tuple(
        ScriptedOutage(worker=w, at=float(t), duration=seconds)
        for t in times
        for w in range(advice.inputs["workers"])
    )
    faults = _faults(advice, dataclasses.replace(a, db_stall_rate=0.0))
    faults.update(partitions=[o.__dict__ for o in outages], partition_mode="hang")
    words = f"{count(len(times), 'failover')} of {duration(v.failover)}"
    return faults, predicted, words, len(times)


def _faults(advice, a: Assumptions) -> dict:
    """The faults table of A's scenario under `a`."""
    from sim.scenario.settings import to_dict

    moved = dataclasses.replace(advice, inputs={**advice.inputs, "assumptions": a})
    return to_dict(moved.scenario(jobs=1))["faults"]


def simulate(advice, jobs: int = 1000, seed: int = 0, executor=None, progress=None):
    """One run at A per moved assumption that raises the risk (SIMULATED and the failovers;
    EVIDENCE_COLUMNS), all in one sweep over the faults table: simulated beside predicted, with 95%
    intervals (Wilson for a share of leases; exact Poisson for lapses per failover). A run has
    `jobs` jobs (more for a fast queue: evidence.evidence_jobs), and as many failovers as
    fit in it, at least one."""
    from sim.advice.evidence import evidence_jobs
    from sim.sweeps import sweep
    from sim.theory.stats import wilson_interval

    rate = advice.inputs["jobs_per_s"]
    jobs = evidence_jobs(advice, jobs)
    base = advice.scenario(jobs=jobs, seed=seed, name="advice-sensitivity", tail=1.0)
    cases = []
    for v in variants(advice.assumptions)[1:]:
        if not (v.failover or v.change.startswith(SIMULATED)):
            continue
        if v.failover:
            faults, predicted, words, n = failover_case(advice, v, jobs / rate)
            cases.append((v, "per failover", faults, predicted, words, n))
        else:
            cases.append((v, "per job", *_pause_case(advice, v), 1))
    result = sweep(
        base,
        {"faults": [case[2] for case in cases]},
        1,
        seed=seed,
        executor=executor,
        progress=progress,
        metrics=["leases", "false_expiries"],
    )
    rows = []
    for (v, measure, _, predicted, words, n), run_row in zip(
        cases, result.runs.itertuples(), strict=True
    ):
        leases, lapsed = int(run_row.leases), int(run_row.false_expiries)
        if measure == "per job":
            value = lapsed / leases if leases else np.nan
            low, high = wilson_interval(lapsed, leases)
        else:
            value = lapsed / n
            low, high = (x / n for x in poisson_interval(lapsed))
        rows.append(
            {
                "change": v.change,
                "simulated_as": words,
                "leases": leases,
                "false_expiries": lapsed,
                "measure": measure,
                "simulated": value,
                "ci_low": low,
                "ci_high": high,
                "predicted": predicted,
            }
        )
    return pd.DataFrame(rows, columns=EVIDENCE_COLUMNS)


def poisson_interval(k: int, confidence: float = 0.95) -> tuple[float, float]:
    """Exact (Garwood) interval of a Poisson mean seen as k events."""
    alpha = 1 - confidence
    low = 0.0 if k == 0 else float(chi2_ppf(alpha / 2, 2 * k) / 2)
    high = float(chi2_ppf(1 - alpha / 2, 2 * k + 2) / 2)
    return low, high


def evidence_lines(frame: pd.DataFrame) -> list[str]:
    """One line per simulated row: the model against the simulation, with the words to match."""
    out = []
    for row in frame.itertuples():
        inside = row.ci_low <= row.predicted <= row.ci_high
        shown = (
            (percent(row.simulated), percent(row.ci_low), percent(row.ci_high))
            if row.measure == "per job"
            else (amount(row.simulated), amount(row.ci_low), amount(row.ci_high))
        )
        predicted = percent(row.predicted) if row.measure == "per job" else amount(row.predicted)
        out.append(
            f"{row.change}: simulated at A with {row.simulated_as}: {shown[0]} {row.measure} "
            f"[{shown[1]}, {shown[2]}] over {count(row.leases, 'lease')}; the model "
            f"{predicted}: {'agrees' if inside else 'DISAGREES'}"
        )
    return out
