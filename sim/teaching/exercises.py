"""The notebooks' "try it" exercises: every `check_*` tells the reader whether an answer is right,
as a `Verdict`; with the fixtures some of them need."""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from sim.db.base import Backend
from sim.errors import ConfigError
from sim.teaching.by_hand import Delivery, Script, ledger_counts
from sim.teaching.lessons import STRATEGIES, one_job, retention_experiment
from sim.teaching.notebook import seconds
from sim.wording import count, percent

if TYPE_CHECKING:
    from sim.scenario import Scenario


@dataclass
class Verdict:
    """The answer to a "try it" exercise: right or not, and why. Shows as Markdown in a notebook."""

    ok: bool | None  # None: not answered yet
    message: str

    def __bool__(self) -> bool:
        return bool(self.ok)

    def _repr_markdown_(self) -> str:
        mark = {True: "**Right.**", False: "**Not quite.**", None: "**Not answered yet.**"}[self.ok]
        return f"{mark} {self.message}"

    def __repr__(self) -> str:
        mark = {True: "Right.", False: "Not quite.", None: "Not answered yet."}[self.ok]
        return f"{mark} {self.message}"


def _unanswered(hint: str) -> Verdict:
    return Verdict(None, f"Replace `None` with your answer and run the cell again. Hint: {hint}")


def _set_mismatch(*parts: tuple[set, str]) -> str:
    """'a, b let two workers win; c is safe too': each non-empty set, sorted, with its remark."""
    return "; ".join(
        f"{', '.join(f'{x:g}' if isinstance(x, float) else str(x) for x in sorted(items))} {remark}"
        for items, remark in parts
        if items
    )


def _number(answer) -> float | None:
    try:
        value = float(answer)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) or math.isinf(value) else None


def check_lease_end(answer, run) -> Verdict:
    """01: when does the crashed owner's lease run out in the database? (within half a second)"""
    hint = "the last renewal before the crash set lease_until; the crash does not change it."
    if answer is None:
        return _unanswered(hint)
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
    value = _number(answer)
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
        return _unanswered(
            "what would have to happen for another worker to take a lock nobody releases?"
        )
    recovered = run.recoveries["latency"].notna().any()
    never = (
        isinstance(answer, str) and answer.strip().lower() in ("never", "none", "inf", "infinity")
    ) or ((number := _number(answer)) is not None and math.isinf(number))
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
    from sim.scenario import preset

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


def _strategy(answer) -> str:
    """A claim strategy as typed by a reader: ' Skip-Locked' -> 'skip_locked'."""
    return "_".join(str(answer).strip().lower().replace("-", " ").split())


def check_safe_claims(answer) -> Verdict:
    """02: which claim strategies never let two workers hold one job? (a set of names)"""
    if answer is None:
        return _unanswered(f"choose among {', '.join(STRATEGIES)}.")
    if isinstance(answer, str):
        answer = {answer}
    chosen = {_strategy(a) for a in answer}
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
        _set_mismatch((chosen - safe, "let two workers win"), (safe - chosen, "is safe too"))
        + f". Measured: {evidence}.",
    )


def check_convoy(answer, frame: pd.DataFrame) -> Verdict:
    """02: which strategy makes workers queue behind each other's row locks?
    (from claim_contention)"""
    if answer is None:
        return _unanswered("look at the middle panel: who spends time waiting on row locks?")
    waits = frame.groupby("claim")["lock_wait_seconds"].sum()
    truth = str(waits.idxmax())
    chosen = _strategy(answer)
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


def pause_survival(ttl: float, *, heartbeat_interval: float = 5.0, pause: float = 12.0) -> bool:
    """Does a lease survive a stop-the-world pause of `pause` s that starts at the worst moment
    (just before a heartbeat is sent, so the last renewal is a full interval old)? Simulated."""
    from sim import runner

    probe = runner.run(
        one_job(
            ttl=ttl,
            heartbeat_interval=heartbeat_interval,
            work=1000.0,
            workers=1,
            horizon=60.0,
            name="pause-probe",
        )
    )
    beats = probe.events.loc[probe.events["kind"] == "heartbeat", "t"].to_numpy(float)
    wake = (beats[1] if len(beats) > 1 else beats[0]) - 0.002  # the heartbeat statement takes 2 ms
    run = runner.run(
        one_job(
            ttl=ttl,
            heartbeat_interval=heartbeat_interval,
            work=1000.0,
            workers=1,
            pause=(wake - 0.001, pause),
            horizon=wake + pause + ttl + 10.0,
            name="pause-probe",
        )
    )
    return int(run.summary["false_expiries"]) == 0


def check_pause_ttl(answer, *, heartbeat_interval: float = 5.0, pause: float = 12.0) -> Verdict:
    """03: the smallest whole-second TTL whose lease survives the worst-placed pause."""
    if answer is None:
        return _unanswered(
            "the pause can start just before a heartbeat, when the lease is already one interval "
            "old."
        )
    value = _number(answer)
    if value is None or isinstance(answer, bool):
        return Verdict(
            False,
            f"Give the TTL as a whole number of seconds, e.g. 20; {answer!r} is not a number.",
        )
    if not value.is_integer():
        return Verdict(
            False,
            f"The exercise asks for whole seconds, and {value:g} s is not a whole number: give "
            "the shortest TTL, in whole seconds, with which the lease never lapses.",
        )
    if value <= heartbeat_interval:
        return Verdict(
            False,
            f"The TTL must at least exceed the heartbeat interval ({heartbeat_interval:g} s), "
            "or the lease lapses between two renewals even without a pause.",
        )
    survives = pause_survival(value, heartbeat_interval=heartbeat_interval, pause=pause)
    if not survives:
        return Verdict(
            False,
            f"With TTL {value:g} s the lease expired during the {pause:g} s pause: "
            f"it was already about {heartbeat_interval:g} s old when the pause began.",
        )
    smaller = pause_survival(value - 1, heartbeat_interval=heartbeat_interval, pause=pause)
    if smaller:
        return Verdict(
            False,
            f"TTL {value:g} s survives, but so does {value - 1:g} s: a longer TTL than needed "
            "delays recovery after a real crash. Try smaller.",
        )
    return Verdict(
        True,
        f"TTL {value:g} s survives and {value - 1:g} s does not: the TTL must exceed the "
        f"longest stall ({pause:g} s) plus one heartbeat interval ({heartbeat_interval:g} s).",
    )


def _tolerance(truth: float, mistakes: dict[str, float], cap: float) -> float:
    """How far from `truth` an answer may be: at most `cap`, and less than half the gap to the
    nearest common mistake, so that no mistake is ever accepted."""
    gaps = [abs(x - truth) for x in mistakes.values() if abs(x - truth) > 1e-9]
    return min([cap] + [gap / 2 for gap in gaps])


def _named_mistake(value: float | None, mistakes: dict[str, float], tolerance: float) -> str:
    """The common mistakes `value` matches (within `tolerance`), as a sentence;
    '' when none does."""
    if value is None:
        return ""
    matches = [why for why, x in mistakes.items() if abs(value - x) <= tolerance]
    return f" {value:g} s is {'; or '.join(matches)}." if matches else ""


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
    from sim.analytic import recovery_latency_mean

    if answer is None:
        return _unanswered(
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
    tolerance = _tolerance(truth, mistakes, 0.02 * truth)
    value = _number(answer)
    parts = f"L - h/2 = {ttl - heartbeat_interval / 2:g} s"
    if watcher_interval is not None:
        parts += f", + W/2 = {watcher_interval / 2:g} s"
    parts += f", + P/(k+1) = {poll_interval / (idle_pollers + 1):.3g} s"
    if value is not None and abs(value - truth) <= tolerance:
        return Verdict(True, f"The formula gives {truth:.3g} s ({parts}).")
    named = _named_mistake(value, mistakes, tolerance)
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
    from sim.analytic import recovery_latency_mean, watcher_load

    if answer is None:
        return _unanswered("solve L - h/2 + W/2 + P/2 <= target for W.")
    value = _number(answer)
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
    if value is None or value <= 0:
        return Verdict(False, "Give a watcher interval in seconds.")
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
    tolerance = _tolerance(limit, mistakes, 1.0)
    named = _named_mistake(value, mistakes, tolerance)
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
    if value < limit - tolerance:
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
        return _unanswered("what happens to a marker whose transaction never commits?")
    counts, _ = redelivery_puzzle()
    truth = int(counts.get("evt-7", 0))
    value = _number(answer)
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
        return _unanswered("a redelivery can come as late as the redelivery window allows.")
    value = _number(answer)
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
    from sim.advisor import infeasible_reasons

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
        return _unanswered(
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
    value = _number(answer)
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
        return _unanswered("compare the bars; a missing bar means never.")
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
        return _unanswered("look at the 'jobs run twice' column.")
    if isinstance(answer, str):
        answer = {answer}
    names = {str(x).lower(): str(x) for x in frame["label"]} | {
        str(x).lower(): str(y) for x, y in zip(frame["peer"], frame["label"], strict=True)
    }
    chosen = {names.get(str(a).strip().lower(), str(a)) for a in answer}
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
        return _unanswered(
            "UPDATE payment_jobs SET status = 'Completed', completed_at = %(now)s WHERE id = "
            "%(id)s AND ... RETURNING id; which two facts does only the current lease holder "
            "know?"
        )
    from sim.teaching.queue_lab import fenced_completion_verdict

    return Verdict(*fenced_completion_verdict(str(answer), dsn=dsn))


def ttl_for_quantile(
    target: float, scenario: str = "no-heartbeat-long-jobs"
) -> tuple[float, Scenario]:
    """03: the smallest whole-second TTL with which at most `target` of a scenario's leases outlast
    it without a heartbeat (processing + PSP call + its statements; sim.analytic.sum_quantile)."""
    from sim.analytic import sum_quantile
    from sim.scenario import preset

    s = preset(scenario)
    w = s.workload
    return float(
        math.ceil(sum_quantile(w.processing, w.psp_call, 1 - target, _job_statements(w)))
    ), s


def _job_statements(workload) -> float:
    """Claim to completion: the time of the job's own statements (at the median latency)."""
    return 4 * workload.statement_latency.quantile(0.5)


def ttl_quantile_mistakes(target: float, scenario) -> dict[str, float]:
    """03 exercise 2: the TTLs (exact seconds) the usual slips give, by name."""
    from sim.analytic import sum_quantile

    w = scenario.workload
    statements = _job_statements(w)
    exact = sum_quantile(w.processing, w.psp_call, 1 - target, statements)
    alone = w.processing.quantile(1 - target)
    psp = w.psp_call.quantile(1 - target)
    out = {
        (
            f"the right quantile, {exact:.5g} s, rounded down: a TTL that must outlast it rounds up"
        ): exact,
        f"the quantile of the processing time alone ({alone:.4g} s): the PSP call runs inside "
        "the lease too": alone,
        f"each part's own quantile added ({alone:.4g} s + {psp:.3g} s): a slow job and a slow "
        "PSP call rarely come together, so the sum overstates the tail": alone + psp,
    }
    for q, label in ((0.99, "99th"), (0.999, "99.9th")):
        if q < 1 - target:
            out[
                f"the {label} percentile, 1 job in {1 / (1 - q):,.0f}, not the target's 1 in "
                f"{1 / target:,.0f}"
            ] = sum_quantile(w.processing, w.psp_call, q, statements)
    out[
        f"the quantile for {percent(target / 100)}: the target is a share, {target:g}, not a "
        "percentage"
    ] = sum_quantile(w.processing, w.psp_call, 1 - target / 100, statements)
    return out


def _whole_second_mistake(value: float, truth: float, mistakes: dict[str, float]) -> str:
    """The slips a whole-second TTL matches (their values rounded either way), as a sentence."""
    if value == truth:
        return ""
    matches = [why for why, x in mistakes.items() if value in (math.floor(x), math.ceil(x))]
    return f" {value:g} s is {'; or '.join(matches)}." if matches else ""


def check_ttl_quantile(answer, *, target: float = 1e-4, seeds=(1, 2, 3, 4, 5)) -> Verdict:
    """03: the smallest whole-second TTL with which, without a heartbeat, at most `target` of the
    leases of no-heartbeat-long-jobs expire under a live owner. Judged on the tail (sim.analytic)
    and on runs of several seeds at that TTL, which must not contradict it; a TTL longer than
    needed is turned down for what it costs a crashed job. Only the smallest whole TTL
    is right; the common slips (ttl_quantile_mistakes) are named when made."""
    from sim import runner
    from sim.analytic import sum_survival
    from sim.stats import wilson_interval

    if answer is None:
        return _unanswered(
            "the TTL must outlast all but a fraction `target` of the jobs, PSP call included: "
            "a quantile of the processing time, not the longest job you saw."
        )
    value = _number(answer)
    if value is None or not math.isfinite(value) or value <= 0 or not float(value).is_integer():
        return Verdict(
            False, "Give a TTL in whole seconds; no finite TTL is wrong, and infinity is a lock."
        )
    truth, scenario = ttl_for_quantile(target)
    share = sum_survival(
        scenario.workload.processing,
        scenario.workload.psp_call,
        value,
        _job_statements(scenario.workload),
    )
    at_value = scenario.with_overrides({"policy.lease_ttl": value})
    runs = [runner.run(at_value, seed=s) for s in seeds]
    leases = sum(int(r.summary["leases"]) for r in runs)
    lapsed = sum(int(r.summary["false_expiries"]) for r in runs)
    longest = [float((r.leases["released_at"] - r.leases["start"]).max()) for r in runs]
    low, high = wilson_interval(lapsed, leases, 0.95)
    seen = (
        f"On seed{'s' if len(seeds) > 1 else ''} {', '.join(map(str, seeds))} at TTL {value:g} s: "
        f"{count(lapsed, 'false expiry', 'false expiries')} in {leases} leases (95% interval "
        f"{percent(low)} to {percent(high)}"
        + (
            f": {leases} leases cannot show a rate of {percent(target)}, the tail can"
            if high > target
            else ""
        )
        + "); the longest job per seed took "
        f"{', '.join(f'{x:.0f}' for x in longest)} s"
        + (", a different maximum every time." if len(set(longest)) == len(longest) > 1 else ".")
    )
    named = _whole_second_mistake(value, truth, ttl_quantile_mistakes(target, scenario))
    if share > target:
        digits = 2  # enough digits that the share and the target print differently
        while percent(share, digits) == percent(target, digits) and digits < 6:
            digits += 1
        times_over = (
            f", about {share / target:.2g} times the target" if share > 1.5 * target else ""
        )
        return Verdict(
            False,
            f"At TTL {value:g} s, {percent(share, digits)} of jobs outlast the lease, more than "
            f"the target of {percent(target, digits)}{times_over}.{named} {seen}",
        )
    if low > target:
        return Verdict(
            False,
            f"The tail says {percent(share)} of jobs outlast a {value:g} s lease, under the target "
            f"of {percent(target)}, but the runs contradict it: even the low end of their interval "
            f"is above the target. {seen}",
        )
    if value > truth:
        return Verdict(
            False,
            f"That meets the target ({percent(share)} of jobs outlast it), but a TTL of "
            f"{truth:g} s already does: each crashed job would wait {value - truth:g} s longer "
            f"before anyone may retry it.{named} {seen}",
        )
    return Verdict(
        True,
        f"At TTL {value:g} s, {percent(share)} of jobs outlast the lease (target "
        f"{percent(target)}; the smallest whole TTL that meets it is {truth:g} s). {seen} No "
        "finite TTL makes a false expiry impossible for an unbounded distribution: you choose "
        "how rare, and a crash then waits out the whole TTL.",
    )


def check_watcher_multiples(answer, *, heartbeat_interval: float, candidates) -> Verdict:
    """11: which of `candidates` watcher intervals are multiples of the heartbeat interval (and
    so lengthen repeat recoveries, sim.teaching.rules_of_thumb)? A set of seconds."""
    truth = {
        float(w)
        for w in candidates
        if abs(w / heartbeat_interval - round(w / heartbeat_interval)) < 1e-9
    }
    if answer is None:
        return _unanswered("divide each interval by the heartbeat interval.")
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
        _set_mismatch(
            (truth - chosen, f"s also divide by {heartbeat_interval:g} s"),
            (chosen - truth, "s do not"),
        )
        + ".",
    )
