"""What the dedup and PSP items share: a count in the scenario's runs and in the duplicates
variant (20% of events delivered twice, crashes right after the PSP call)."""

from __future__ import annotations

from sim.checklist.evidence import Evidence, total


def duplicate_counts(evidence: Evidence, item: str, key: str):
    """(count in the runs, count in the duplicates variant or None, jobs, variant jobs, variant
    runs)."""
    found = total(evidence.runs, key)
    jobs = total(evidence.runs, "jobs")
    dup = evidence.variant("duplicates")
    evidence.use(item, "duplicates")
    return (
        found,
        (total(dup, key) if dup else None),
        jobs,
        (total(dup, "jobs") if dup else 0),
        dup,
    )
