"""Notebook 03's exercises: the shortest TTL that survives a worst-placed pause (simulated), and,
without a heartbeat, the smallest whole-second TTL that keeps false expiries under a target share
(judged on the processing tail and on runs of several seeds); the common slips are named."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from sim.support.in_words import count, percent
from sim.teaching.answers import Verdict, number, unanswered
from sim.teaching.lessons import one_job

if TYPE_CHECKING:
    from sim.scenario.settings import Scenario


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
        return unanswered(
            "the pause can start just before a heartbeat, when the lease is already one interval "
            "old."
        )
    value = number(answer)
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


def ttl_for_quantile(
    target: float, scenario: str = "no-heartbeat-long-jobs"
) -> tuple[float, Scenario]:
    """03: the smallest whole-second TTL with which at most `target` of a scenario's leases outlast
    it without a heartbeat (processing + PSP call + its statements;
    sim.theory.closed_forms.sum_quantile)."""
    from sim.scenario.settings import preset
    from sim.theory.closed_forms import sum_quantile

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
    from sim.theory.closed_forms import sum_quantile

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
    leases of no-heartbeat-long-jobs expire under a live owner. Judged on the tail
    (sim.theory.closed_forms) and on runs of several seeds at that TTL, which must not contradict
    it; a TTL longer than needed is turned down for what it costs a crashed job. Only the smallest
    whole TTL is right; the common slips (ttl_quantile_mistakes) are named when made."""
    from sim import runner
    from sim.theory.closed_forms import sum_survival
    from sim.theory.stats import wilson_interval

    if answer is None:
        return unanswered(
            "the TTL must outlast all but a fraction `target` of the jobs, PSP call included: "
            "a quantile of the processing time, not the longest job you saw."
        )
    value = number(answer)
    if value is None:
        return Verdict(False, f"Give a TTL in whole seconds, e.g. 60; {answer!r} is not a number.")
    if math.isinf(value):
        return Verdict(
            False,
            "An infinite TTL is no lease at all but a lock: no false expiry ever, and a crashed "
            "worker's job is never claimed again (notebook 01). Give a finite TTL in whole "
            "seconds.",
        )
    if value <= 0:
        return Verdict(
            False,
            f"A TTL must be longer than zero: {value:g} s would end every lease as it begins. Give "
            "a TTL in whole seconds.",
        )
    if not value.is_integer():
        return Verdict(False, f"Give the TTL in whole seconds; {value:g} s is not a whole number.")
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
        ratio = share / target
        times_over = (
            f", about {f'{ratio:,.0f}' if ratio >= 10 else f'{ratio:.2g}'} times the target"
            if ratio > 1.5
            else ""
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
