"""Item 3: a heartbeat renews the lease of long jobs. Renewals against the jobs that outlived the
interval, and (the no-heartbeat variant) what the same runs would lose without it."""

from __future__ import annotations

import numpy as np

from sim.checklist.evidence import Evidence, total
from sim.checklist.items.ttl import (
    double_processed,
    leased_jobs,
    longest_words,
    measures,
    p999_words,
)
from sim.checklist.verdicts import FAIL, PASS, RISK, UNTESTED, Verdict
from sim.support.in_words import count, duration, percent

KEY = "heartbeat"
TITLE = "3. A heartbeat renews the lease of long jobs"


def check(evidence: Evidence) -> Verdict:
    p, (m, _) = evidence.policy, measures(evidence)
    ttl = p.lease_ttl
    evidence.use(KEY)
    if not p.heartbeat:
        return _without_heartbeat(evidence, m)
    h = p.heartbeat_interval
    long_jobs = m["jobs_over_interval"]
    text = (
        f"heartbeat every {h:g} s (TTL {ttl:g} s): {count(m['renewals'], 'renewal')} in "
        f"{evidence.n_runs} for {count(long_jobs, 'job')} that ran longer than the interval; "
        f"{count(m['false_expiries'], 'false expiry', 'false expiries')}"
    )
    if long_jobs == 0:
        status, tail = (
            UNTESTED,
            "; no job ran longer than the interval, so renewal was not exercised",
        )
    elif m["renewals"] == 0:
        status, tail = FAIL, "; no renewal reached the database"
    elif h >= ttl / 2:
        status, tail = (
            RISK,
            "; the interval is at least half the TTL: one late heartbeat loses the lease",
        )
    elif m["false_expiries"]:
        status, tail = (
            RISK,
            "; leases lapsed despite the renewals (stalls between them: see item 2)",
        )
    else:
        status, tail = PASS, ""
    return status, text + tail + _without_it(evidence, m) + ".", m


def _without_it(evidence: Evidence, m: dict) -> str:
    """What the no-heartbeat variant lost (its numbers go into m); '' without the variant."""
    without = evidence.variant("no-heartbeat")
    if not without:
        return ""
    evidence.use(KEY, "no-heartbeat")
    fe = total(without, "false_expiries")
    leases = total(without, "leases")
    jobs = sum(leased_jobs(r) for r in without)
    twice = sum(double_processed(r) for r in without)
    m.update(
        variant_false_expiries=fe,
        variant_leases=leases,
        variant_jobs=jobs,
        variant_double_processed_jobs=twice,
    )
    return (
        f"; without it (variant): {count(fe, 'lease')} "
        f"({percent(fe / leases if leases else np.nan)}) would expire under a live owner "
        f"and {twice} of {jobs} leased jobs ({percent(twice / jobs if jobs else np.nan)}) "
        "would be processed twice"
    )


def _without_heartbeat(evidence: Evidence, m: dict) -> Verdict:
    """No heartbeat: fine only while no job comes near the TTL."""
    ttl = m["lease_ttl"]
    if m["over_ttl_share"] > 0 or m["false_expiries"]:
        return (
            FAIL,
            (
                f"no heartbeat: {percent(m['over_ttl_share'])} of jobs outlived the "
                f"{ttl:g} s TTL; {count(m['false_expiries'], 'lease')} expired under a "
                f"live owner and {m['double_processed_jobs']} of {m['jobs']} leased jobs "
                f"({percent(m['double_processed_share'])}) were processed twice."
            ),
            m,
        )
    if not np.isfinite(m["max_processing"]):
        return (
            UNTESTED,
            f"no heartbeat, and no job was leased in {evidence.n_runs}: job length not measured.",
            m,
        )
    if m["max_processing"] > ttl / 2:
        return (
            RISK,
            (
                f"no heartbeat: the longest job {longest_words(m)}, over half the {ttl:g} s "
                "TTL; nothing renews a slow one."
            ),
            m,
        )
    if not np.isfinite(m["p999_processing"]):
        return (
            UNTESTED,
            f"no heartbeat, and the jobs' length is not measured: {p999_words(m)}.",
            m,
        )
    return (
        PASS,
        (
            "no heartbeat, and no long job to renew: the longest took "
            f"{duration(m['max_processing'])}, at most half the {ttl:g} s TTL."
        ),
        m,
    )
