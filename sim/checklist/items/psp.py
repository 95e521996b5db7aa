"""The PSP call is idempotent: extra charges in the runs and in the duplicates variant, payments
charged more than once, and the repeated calls the PSP replayed instead of charging again."""

from __future__ import annotations

import numpy as np

from sim.checklist.evidence import Evidence
from sim.checklist.items.duplicates import duplicate_counts
from sim.checklist.verdicts import FAIL, RISK, Verdict, guarded
from sim.support.in_words import count, percent

KEY = "psp"
TITLE = "The PSP call is idempotent (idempotency key)"


def charged_payments(run) -> tuple[int, int]:
    """(payments the PSP charged, of which charged more than once)."""
    events = run.events
    charges = events[(events["kind"] == "psp_charge") & (events["detail"] == "new")]
    per_event = charges.merge(run.jobs[["job", "event_id"]], on="job").groupby("event_id").size()
    return len(per_event), int((per_event > 1).sum())


def check(evidence: Evidence) -> Verdict:
    p = evidence.policy
    found, vfound, jobs, vjobs, dup = duplicate_counts(evidence, KEY, "duplicate_external_effects")
    replays = sum(
        int(((r.events["kind"] == "psp_charge") & (r.events["detail"] == "replay")).sum())
        for r in evidence.runs + dup
    )
    charged, twice = map(sum, zip(*(charged_payments(r) for r in evidence.runs), strict=True))
    m = {
        "duplicate_external_effects": found,
        "jobs": jobs,
        "charged_payments": charged,
        "payments_charged_twice": twice,
        "variant_duplicate_external_effects": vfound,
        "variant_jobs": vjobs,
        "psp_replays": replays,
    }
    variant = (
        f"; duplicates variant: {vfound} extra charges in {count(vjobs, 'job')}"
        if vfound is not None
        else ""
    )
    if p.idempotency_key:
        text = (
            f"the event id is the PSP idempotency key: {found} extra charges in "
            f"{count(jobs, 'job')}{variant}; the PSP replayed "
            f"{count(replays, 'repeated call')} instead of charging again"
        )
        return (
            *guarded(text, found or vfound, replays, "no call was repeated, not exercised"),
            m,
        )
    text = (
        f"no idempotency key: {twice} of {charged} charged payments "
        f"({percent(twice / charged if charged else np.nan)}) were charged more than once, "
        f"{found} extra charges in all{variant}"
    )
    return (FAIL if found else RISK), text + ".", m
