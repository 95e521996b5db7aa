"""The notebooks' "try it" exercises: every `check_*` tells the reader whether an answer is right,
as a `Verdict`; with the fixtures some of them need."""

from __future__ import annotations

import math
from functools import cache
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from sim.db.base import Backend
from sim.errors import ConfigError
from sim.support.in_words import percent
from sim.teaching.answers import (
    Verdict,
    accepts,
    as_set,
    named_mistake,
    number,
    set_mismatch,
    tolerance,
    typed_name,
    unanswered,
)
from sim.teaching.by_hand import Delivery, Script, ledger_counts
from sim.teaching.lessons import STRATEGIES, retention_experiment
from sim.teaching.notebook import seconds

if TYPE_CHECKING:
    pass


def check_lease_end(answer, run) -> Verdict:
    """01: when does the crashed owner's lease run out in the database? (within half a second)"""
    hint = "the last renewal before the crash set lease_until; the crash does not change it."
    if answer is None:
        return unanswered(hint)
    crashed = run.leases[run.leases["end_reason"] == "crashed"]
    if crashed.empty:
        raise ConfigError("check_lease_end: this run has no crashed lease")
    lease = crashed.iloc[0]
    truth = float(lease["until"])
    renewed = run.events[
        (run.events["worker"] == lease["worker"])
        & (run.events["job"] == lease["job"])
        & run.events["kind"].isin(["claim", "heartbeat"])
    ]
    last = float(renewed["t"].max())
    value = number(answer)
    if value is not None and abs(value - truth) <= 0.5:
        return Verdict(
            True,
            f"The lease was last renewed at {last:.3g} s and runs out at {truth:.4g} s = "
            f"{last:.3g} s + TTL {run.scenario.policy.lease_ttl:g} s, however early the owner "
            "died.",
        )
    return Verdict(
        False,
        f"Look for the last claim or heartbeat of {lease['worker']} before the crash "
        f"at {lease['end']:.3g} s in `run.events`; {hint}",
    )


def check_lock_recovery(answer, run) -> Verdict:
    """01: with a lock (no expiry), when is the crashed owner's job claimed again? ('never')"""
    if answer is None:
        return unanswered(
            "what would have to happen for another worker to take a lock nobody releases?"
        )
    recovered = run.recoveries["latency"].notna().any()
    never = (
        isinstance(answer, str) and answer.strip().lower() in ("never", "none", "inf", "infinity")
    ) or ((value := number(answer)) is not None and math.isinf(value))
    if recovered:
        raise ConfigError(
            "check_lock_recovery: in this run the job was claimed again; pass the lock run"
        )
    if never:
        return Verdict(
            True,
            f"In this run the job is still {run.jobs['status'].iloc[0]} at the horizon "
            f"({run.scenario.horizon:g} s): a lock has no expiry, so nobody may take it.",
        )
    return Verdict(
        False,
        "Nothing ever releases the lock: the dead owner cannot, and no clock runs out. "
        "Answer 'never' (or math.inf).",
    )


@cache
def _double_claims_by_strategy(seeds: tuple[int, ...] = (1, 2, 3)) -> dict[str, int]:
    from sim import runner
    from sim.scenario.settings import preset

    race = preset("read-then-write-race")
    settings = {"workload.jobs": 120, "horizon": 90.0, "expect": []}
    out = {}
    for strategy in STRATEGIES:
        out[strategy] = sum(
            int(
                runner.run(
                    race.with_overrides({"policy.claim": strategy, **settings}), seed=s
                ).summary["double_claims"]
            )
            for s in seeds
        )
    return out


def check_safe_claims(answer) -> Verdict:
    """02: which claim strategies never let two workers hold one job? (a set of names)"""
    if answer is None:
        return unanswered(f"choose among {', '.join(STRATEGIES)}.")
    given = as_set(answer)
    if given is None:
        return Verdict(False, f"Give a set of strategy names; {answer!r} is not one.")
    chosen = {typed_name(a) for a in given}
    unknown = chosen - set(STRATEGIES)
    if unknown:
        return Verdict(
            False,
            f"{', '.join(sorted(unknown))}: not a claim strategy; choose among "
            f"{', '.join(STRATEGIES)}.",
        )
    counts = _double_claims_by_strategy()
    safe = {s for s, n in counts.items() if n == 0}
    evidence = "; ".join(f"{s}: {n} double claims" for s, n in counts.items())
    if chosen == safe:
        return Verdict(
            True,
            f"Measured on three contended runs each: {evidence}. The safe ones decide "
            "and write in one atomic step (or hold the row lock from the read to the write).",
        )
    return Verdict(
        False,
        set_mismatch((chosen - safe, "let two workers win"), (safe - chosen, "is safe too"))
        + f". Measured: {evidence}.",
    )


def check_convoy(answer, frame: pd.DataFrame) -> Verdict:
    """02: which strategy makes workers queue behind each other's row locks?
    (from claim_contention)"""
    if answer is None:
        return unanswered("look at the middle panel: who spends time waiting on row locks?")
    waits = frame.groupby("claim")["lock_wait_seconds"].sum()
    truth = str(waits.idxmax())
    chosen = typed_name(answer)
    if chosen == truth:
        return Verdict(
            True,
            f"{truth} waited {waits[truth]:.3g} s on row locks in these runs: every worker "
            "blocks on the same oldest row until its holder commits, one after another.",
        )
    if chosen not in waits.index:
        return Verdict(
            False,
            f"{answer!r} is not a strategy of this experiment; choose among "
            f"{', '.join(waits.index)}.",
        )
    return Verdict(
        False,
        f"{chosen} waited {waits[chosen]:.3g} s on row locks; one strategy "
        "waited far longer. A blocking lock makes the others wait, a skipped one does not.",
    )


def recovery_mistakes(
    *,
    ttl: float,
    heartbeat_interval: float,
    watcher_interval: float | None,
    poll_interval: float,
    idle_pollers: int = 1,
) -> dict[str, float]:
    """04 exercise 1: what the usual slips of L - h/2 + W/2 + P/(k+1) give, by name."""
    lease, half_w = ttl - heartbeat_interval / 2, (watcher_interval or 0.0) / 2
    poll = poll_interval / (idle_pollers + 1)
    out = {
        "the formula without the wait for a poller: after the watcher, an idle worker still has "
        f"to poll, P/(k+1) = {poll:.3g} s later": lease + half_w,
        f"the formula with P instead of P/(k+1): a poll comes on average {poll:.3g} s later, "
        "not a whole poll interval": lease + half_w + poll_interval,
        "the formula with L - h instead of L - h/2: the crash falls on average half a heartbeat "
        "interval after the last renewal": ttl - heartbeat_interval + half_w + poll,
        "the formula without the heartbeat term: the lease was last renewed on average h/2 "
        "before the crash, so L - h/2 is left": ttl + half_w + poll,
    }
    if idle_pollers > 1:
        out[
            f"the formula with P/2 for {idle_pollers} idle pollers: the first of k pollers comes "
            f"after P/(k+1) = {poll:.3g} s"
        ] = lease + half_w + poll_interval / 2
    if watcher_interval is not None:
        out[
            "the formula with W instead of W/2: the watcher's next scan comes on average half "
            "an interval later"
        ] = lease + 2 * half_w + poll
        out[
            "the formula without the watcher's wait: an expired lease waits for the next scan, "
            f"W/2 = {half_w:g} s on average"
        ] = lease + poll
    return out


def check_recovery_prediction(
    answer,
    *,
    ttl: float,
    heartbeat_interval: float,
    watcher_interval: float | None,
    poll_interval: float,
    idle_pollers: int = 1,
) -> Verdict:
    """04: predict the mean recovery latency. Within 2% of the formula and less than half the gap
    to each common slip (recovery_mistakes), which is named when it is made."""
    from sim.theory.closed_forms import recovery_latency_mean

    if answer is None:
        return unanswered(
            "lease left at the crash, plus the wait for the watcher, plus the wait for a poller."
        )
    question: dict[str, Any] = dict(
        ttl=ttl,
        heartbeat_interval=heartbeat_interval,
        poll_interval=poll_interval,
        watcher_interval=watcher_interval,
        idle_pollers=idle_pollers,
    )
    truth, mistakes = recovery_latency_mean(**question), recovery_mistakes(**question)
    within = tolerance(truth, mistakes, 0.02 * truth)
    value = number(answer)
    if value is None:
        return Verdict(
            False, f"Give the mean recovery latency in seconds, e.g. 40; {answer!r} is not one."
        )
    parts = f"L - h/2 = {ttl - heartbeat_interval / 2:g} s"
    if watcher_interval is not None:
        parts += f", + W/2 = {watcher_interval / 2:g} s"
    parts += f", + P/(k+1) = {poll_interval / (idle_pollers + 1):.3g} s"
    if accepts(value, truth, mistakes, within):
        return Verdict(True, f"The formula gives {truth:.3g} s ({parts}).")
    named = named_mistake(value, mistakes, within)
    return Verdict(
        False,
        (named.strip() + " " if named else "")
        + "Add the three waits: the lease still has about L - h/2 to run, the watcher ticks "
        "on average half an interval later, then an idle worker polls.",
    )


def check_watcher_interval(
    answer, *, target: float, ttl: float, heartbeat_interval: float, poll_interval: float
) -> Verdict:
    """04: the longest watcher interval whose predicted mean recovery stays within `target` seconds.
    Within a second below the exact limit (whole seconds are fine) and less than half the gap to
    each common slip, which is named; longer intervals cost fewer statements."""
    from sim.theory.closed_forms import recovery_latency_mean, watcher_load

    if answer is None:
        return unanswered("solve L - h/2 + W/2 + P/2 <= target for W.")
    value = number(answer)
    fixed = recovery_latency_mean(
        ttl=ttl, heartbeat_interval=heartbeat_interval, poll_interval=poll_interval
    )
    limit = 2 * (target - fixed)
    if limit <= 0:  # even an instant watcher misses the target: the right answer is "none"
        none = isinstance(answer, str) and answer.strip().lower() in (
            "none",
            "no",
            "never",
            "impossible",
        )
        return Verdict(
            none,
            f"No watcher interval can reach a {target:g} s target: without any watcher wait the "
            f"recovery already takes {fixed:.3g} s. Shorten the TTL instead (answer 'none').",
        )
    if value is None or not 0 < value < math.inf:
        return Verdict(
            False, f"Give a watcher interval in seconds, e.g. 20; {answer!r} is not one."
        )
    mistakes = {
        "what P instead of P/2 gives: one idle poller comes on average half a poll interval "
        "after the scan": 2 * (target - fixed - poll_interval / 2),
        "what L - h instead of L - h/2 gives: half a heartbeat interval passed, on average, "
        "between the last renewal and the crash": limit + heartbeat_interval,
        "what L instead of L - h/2 gives: the lease was last renewed on average h/2 before the "
        "crash, so less than the whole TTL is left": limit - heartbeat_interval,
        "what W instead of W/2 gives: the watcher's next scan comes on average half an interval "
        "after the lease runs out": target - fixed,
    }
    mistakes = {why: x for why, x in mistakes.items() if x > 0}
    within = tolerance(limit, mistakes, 1.0)
    named = named_mistake(value, mistakes, within)
    predicted = recovery_latency_mean(
        ttl=ttl,
        heartbeat_interval=heartbeat_interval,
        poll_interval=poll_interval,
        watcher_interval=value,
    )
    if predicted > target:
        return Verdict(
            False,
            f"W = {value:g} s gives {predicted:.3g} s on average, over the {target:g} s target."
            + named,
        )
    if not accepts(value, limit, mistakes, within):
        return Verdict(
            False,
            f"W = {value:g} s meets the target ({predicted:.3g} s), but a longer interval would "
            f"too, for fewer watcher statements ({watcher_load(watcher_interval=value):.3g}/s "
            "now)." + named,
        )
    return Verdict(
        True,
        f"W = {value:g} s gives {predicted:.3g} s on average, within {target:g} s, for "
        f"{watcher_load(watcher_interval=value):.3g} watcher statements per second.",
    )


def redelivery_puzzle(db: Backend | None = None) -> tuple[pd.Series, pd.DataFrame]:
    """05's puzzle: evt-7 is delivered three times. The first delivery's consumer crashes right
    after its marker insert; then two deliveries arrive at once (B inserts its marker first, C's
    insert waits on it). Returns (ledger rows per event, the transcript)."""
    script = Script(db)
    first = Delivery(script, "A", "evt-7")
    first.start()
    first.crash()
    b, c = Delivery(script, "B", "evt-7", attempt=2), Delivery(script, "C", "evt-7", attempt=3)
    script.at(1.0)
    b.start()
    c.start()
    b.finish()
    c.finish()
    counts = ledger_counts(script)
    transcript = script.transcript
    script.close()
    return counts, transcript


def check_ledger_rows(answer) -> Verdict:
    """05: how many ledger rows does evt-7 end with? (computed by redelivery_puzzle())"""
    if answer is None:
        return unanswered("what happens to a marker whose transaction never commits?")
    counts, _ = redelivery_puzzle()
    truth = int(counts.get("evt-7", 0))
    value = number(answer)
    if value is not None and value == truth:
        return Verdict(
            True,
            f"{truth} ledger row: A's crash rolled its marker back, so the event stayed eligible; "
            "B's marker and effect committed together; C waited on B's uncommitted marker, "
            "then found it and skipped the effect.",
        )
    return Verdict(
        False,
        "Follow the marker: the crash rolls back everything A's transaction did; of B and C, "
        "the second insert waits for the first transaction to end, then sees its marker.",
    )


def check_retention(
    answer, *, window: float = 60.0, purge_every: float = 5.0, events: int = 200
) -> Verdict:
    """05: the shortest retention that lets no duplicate through, whatever the sample: `window`.

    The purge deletes markers older than the retention, so a retention >= window keeps every
    marker until its last redelivery; a shorter one loses the latest redeliveries, even when a
    sample of `events` happens to have none that late (the simulation is shown as evidence).
    Retentions more than one purge interval above the window are correct but not the shortest.
    """
    if answer is None:
        return unanswered("a redelivery can come as late as the redelivery window allows.")
    value = number(answer)
    if value is None or value < 0 or math.isinf(value):
        return Verdict(False, "Give a retention in seconds.")
    frame = retention_experiment(value, window=window, purge_every=purge_every, events=events)
    dupes = int(frame["duplicate"].sum())
    if dupes:
        late = float(frame.loc[frame["duplicate"], "delay"].min())
        return Verdict(
            False,
            f"With {value:g} s of retention, {dupes} of {events} redeliveries found no marker "
            f"and were applied again (the earliest came {late:.3g} s after the first delivery).",
        )
    if value < window:
        return Verdict(
            False,
            f"No duplicate in this sample of {events} events, but only because none came late "
            f"enough: a redelivery may arrive up to {window:g} s after the first delivery, and "
            f"with {value:g} s of retention its marker may already be purged. Test against the "
            "worst case, not a sample.",
        )
    if value > window + purge_every:
        return Verdict(
            False,
            f"No duplicate, but {value:g} s keeps markers longer than the {window:g} s "
            "redelivery window needs: the table only grows. Try shorter.",
        )
    return Verdict(
        True,
        f"No duplicate in {events} events with {value:g} s of retention, and none possible: "
        f"every marker outlives the latest redelivery ({window:g} s). Keep dedup state at least "
        "as long as redeliveries may come.",
    )


def _infeasible_because(row: pd.DataFrame, advice) -> str:
    """Why the advisor left a candidate (a one-row frame of its table) out: the rules it fails
    (advisor.infeasible_reasons), in words."""
    from sim.advice.advisor import infeasible_reasons

    return "; ".join(infeasible_reasons(row.iloc[0], advice)) or "the advisor marked it infeasible"


def check_smallest_ttl(
    answer, advice, *, heartbeat_interval: float | None, watcher_interval: float
) -> Verdict:
    """06: the smallest feasible TTL in advice.candidates for this heartbeat and watcher interval.

    Feasible is the advisor's rule, not only the target: the false expiry's 95% upper bound within
    target / margin AND (with a heartbeat) TTL >= heartbeats_per_ttl x (interval + statement
    latency). A wrong answer on the ladder is told which rule its row breaks.
    """
    if answer is None:
        return unanswered(
            "filter advice.candidates on heartbeat_interval, watcher_interval and feasible."
        )
    table = advice.candidates
    hb = (
        table["heartbeat_interval"].isna()
        if heartbeat_interval is None
        else table["heartbeat_interval"] == heartbeat_interval
    )
    mine = table[hb & (table["watcher_interval"] == watcher_interval)]
    rows = mine[mine["feasible"]]
    if rows.empty:
        never = isinstance(answer, str) and answer.strip().lower() in ("none", "never")
        return Verdict(
            never or answer == math.inf,
            "No TTL is feasible for that heartbeat and watcher interval.",
        )
    truth = float(rows["ttl"].min())
    value = number(answer)
    best = rows.loc[rows["ttl"].idxmin()]
    if value is not None and value == truth:
        return Verdict(
            True,
            f"TTL {truth:g} s: predicted false expiry {percent(best['predicted_false_expiry'])} "
            f"per job, recovery {seconds(best['predicted_recovery_mean'])}.",
        )
    same = mine[mine["ttl"] == value] if value is not None else mine.iloc[0:0]
    if len(same) and not bool(same["feasible"].iloc[0]):
        return Verdict(
            False,
            f"TTL {value:g} s is on the ladder but not feasible: "
            f"{_infeasible_because(same.iloc[[0]], advice)}. Keep only the rows with feasible == "
            "True.",
        )
    if len(same):
        return Verdict(
            False, f"TTL {value:g} s is feasible, but a smaller TTL on the ladder is too."
        )
    return Verdict(
        False,
        "Keep only the feasible rows for that heartbeat and watcher interval, then take the "
        "smallest ttl.",
    )


def check_fastest_peer(answer, frame: pd.DataFrame) -> Verdict:
    """07: which peer claims a crashed job again soonest? (from compare_peers)"""
    if answer is None:
        return unanswered("compare the bars; a missing bar means never.")
    means = frame.set_index("label")["recovery_latency_mean_mean"]
    truth = str(means.idxmin())
    names = {str(x).lower(): str(x) for x in frame["label"]} | {
        str(x).lower(): str(y) for x, y in zip(frame["peer"], frame["label"], strict=True)
    }
    chosen = names.get(str(answer).strip().lower())
    if chosen == truth:
        return Verdict(
            True,
            f"{truth}: {seconds(means[truth])} on average. Its lease is short and nothing "
            "else has to happen before the next claim.",
        )
    if chosen is None:
        return Verdict(False, f"{answer!r} is not one of {', '.join(frame['label'])}.")
    mean = means.get(chosen, np.nan)
    if not np.isfinite(mean):
        failed = (
            frame.set_index("label")["detection_latency_mean_mean"].get(chosen, np.nan)
            if "detection_latency_mean_mean" in frame
            else np.nan
        )
        why = (
            f" (it marks the job failed, after {seconds(failed)} on average, and leaves the retry "
            "to you)"
            if np.isfinite(failed)
            else ""
        )
        return Verdict(
            False,
            f"{chosen} never claimed a crashed job again in these runs{why}, so it has no bar; "
            "look for the shortest bar.",
        )
    return Verdict(
        False,
        f"{chosen} claims a crashed job again after {seconds(mean)} on average; look for the "
        "shortest bar.",
    )


def check_duplicating_peers(answer, frame: pd.DataFrame) -> Verdict:
    """07: which peers ran some job twice because a live owner's lease expired? (set of labels)"""
    if answer is None:
        return unanswered("look at the 'jobs run twice' column.")
    given = as_set(answer)
    if given is None:
        return Verdict(False, f"Give a set of peer names; {answer!r} is not one.")
    names = {str(x).lower(): str(x) for x in frame["label"]} | {
        str(x).lower(): str(y) for x, y in zip(frame["peer"], frame["label"], strict=True)
    }
    chosen = {names.get(str(a).strip().lower(), str(a)) for a in given}
    twice = frame.set_index("label")["double_processed_jobs_mean"]
    truth = set(twice[twice > 0].index)
    if chosen == truth:
        return Verdict(
            True,
            f"{', '.join(sorted(truth)) or 'none'}: their lease ran out while a slow job "
            "was still running, and nothing renewed it.",
        )
    return Verdict(
        False, "Read the 'jobs run twice' column: any peer with a mean above 0 belongs in the set."
    )


def check_fenced_completion(answer: str | None, *, dsn: str | None = None) -> Verdict:
    """09: the reader's complete_fenced must refuse the zombie's completion
    under gc-pause-zombie."""
    if answer is None or not str(answer).strip():
        return unanswered(
            "UPDATE payment_jobs SET status = 'Completed', completed_at = %(now)s WHERE id = "
            "%(id)s AND ... RETURNING id; which two facts does only the current lease holder "
            "know?"
        )
    from sim.teaching.queue_lab import fenced_completion_verdict

    return Verdict(*fenced_completion_verdict(str(answer), dsn=dsn))


def check_watcher_multiples(answer, *, heartbeat_interval: float, candidates) -> Verdict:
    """11: which of `candidates` watcher intervals are multiples of the heartbeat interval (and
    so lengthen repeat recoveries, sim.teaching.rules_of_thumb)? A set of seconds."""
    truth = {
        float(w)
        for w in candidates
        if abs(w / heartbeat_interval - round(w / heartbeat_interval)) < 1e-9
    }
    if answer is None:
        return unanswered("divide each interval by the heartbeat interval.")
    try:
        chosen = {
            float(w)
            for w in (answer if isinstance(answer, set | list | tuple | frozenset) else [answer])
        }
    except (TypeError, ValueError):
        return Verdict(False, f"{answer!r} is not a set of numbers of seconds.")
    if chosen == truth:
        return Verdict(
            True,
            f"{', '.join(f'{w:g}' for w in sorted(truth))} s are whole multiples of "
            f"{heartbeat_interval:g} s: a job's second owner would renew in step with the "
            "watcher, and its repeat recovery would wait about half a heartbeat interval longer "
            "on average.",
        )
    return Verdict(
        False,
        set_mismatch(
            (truth - chosen, f"s also divide by {heartbeat_interval:g} s"),
            (chosen - truth, "s do not"),
        )
        + ".",
    )
