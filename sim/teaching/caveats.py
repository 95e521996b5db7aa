"""Sentences that follow the numbers beside them, whatever the parameters or the mode.

A notebook claim that fails raises (teaching.claim); these helpers are for the sentences a
reader's own values, or fast mode's small runs, can legitimately turn around: they say in words
what the numbers show, and say so when the runs are too small to support the lesson's sentence.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from sim.support.in_words import percent


def contention_sentence(frame: pd.DataFrame) -> str:
    """02: what the busiest point of teaching.claim_contention() shows, in words that follow its
    numbers: which strategy drained the batch first, and what the blocking FOR UPDATE's convoy
    cost there (a short select-to-update gap shrinks it until FOR UPDATE may even be fastest)."""
    most = int(frame["workers"].max())
    busiest = frame[frame["workers"] == most].groupby("claim").mean(numeric_only=True)
    drain, waits = busiest["drain_time"], busiest["lock_wait_seconds"]
    gap_ms = 1000 * float(frame["gap"].iloc[0])
    fastest = str(drain.idxmin())
    text = (
        f"With {most} workers and a {gap_ms:g} ms gap between read and write, **{fastest}** "
        f"drained the batch first, in {drain[fastest]:.3g} s"
    )
    others = [
        s
        for s in ("skip_locked", "select_for_update", "conditional_update")
        if s in drain.index and s != fastest
    ]
    if others:
        text += " (" + ", ".join(f"{s} {drain[s]:.3g} s" for s in others) + ")"
    text += "."
    if "select_for_update" in waits.index:
        convoy = float(waits["select_for_update"])
        if convoy > 0 and waits.idxmax() == "select_for_update":
            text += (
                f" The blocking FOR UPDATE spent {convoy:.3g} worker-seconds waiting on row "
                "locks, more than any other strategy: that is the convoy."
            )
        else:
            text += (
                " The blocking FOR UPDATE waited on no more row locks than the others: no convoy "
                "at this gap."
            )
        if fastest == "select_for_update":
            text += (
                f" With the lock held only {gap_ms:g} ms per claim, queueing behind it cost less "
                "than it saved here: the convoy is the price of holding a row lock for the whole "
                "gap, and it grows with the gap."
            )
    if "conditional_update" in busiest.index:
        text += (
            f" The conditional UPDATE lost {busiest.loc['conditional_update', 'lost_claims']:.0f} "
            "claims (no row back) and read them again."
        )
    return text + " All three are *correct*; they differ in how much work the losers waste."


def _mode_hint(fast: bool, runs: str) -> str:
    return (
        f" Fast mode runs only {runs}; the full run (`fast = False`, or LEASELAB_FAST unset) runs "
        "more."
        if fast
        else ""
    )


def recovery_theory_sentence(
    table: pd.DataFrame,
    *,
    replications: int,
    fast: bool,
    x: str = "policy.watcher_interval",
    y: str = "recovery_latency_mean",
) -> str:
    """04: where the closed form lies against the simulated 95% intervals, and how fast recovery
    grows with the watcher interval (a least-squares slope over the points, theory 1/2), saying so
    when misses come from too few replications rather than from the formula."""
    mean, low, high = table[f"{y}_mean"], table[f"{y}_ci_low"], table[f"{y}_ci_high"]
    inside = table["theory"].between(low, high)
    text = (
        f"The theory lies inside the 95% confidence interval at {int(inside.sum())} of "
        f"{len(table)} watcher intervals"
    )
    missed = table[~inside]
    if len(missed):
        text += "; it misses at " + "; ".join(
            f"W = {r[x]:g} s (theory {r['theory']:.3g} s, simulated {r[f'{y}_mean']:.3g} s, "
            f"interval {r[f'{y}_ci_low']:.3g} to {r[f'{y}_ci_high']:.3g} s)"
            for _, r in missed.iterrows()
        )
        if fast:
            text += (
                f". With {replications} runs per point a miss says little: the wait for the "
                "watcher alone is uniform over W, so at long intervals a handful of runs leaves "
                "the mean far from W/2."
            )
        else:
            text += ". With 95% intervals, a point may miss by chance."
    else:
        text += "."
    slope = (
        float(np.polyfit(table[x].astype(float), mean.astype(float), 1)[0])
        if len(table) > 1
        else float("nan")
    )
    text += (
        f" Fitted over the points, recovery grows by {slope:.2g} s per second of watcher interval "
        f"(the theory: 0.5), from {mean.iloc[0]:.3g} s at W = {table[x].iloc[0]:g} s to "
        f"{mean.iloc[-1]:.3g} s at W = {table[x].iloc[-1]:g} s."
    )
    if len(missed) or not 0.35 <= slope <= 0.65:
        text += _mode_hint(fast, f"{replications} replications per watcher interval")
    return text


def false_expiry_caveat(table: pd.DataFrame, theory, *, fast: bool) -> str:
    """03: what the false-expiry sweep can test. `theory(ttl, heartbeat)` is the predicted rate.
    A setting with no false expiry only bounds the rate below the upper end of its interval: when
    that bound is more than ten times the theory, the runs cannot test it there."""
    notes = []
    for beat, group in table.groupby("policy.heartbeat", sort=True):
        label = "with a heartbeat" if beat else "without a heartbeat"
        rows = [(r, float(theory(r["policy.lease_ttl"], bool(beat)))) for _, r in group.iterrows()]
        untestable = [(r, t) for r, t in rows if r["false_expiries"] == 0 and r["high"] > 10 * t]
        outside = [
            (r, t) for r, t in rows if r["false_expiries"] > 0 and not r["low"] <= t <= r["high"]
        ]
        if untestable:
            r, t = max(untestable, key=lambda rt: rt[0]["high"] / max(rt[1], 1e-300))
            ttls = ", ".join(f"{row['policy.lease_ttl']:g}" for row, _ in untestable)
            ratio = r["high"] / t if t > 0 else float("inf")
            times = "over a thousand" if ratio > 1000 else f"{ratio:.0f}"
            notes.append(
                f"{label}, no false expiry was seen at TTL {ttls} s: in {int(r['leases'])} leases "
                f"that only bounds the rate below {r['high']:.2g} (the down-pointing markers), "
                f"{times} times the theory's {t:.2g} at {r['policy.lease_ttl']:g} s, so these "
                "runs cannot test the theory there"
            )
        if outside:
            notes.append(
                f"{label}, the theory is outside the 95% interval at TTL "
                + ", ".join(
                    f"{r['policy.lease_ttl']:g} s (theory {t:.2g}, simulated {r['rate']:.2g})"
                    for r, t in outside
                )
            )
    if not notes:
        return (
            "Every simulated point is consistent with the theory: inside its 95% interval, or a "
            "bound that tests it."
        )
    text = "What these runs can and cannot show: " + "; ".join(notes) + "."
    leases = int(table["leases"].min())
    return text + _mode_hint(fast, f"a few hundred leases per TTL (as few as {leases})")


def false_expiry_theory(scenario):
    """theory(ttl, heartbeat) -> sim.theory.closed_forms's false-expiry probability for `scenario`
    (what teaching.plot_false_expiry draws as dashed lines)."""
    from sim.theory import closed_forms

    w, p, f = scenario.workload, scenario.policy, scenario.faults

    def theory(ttl: float, heartbeat: bool) -> float:
        return closed_forms.false_expiry_probability(
            ttl=float(ttl),
            heartbeat_interval=p.heartbeat_interval if heartbeat else None,
            job_duration=w.processing,
            pause_rate=f.pause_rate,
            pause_duration=f.pause_duration,
            latency=w.statement_latency.mean_value(),
        )

    return theory


def duplicate_charge_sentence(runs: dict) -> str:
    """05: why "marker, no key" can show more duplicate PSP charges than "no marker, no key".

    The marker does not touch the PSP call; but the scenario's crash point sits *after the marker
    insert*, so only runs with a marker crash there, and every such crash is retried and charged
    again. The sentence accounts for the difference with the crash counts of the two runs."""
    with_marker, without = runs["marker, no key"].summary, runs["no marker, no key"].summary
    extra = int(with_marker.duplicate_external_effects) - int(without.duplicate_external_effects)
    crashes = int(with_marker.crashes) - int(without.crashes)
    text = (
        f'Why does "marker, no key" show {int(with_marker.duplicate_external_effects)} duplicate '
        f'charges and "no marker, no key" {int(without.duplicate_external_effects)}? '
    )
    if extra == crashes:
        return text + (
            f"The difference, {extra}, is exactly the difference in crashes "
            f"({int(with_marker.crashes)} against {int(without.crashes)}): this scenario crashes "
            "consumers right *after the marker insert*, a step that only exists when there is a "
            "marker. Each such crash rolls back, the job is retried, and the retry calls the PSP "
            "again. The marker neither causes nor prevents duplicate charges; only the "
            "idempotency key does."
        )
    return text + (
        f"The runs differ by {extra} charges and by {crashes} crashes after the marker insert (a "
        "step that only exists with a marker); the rest is the two runs taking different paths "
        "from the same seed. The marker does not touch the PSP call; only the idempotency key "
        "does."
    )


def leases_to_show(target: float, confidence: float = 0.95) -> int:
    """How many leases without a false expiry it takes for the Wilson interval's upper end to fall
    below `target` (about 3.84 / target at 95%)."""
    from scipy import stats

    z2 = float(stats.norm.ppf((1 + confidence) / 2)) ** 2
    return int(np.ceil(z2 * (1 - target) / target))


def false_expiry_target_sentence(row, target: float) -> str:
    """06: what the simulated false-expiry interval at the recommended TTL says about the target,
    following its numbers: met (upper end below), missed (lower end above), or not decided."""

    low, high, leases = (
        float(row.false_expiry_ci_low),
        float(row.false_expiry_ci_high),
        int(row.leases),
    )
    if high < target:
        return (
            f"The interval's upper end, {percent(high)}, is already below the target of "
            f"{percent(target)}: these {leases} leases show that the target is met (at 95% "
            "confidence)."
        )
    if low > target:
        return (
            f"The interval's lower end, {percent(low)}, is above the target of {percent(target)}: "
            "these runs show that the recommendation misses it; look at the pauses and "
            "processing times it assumed."
        )
    return (
        f"The interval contains the target of {percent(target)}: {leases} leases can neither "
        "confirm nor rule it out. Without a single false expiry it takes about "
        f"{leases_to_show(target)} leases to show the target is met."
    )


def review_tally_sentence(review) -> str:
    """01: the baseline review's tally, with the untested items named from its table (an example
    typed by hand once named the fencing item in a run where fencing passed)."""
    counts, table = review.counts(), review.table
    untested = [
        f"“{str(item).split('. ', 1)[-1]}”"
        for item in table.loc[table["status"] == "untested", "item"]
    ]
    text = f"The baseline passes {counts['pass']} checks; "
    if untested:
        text += (
            f"{counts['untested']} {'is' if counts['untested'] == 1 else 'are'} *untested*, "
            f"{_and(untested)}: the runs never exercised "
            f"{'it' if counts['untested'] == 1 else 'them'}, which is neither a pass nor a "
            "failure; "
        )
    else:
        text += (
            "none is *untested* (a property the runs never exercised, neither a pass nor a "
            "failure); "
        )
    return text + (
        f"{counts['risk']} {'is a risk' if counts['risk'] == 1 else 'are risks'} and "
        f"{counts['fail']} {'fails' if counts['fail'] == 1 else 'fail'}. Each evidence line says "
        "what was measured, and its basis which runs (scenario or variant, seeds, leases, "
        "simulated interval)."
    )


def _and(items: list[str]) -> str:
    """'a', 'a and b', 'a, b and c'."""
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"
