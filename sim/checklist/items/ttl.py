"""Item 2: the lease TTL exceeds the longest expected processing (with a heartbeat: the longest
stall between renewals). Processing times (finished work observed, cut-off work censored), leases
lost under a live owner, the pauses and partitions seen, against the TTL. Item 3 (heartbeat) reads
the same numbers."""

from __future__ import annotations

import numpy as np

from sim.checklist.evidence import Evidence, total
from sim.checklist.processing_times import ProcessingTimes, processing_times
from sim.checklist.verdicts import FAIL, PASS, RISK, UNTESTED, Verdict
from sim.support.in_words import count, duration, percent
from sim.theory.stats import wilson_interval

KEY = "ttl"
TITLE = (
    "2. The lease TTL really exceeds the longest expected processing (with a heartbeat: the "
    "longest stall between renewals)"
)


def leased_jobs(run) -> int:
    return int(run.leases["job"].nunique())


def double_processed(run) -> int:
    """Jobs whose lease expired under a live owner and that another lease then took."""
    leases = run.leases
    per_job = leases.groupby("job").size()
    expired = leases.loc[leases["false_expiry"], "job"].unique()
    return int(sum(per_job.get(j, 0) > 1 for j in expired))


def renewal_count(run) -> int:
    """Heartbeats that renewed a lease: from the log, or (heartbeat records off) the heartbeat
    statements the database ran minus those it rejected."""
    kinds = run.events["kind"]
    if run.scenario.record_heartbeats:
        return int((kinds == "heartbeat").sum())
    return int(run.statement_counts.get("heartbeat", 0)) - int(
        (kinds == "heartbeat_rejected").sum()
    )


def stall_durations(runs) -> np.ndarray:
    """Durations of every pause and worker-DB partition that happened in the runs (seconds)."""
    values: list[float] = []
    for r in runs:
        events = r.events
        starts = events[events["kind"].isin(["pause_start", "partition_start"])]
        values.extend(float(d) for d in starts["detail"] if d is not None and np.isfinite(float(d)))
    return np.asarray(values, dtype=float)


def measures(evidence: Evidence) -> tuple[dict, ProcessingTimes]:
    """The TTL against the processing times (finished work observed, cut-off work censored:
    sim.checklist.processing_times), and what the leases show; with the times themselves."""
    runs, policy = evidence.runs, evidence.policy
    times = processing_times(runs)
    p999 = times.quantile(0.999)
    jobs = sum(leased_jobs(r) for r in runs)
    twice = sum(double_processed(r) for r in runs)
    interval = policy.heartbeat_interval if policy.heartbeat else np.inf
    m = {
        "lease_ttl": policy.lease_ttl,
        "p999_processing": np.nan if p999 is None else p999,
        "max_processing": times.longest,
        "longest_finished": bool(len(times)) and times.longest in times.times[times.finished],
        "finished_jobs": times.n_finished,
        "cut_off_jobs": times.n_cut,
        "renewals": sum(renewal_count(r) for r in runs),
        "jobs_over_interval": int((times.times > interval).sum()),
        "over_ttl_share": times.share_longer(policy.lease_ttl),
        "false_expiries": total(runs, "false_expiries"),
        "leases": total(runs, "leases"),
        "jobs": jobs,
        "double_processed_jobs": twice,
        "double_processed_share": twice / jobs if jobs else np.nan,
    }
    return m, times


def longest_words(m) -> str:
    """'took 30 s', or 'ran at least 30 s' when the longest work seen was cut off."""
    words = duration(m["max_processing"])
    return f"took {words}" if m["longest_finished"] else f"ran at least {words}"


def p999_words(m) -> str:
    """'p99.9 processing 12 s (max 30 s, 47 jobs finished)', or with work cut off (a deadline, a
    crash, a lost lease): the Kaplan-Meier estimate and what it rests on."""
    p999, longest = m["p999_processing"], m["max_processing"]
    jobs, cut = m["finished_jobs"] + m["cut_off_jobs"], m["cut_off_jobs"]
    if not cut:
        return (
            f"p99.9 processing {duration(p999)} (max {duration(longest)}, "
            f"{m['finished_jobs']} jobs finished)"
        )
    basis = (
        f"Kaplan-Meier over {count(jobs, 'job')}: {m['finished_jobs']} finished, {cut} cut off "
        "before the end of their work, which ran at least as long"
    )
    if np.isfinite(p999):
        return f"p99.9 processing {duration(p999)} ({basis}; the longest {longest_words(m)})"
    return (
        f"p99.9 processing beyond {duration(longest)}, where the estimate stops ({basis}; "
        f"the longest {longest_words(m)})"
    )


def stall_tail(faults) -> tuple[float, str] | None:
    """The longest stall between renewals the scenario declares: (seconds, words); None if
    none."""
    f = faults
    tails = []
    if f.pause_rate > 0:
        tails.append((f.pause_duration.quantile(0.99), "pause p99"))
    if f.pauses:
        tails.append((max(o.duration for o in f.pauses), "longest scripted pause"))
    if f.partition_rate > 0:
        tails.append((f.partition_duration.quantile(0.99), "partition p99"))
    if f.partitions:
        tails.append((max(o.duration for o in f.partitions), "longest scripted partition"))
    if f.heartbeat_delay.quantile(0.99) > 0:
        tails.append((f.heartbeat_delay.quantile(0.99), "heartbeat delay p99"))
    if not tails:
        return None
    value, words = max(tails)
    return float(value), f"{words} {duration(value)}"


def check(evidence: Evidence) -> Verdict:
    m, times = measures(evidence)
    fe, leases = m["false_expiries"], m["leases"]
    evidence.use(KEY)
    low, high = wilson_interval(fe, leases, 0.95)  # NaN, NaN without leases
    m.update(false_expiry_ci_low=low, false_expiry_ci_high=high)
    lost = (
        f"{fe} of {leases} leases expired under a live owner (95% interval {percent(low)} to "
        f"{percent(high)}); {m['double_processed_jobs']} of {m['jobs']} leased jobs "
        f"({percent(m['double_processed_share'])}) were processed twice"
    )
    processing = f"{p999_words(m)}: {percent(m['over_ttl_share'])} of jobs outlived the TTL"
    untested = _untested(evidence, times, m, processing, lost)
    if untested:
        return UNTESTED, untested, m
    stalls = stall_durations(evidence.runs)
    m.update(
        stalls_observed=len(stalls),
        longest_stall=float(stalls.max()) if len(stalls) else np.nan,
    )
    seen = f"{count(len(stalls), 'pause or partition', 'pauses or partitions')} in the runs" + (
        f", the longest {duration(stalls.max())}" if len(stalls) else ""
    )
    tail = stall_tail(evidence.scenario.faults)
    if not evidence.policy.heartbeat:
        return _without_heartbeat(m, processing, lost, seen, tail)
    return _with_heartbeat(evidence, m, processing, lost, seen, tail)


def _untested(evidence: Evidence, times, m, processing: str, lost: str) -> str | None:
    """The evidence when the runs cannot judge the TTL (no job leased, or a tail the estimate
    never reaches with nothing outliving the TTL); else None."""
    if not len(times):
        return f"no job was leased in {evidence.n_runs}: processing time not measured."
    if np.isfinite(m["p999_processing"]) or m["false_expiries"] or m["over_ttl_share"] > 0:
        return None
    return (
        f"{processing}, so whether the {m['lease_ttl']:g} s TTL covers the tail is not "
        f"measured; {lost}."
    )


def _without_heartbeat(m, processing: str, lost: str, seen: str, tail) -> Verdict:
    """No heartbeat: the TTL must outlast the processing tail, and with it any declared stall."""
    ttl, p999 = m["lease_ttl"], m["p999_processing"]
    known = np.isfinite(p999)
    cmp = "<" if not known or p999 > ttl else "=" if p999 == ttl else ">"
    head = f"no heartbeat: TTL {ttl:g} s {cmp} {processing}"
    if m["false_expiries"] or m["over_ttl_share"] > 0:
        return FAIL, f"{head}; {lost}.", m
    if p999 > 0.8 * ttl:
        return (
            RISK,
            (
                f"{head}; {lost}, but the TTL leaves under 25% margin over p99.9 and "
                "nothing renews a slow job."
            ),
            m,
        )
    if tail is not None and p999 + tail[0] > ttl:
        return (
            RISK,
            (
                f"{head}; {lost}, but p99.9 processing plus the {tail[1]} "
                f"({duration(p999 + tail[0])}) outlasts the TTL; {seen}."
            ),
            m,
        )
    return PASS, f"{head}; {lost}; {seen}.", m


def _with_heartbeat(evidence: Evidence, m, processing: str, lost: str, seen: str, tail) -> Verdict:
    """With a heartbeat: the slack between renewals (TTL - interval - statement latency) must
    outlast the longest declared stall."""
    ttl, h = m["lease_ttl"], evidence.policy.heartbeat_interval
    latency = float(evidence.scenario.workload.statement_latency.quantile(0.99))
    slack = ttl - h - latency
    m.update(
        slack=slack,
        statement_latency_p99=latency,
        declared_stall_tail=tail[0] if tail else np.nan,
    )
    head = (
        f"heartbeat every {h:g} s: TTL {ttl:g} s - {h:g} s - statement latency p99 "
        f"{duration(latency)} = {duration(slack)} of slack between renewals"
    )
    kept = f"{processing}, kept alive by {count(m['renewals'], 'renewal')}"
    if h >= ttl:
        return (
            FAIL,
            f"heartbeat every {h:g} s >= TTL {ttl:g} s: leases lapse between renewals; {lost}.",
            m,
        )
    if m["false_expiries"]:
        against = f" against the {tail[1]}" if tail else ""
        return FAIL, f"{head}{against}: stalls outlasted it; {lost}; {seen}; {kept}.", m
    if tail is None:
        return (
            UNTESTED,
            (
                f"{head}; no pause, partition or heartbeat delay was declared or observed, so "
                f"it was never tested; {lost}; {kept}."
            ),
            m,
        )
    if slack <= tail[0]:
        return (
            RISK,
            (
                f"{head} {'<' if slack < tail[0] else '='} the {tail[1]}: such a stall lapses "
                f"the lease under a live owner; {lost} ({seen}); {kept}."
            ),
            m,
        )
    return PASS, f"{head} > the {tail[1]}; {lost} ({seen}); {kept}.", m
