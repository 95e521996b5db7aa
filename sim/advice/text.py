"""The advice in words (sim.advice.advisor.Advice's sentences): the headline, what it costs, what it
rests on, the named settings side by side, where the TTL sits, the assumptions and the evidence.

Every sentence is built beside the numbers it shows; where its words judge a number ("within",
"over", "faster", "more risk", "contains"), sim.support.in_words.claim checks that the judgement
follows from those numbers, so that no sentence can contradict its own figure. Settings are named by
their letter in the advice's one table of named settings (sim.advice.shortlist): A is the
recommendation.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from sim.advice import sensitivity
from sim.advice.candidates import feasibility_rules, prefer_rule
from sim.advice.risk import SECONDS_PER_DAY
from sim.advice.shortlist import carried, heartbeat_of, label, setting_words
from sim.support.in_words import amount, apart, claim, count, duration, percent
from sim.theory import closed_forms

SHORTEST_WHY = (
    "below 1 s, scheduling jitter and connection hiccups that this model leaves out would decide "
    "(set min_ttl to a floor you trust)"
)
LONGEST_WHY = (
    "a lease of more than a day leaves a crashed job waiting a day; split the job or add a "
    "heartbeat"
)

# ---- the answer ----------------------------------------------------------------------------------


def headline(advice) -> str:
    """A, what it costs a day at the queue's rate, its recovery and DB load, and what it rests on,
    in one sentence (the next line says how much)."""
    simulated = " (simulated)" if advice.recovery_source == "simulated" else ""
    return (
        f"A: {setting_words(advice.ttl, advice.heartbeat_interval, advice.watcher_interval)}: "
        f"{amount(advice.false_expiries_per_day)} false expiries a day (95% upper bound "
        f"{amount(advice.false_expiries_per_day_high)}; {target_text(advice)}), recovery ~ "
        f"{duration(advice.recovery_mean)}{simulated}, {amount(advice.db_load)} heartbeat + "
        f"watcher statements/s; {sensitivity.main_cause(advice)}"
    )


def target_text(advice) -> str:
    """'target 0.1% per job = 86 a day at 1 jobs/s' or 'target 20 a day = 0.023% per job at ...'."""
    rate = advice.inputs["jobs_per_s"]
    per_job, per_day = (
        advice.target_false_expiry,
        advice.target_false_expiry * rate * SECONDS_PER_DAY,
    )
    if advice.target_per_day is None:
        return f"target {percent(per_job)} per job = {amount(per_day)} a day at {rate:.3g} jobs/s"
    return (
        f"target {amount(advice.target_per_day)} a day = {percent(per_job)} per job at "
        f"{rate:.3g} jobs/s"
    )


def queue_line(advice, settings) -> str:
    """'A in BullMQ 6's own settings: lockDuration = 3000 ms, ...' (`settings`: a
    sim.advice.queue_terms QueueAdvice), named by the setting it runs (shortlist.carried)."""
    named = ", ".join(f"{s.name} = {s.text}" for s in settings.settings) or (
        "none: it has no lease, heartbeat or rescue setting to change"
    )
    row = carried(advice, settings)
    if row is None:
        which = f"{settings.label} runs a mechanism of its own (see below), "
    else:
        h = heartbeat_of(row)
        renews = "" if h is not None or advice.heartbeat_interval is None else ", no heartbeat"
        which = (
            f"{row['name']}{' (' + renews[2:] + ')' if renews else ''} "
            if len(row["name"]) == 1
            else f"{setting_words(row['ttl'], h, row['watcher_interval'])}: "
        )
    return f"{which}in {settings.label}'s own settings: {named}"


def shortfall(advice) -> str | None:
    """'NOT MET: ...' when no candidate met the target (A is then the lowest risk found)."""
    if advice.met:
        return None
    floor = advice.inputs.get("min_ttl")
    above = f" with TTL >= the {duration(floor)} floor (min_ttl)" if floor is not None else ""
    return (
        f"NOT MET: no candidate{above} has a false-expiry upper bound below "
        f"{percent(advice.target_false_expiry / advice.inputs['margin'])} (target / margin); A "
        f"is the lowest found{' at or above the floor' if floor is not None else ''}."
    )


def load_line(advice) -> str:
    """The load the figures are at: the arrival rate and the workers' busy share."""
    i = advice.inputs
    given = (
        "(arrival_rate)"
        if i["arrival_rate"] is not None
        else "assumed (give arrival_rate for your queue's)"
    )
    return (
        f"load: {i['jobs_per_s']:.3g} jobs/s {given}, {percent(advice.utilisation)} of "
        f"{i['pool'].capacity_words()}"
    )


def risk_lines(advice) -> list[str]:
    """A's false-expiry risk per job, per day and per year at the queue's rate, with 95% upper
    bounds, and what a lease survives."""
    i = advice.inputs
    rate = i["jobs_per_s"]
    where = (
        f"at {rate:.3g} jobs/s (arrival_rate)"
        if i["arrival_rate"] is not None
        else f"at {rate:.3g} jobs/s (assumed; give arrival_rate for your queue's)"
    )
    per_year, per_year_high = (
        365 * advice.false_expiries_per_day,
        365 * advice.false_expiries_per_day_high,
    )
    return [
        f"risk of A {where}: {percent(advice.predicted_false_expiry)} of jobs (95% upper bound "
        f"{percent(advice.predicted_false_expiry_high)}) = "
        f"{amount(advice.false_expiries_per_day)} false expiries a day (upper bound "
        f"{amount(advice.false_expiries_per_day_high)})",
        f"  duplicate external effects: up to {amount(per_year)} a year (upper bound "
        f"{amount(per_year_high)}); each false expiry lets a second worker repeat the PSP "
        "call, harmless only with an idempotency key",
        "  " + slack_line(advice),
    ]


def slack_line(advice) -> str:
    """What A's lease survives, against the declared tails (the review's item 2, before any
    run)."""
    a, h = advice.assumptions, advice.heartbeat_interval
    if h is None:
        over = float(np.mean(np.asarray(advice.durations.samples) > advice.ttl))
        return (
            f"slack: no heartbeat, so the lease must outlast the whole job; {percent(over)} of "
            f"the observed jobs took longer than the {duration(advice.ttl)} TTL"
        )
    slack = advice.ttl - h - a.statement_latency
    longer = [
        f"{percent(float(closed_forms.survival(d, slack)))} of the {name}"
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


# ---- the named settings -------------------------------------------------------------------------


def choice_rule(advice) -> str:
    return prefer_rule(advice.prefer, advice.inputs["recovery_tolerance"])


def tradeoff_lines(advice) -> list[str]:
    """The named settings side by side (A starred), each with its figures and its role."""
    table = advice.shortlist
    if table is None or not len(table):
        return []
    lines = [f"the settings compared ({choice_rule(advice)}); each one's role:"]
    for row in table.itertuples():
        mark = "*" if row.name == "A" else " "
        scored = f"score {duration(row.score)}" if row.feasible else "not feasible"
        lines.append(
            f" {mark} {row.name} "
            f"{setting_words(row.ttl, row.heartbeat_interval, row.watcher_interval)}: false "
            f"expiry {percent(row.predicted_false_expiry)} (upper bound "
            f"{percent(row.predicted_false_expiry_high)}), {amount(row.false_expiries_per_day)} a "
            f"day; recovery {duration(row.predicted_recovery_mean)}; {amount(row.db_load)} "
            f"statements/s; {scored}; {row.role}"
        )
    return lines


def position(advice) -> list[str]:
    """Where A's TTL sits in the searched range, and why not the named settings one step either
    side."""
    inputs, table, ttl = advice.inputs, advice.candidates, advice.ttl
    ttls = inputs["searched"]["ttl"]
    floor = inputs["min_ttl"]
    rules = feasibility_rules(table, advice.target_false_expiry, inputs)
    if floor is not None and ttl == min(t for t in ttls if t >= floor):
        from sim.advice.candidates import choose

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
    for _, row in advice.shortlist.iterrows():
        if row["step"] in ("shorter", "longer"):
            lines.append(f"one step {row['step']}, {label(row)}: {why_not(advice, row)}")
    return lines


def why_not(advice, row: pd.Series) -> str:
    """Why a named setting lost to A, with both sides' figures."""
    if not row["feasible"]:
        return "not feasible: " + "; ".join(infeasible_reasons(row, advice))
    mine, theirs = advice.predicted_false_expiry, row["predicted_false_expiry"]
    slower = row["predicted_recovery_mean"] / advice.predicted_recovery_mean - 1
    sides = (
        f"false expiry {percent(theirs)} against {percent(mine)} ({ratio(mine, theirs)}), "
        f"recovery {duration(row['predicted_recovery_mean'])} against "
        f"{duration(advice.predicted_recovery_mean)} "
        + claim(
            (slower >= 0) == (row["predicted_recovery_mean"] >= advice.predicted_recovery_mean),
            f"({percent(abs(slower))} {'slower' if slower >= 0 else 'faster'})",
        )
    )
    lowest = lowest_score(advice)
    tolerance = advice.inputs["recovery_tolerance"]
    limit = lowest * (1 + tolerance)
    mine_text, limit_text = apart(row["score"], limit, duration, 3)
    bound = f"the {limit_text} limit (the lowest, {duration(lowest)}, + {tolerance:.0%})"
    if row["score"] > limit + 1e-9:
        return claim(
            row["score"] > limit,
            f"feasible, {sides}; its score {mine_text} is over {bound} (prefer {advice.prefer})",
        )
    near = claim(
        row["score"] <= limit + 1e-9,
        f"feasible, {sides}; its score {mine_text} is within {bound}",
    )
    if row["db_load"] > advice.db_load + 1e-12:
        return (
            f"{near}, but it costs {amount(row['db_load'])} statements/s against "
            f"{amount(advice.db_load)}"
        )
    return f"{near}, at the same DB load, and A's is no higher"


def lowest_score(advice) -> float:
    """The lowest score among the feasible candidates (NaN when none is feasible)."""
    table = advice.candidates
    return float(table.loc[table["feasible"], "score"].min())


def ratio(mine: float, theirs: float) -> str:
    """'3.7 times less risk', '2 times more risk', 'the same risk' (theirs against mine)."""
    if theirs == mine:
        return "the same risk"
    if theirs == 0:
        return "no risk predicted"
    if mine == 0:
        return "more risk, where A predicts none"
    factor = mine / theirs
    return claim(
        (factor > 1) == (theirs < mine),
        f"{factor:.2g} times less risk" if factor > 1 else f"{1 / factor:.2g} times more risk",
    )


def infeasible_reasons(row: pd.Series, advice) -> list[str]:
    """The feasibility rules a candidate (a row of advice.candidates) breaks, in words with
    numbers."""
    inputs = advice.inputs
    frame = row.to_frame().T.infer_objects()
    passed = feasibility_rules(frame, advice.target_false_expiry, inputs).iloc[0]
    hb, per_ttl, latency = (
        row["heartbeat_interval"],
        inputs["heartbeats_per_ttl"],
        inputs["statement_latency"],
    )
    allowed = advice.target_false_expiry / inputs["margin"]
    high, limit = apart(row["predicted_false_expiry_high"], allowed)
    words = {
        "target": lambda: claim(
            row["predicted_false_expiry_high"] > allowed,
            f"its false-expiry upper bound {high} per job "
            f"(predicted {percent(row['predicted_false_expiry'])}) is over the target / margin "
            f"({percent(advice.target_false_expiry)} / {inputs['margin']:g} = {limit})",
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


def bare_candidates(advice) -> pd.DataFrame:
    """The candidates without a heartbeat."""
    return advice.candidates[advice.candidates["heartbeat_interval"].isna()]


def heartbeat_line(advice) -> str:
    """Without a heartbeat (the named setting E, or whichever letter it has) against with one:
    its risk and recovery, and what A's heartbeat costs at the load."""
    table = advice.shortlist
    bare = table[table["heartbeat_interval"].isna()]
    h = advice.heartbeat_interval
    if bare.empty:
        without = "no TTL without a heartbeat was searched"
    else:
        row = bare.iloc[-1]
        allowed = advice.target_false_expiry / advice.inputs["margin"]
        if row["feasible"]:
            without = (
                f"without a heartbeat the lease must outlast nearly every job: the shortest "
                f"feasible TTL, {label(row)}, leaves a crash waiting about "
                f"{duration(row['predicted_recovery_mean'])}"
            )
        else:
            lowest = float(bare_candidates(advice)["predicted_false_expiry_high"].min())
            why = (
                f" (predicted {percent(row['predicted_false_expiry'])}: "
                f"{count(advice.inputs['durations_n'], 'observed job')} cannot show a smaller "
                "share outlasting the TTL)"
                if row["predicted_false_expiry"] <= allowed
                else ""
            )
            without = claim(
                lowest > allowed,
                f"without a heartbeat no TTL searched is feasible: the lowest false-expiry upper "
                f"bound any reaches is {percent(lowest)} per job, over target / margin "
                f"({percent(allowed)}); {label(row)}, the shortest TTL near it, has "
                f"{percent(row['predicted_false_expiry_high'])}{why}",
            )
    if h is None:
        return f"{without}; A needs no heartbeat"
    return (
        f"{without}; with a heartbeat every {duration(h)} the TTL only has to outlast the gap "
        f"between renewals: {duration(advice.ttl)}, recovering in about "
        f"{duration(advice.recovery_mean)}, for {amount(advice.heartbeat_load)} heartbeat "
        f"statements/s at {advice.inputs['jobs_per_s']:.3g} jobs/s"
    )


# ---- the details ---------------------------------------------------------------------------------


def recovery_line(advice) -> str:
    i = advice.inputs
    source = "simulated, see the finding" if advice.recovery_source == "simulated" else "predicted"
    step = (
        "the watcher requeues expired leases"
        if not i["claim_takes_expired"]
        else "claims take expired leases"
    )
    return (
        f"recovery after a crash under A: mean {duration(advice.recovery_mean)} ({source}), p95 "
        f"{duration(advice.predicted_recovery_p95)} (predicted); "
        f"{count(i['workers'], 'worker')} polling every {duration(i['poll_interval'])}, "
        f"{percent(advice.utilisation)} busy: a crashed job waits for an idle worker's poll or a "
        "busy one's next free moment, the crashed worker back after "
        f"{duration(advice.assumptions.restart_delay)}; {step}"
    )


def counts_line(advice) -> str:
    """How many candidates met the target and how many were feasible, with the rules."""
    table, i = advice.candidates, advice.inputs
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
        f"within {percent(advice.target_false_expiry)}), {feasible} "
        f"{'is' if feasible == 1 else 'are'} feasible ({', '.join(rules)})"
    )


def durations_line(advice) -> str:
    i = advice.inputs
    read = i.get("durations_read", {})
    if read.get("echo"):
        return f"durations: {read['echo']}"
    return (
        f"durations: {count(i['durations_n'], 'job')}, median {duration(i['durations_median'])}, "
        f"p99 {duration(i['durations_p99'])}, max {duration(i['durations_max'])}"
    )


def evidence_lines(evidence: pd.DataFrame) -> list[str]:
    """One line per simulated named setting: false expiry and recovery with their 95% intervals
    and predictions."""
    lines = []
    for row in evidence.itertuples():
        mark = "*" if row.name == "A" else " "
        interval = (
            f"[{duration(row.recovery_ci_low)}, {duration(row.recovery_ci_high)}]"
            if np.isfinite(row.recovery_ci_low)
            else "(too few crashes for an interval)"
        )
        lines.append(
            f"{mark} {row.name} {setting_words(row.ttl, heartbeat_of(row), row.watcher_interval)}: "
            f"false expiry {percent(row.false_expiry)} [{percent(row.false_expiry_ci_low)}, "
            f"{percent(row.false_expiry_ci_high)}] of {count(row.leases, 'lease')} (predicted "
            f"{percent(row.predicted_false_expiry)}); recovery {duration(row.recovery_mean)} "
            f"{interval} over {count(row.recoveries, 'crash', 'crashes')} (predicted "
            f"{duration(row.predicted_recovery_mean)}); {percent(row.utilisation)} busy with "
            f"{count(row.crash_rate, 'crash', 'crashes')} per worker-hour"
        )
    return lines


def text(advice, settings=None) -> str:
    """The whole advice as printed: the answer first (A, in the queue's own settings when given,
    what it rests on, how it moves), then the details and the evidence (evidence_text)."""
    i = advice.inputs
    floor = i.get("min_ttl")
    lines = [headline(advice)]
    if settings is not None:
        lines.append("  " + queue_line(advice, settings))
    moved = advice.sensitivity
    lines.append("  " + sensitivity.rests_on(advice))
    lines += ["  " + line for line in sensitivity.lines(advice, moved)]
    missed = shortfall(advice)
    if missed is not None:
        lines.append("  " + missed)
    lines += [f"  warning: {w}" for w in advice.warnings()]
    lines.append("  " + load_line(advice))
    lines += ["  " + line for line in risk_lines(advice)]
    lines += ["  " + line for line in tradeoff_lines(advice)]
    lines += [f"  where it sits: {line}" for line in advice.position]
    lines.append("  " + heartbeat_line(advice))
    lines.append("  " + durations_line(advice))
    lines += ["  assumptions: " + advice.assumptions.lines()[0]]
    lines += ["               " + line for line in advice.assumptions.lines()[1:]]
    lines += [
        "  " + recovery_line(advice),
        f"  DB load at {i['jobs_per_s']:.3g} jobs/s: {amount(advice.heartbeat_load)} "
        f"heartbeats/s + {amount(advice.watcher_load)} watcher ticks/s",
        "  " + counts_line(advice),
    ]
    if floor is not None:
        below = int((advice.candidates["ttl"] < floor).sum())
        lines.append(
            f"  TTL floor: {duration(floor)} (min_ttl); {count(below, 'candidate')} with a "
            f"shorter TTL {'was' if below == 1 else 'were'} ruled out"
        )
    return "\n".join(lines + evidence_text(advice))


def evidence_text(advice) -> list[str]:
    """The lines text() ends with once the advice is verified: the simulated named settings, the
    verdict, the findings and the moved assumptions simulated at A (none without evidence)."""
    lines = []
    if advice.evidence is not None and len(advice.evidence):
        lines.append("  evidence (simulated, 95% intervals):")
        lines += ["   " + line for line in evidence_lines(advice.evidence)]
        lines += ["  " + line for line in (advice.verdict(), advice.target_line()) if line]
        lines += ["  " + line for line in advice.findings()]
    if advice.sensitivity_evidence is not None and len(advice.sensitivity_evidence):
        lines.append("  the model under the moved assumptions, against simulation at A:")
        lines += ["   " + line for line in sensitivity.evidence_lines(advice.sensitivity_evidence)]
    return lines
