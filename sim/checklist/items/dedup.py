"""The DB effect is deduplicated: extra ledger rows (a payment booked again) in the runs and in the
duplicates variant, and the repeated deliveries or retries the marker turned away."""

from __future__ import annotations

from sim.checklist.evidence import Evidence
from sim.checklist.items.duplicates import duplicate_counts
from sim.checklist.verdicts import FAIL, RISK, Verdict, guarded
from sim.support.in_words import count

KEY = "dedup"
TITLE = "The DB effect is deduplicated (marker and effect in one transaction)"


def check(evidence: Evidence) -> Verdict:
    p = evidence.policy
    found, vfound, jobs, vjobs, dup = duplicate_counts(evidence, KEY, "duplicate_db_effects")
    skipped = sum(int((r.events["kind"] == "dedup_skip").sum()) for r in evidence.runs + dup)
    m = {
        "duplicate_db_effects": found,
        "jobs": jobs,
        "variant_duplicate_db_effects": vfound,
        "variant_jobs": vjobs,
        "dedup_skips": skipped,
    }
    variant = (
        "; duplicates variant (20% of events delivered twice, crashes after the PSP call): "
        f"{vfound} extra ledger rows in {count(vjobs, 'job')}"
        if vfound is not None
        else ""
    )
    if p.dedup:
        text = (
            f"marker and ledger row commit together: {found} extra ledger rows in "
            f"{count(jobs, 'job')}{variant}; "
            f"{count(skipped, 'repeated delivery or retry', 'repeated deliveries or retries')} "
            "found the marker and skipped the effect"
        )
        return (
            *guarded(text, found or vfound, skipped, "no event came twice, not exercised"),
            m,
        )
    text = (
        f"no dedup marker: {found} extra ledger rows (a payment booked again) in "
        f"{count(jobs, 'job')}{variant}"
    )
    return (FAIL if found else RISK), text + ".", m
