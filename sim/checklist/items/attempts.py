"""Item 6: attempts is incremented on every lease and persisted. The final table's attempts of
every job against its leases in the event log (numbered 1, 2, ...); when no job was leased twice,
the crashes variant exercises the increment."""

from __future__ import annotations

from sim.checklist.evidence import Evidence, deleted_note
from sim.checklist.verdicts import UNTESTED, Verdict, guarded
from sim.invariants import deleted_jobs, keeps_attempts
from sim.support.in_words import count

KEY = "attempts"
TITLE = "6. attempts is incremented on every lease and persisted"


def attempt_mismatches(run) -> tuple[int, int, int, int]:
    """(jobs, jobs whose attempts != leases in the log or whose claims were not numbered 1, 2, ...,
    jobs leased more than once, largest attempts)."""
    claims = run.events[run.events["kind"] == "claim"]
    leases = claims.groupby("job").size()
    sequential = claims.groupby("job")["attempt"].apply(
        lambda a: list(a) == list(range(1, len(a) + 1))
    )
    table = run.table_jobs.set_index("id")["attempts"]
    expected = leases.reindex(table.index, fill_value=0)
    bad = (table != expected) | ~sequential.reindex(table.index, fill_value=True)
    return (
        len(table),
        int(bad.sum()),
        int((leases > 1).sum()),
        int(table.max()) if len(table) else 0,
    )


def check(evidence: Evidence) -> Verdict:
    runs = evidence.runs
    if not all(keeps_attempts(r) for r in runs):
        return (
            UNTESTED,
            "the queue keeps no attempts count (dump_jobs returns NULL attempts, its claims "
            "too): Lease Lab numbered the leases itself, so whether attempts are incremented "
            "and persisted cannot be checked, and no statement can fence by attempt.",
            {"keeps_attempts": False},
        )
    jobs, bad, multi, most = 0, 0, 0, 0
    for r in runs:
        j, b, mu, mo = attempt_mismatches(r)
        jobs, bad, multi, most = jobs + j, bad + b, multi + mu, max(most, mo)
    m = {
        "jobs": jobs,
        "attempt_mismatches": bad,
        "re_leased_jobs": multi,
        "max_attempts_seen": most,
    }
    text = (
        "attempts in the final table == leases per job in the event log, numbered 1, 2, ... "
        f"on {jobs - bad} of {jobs} jobs; {count(multi, 'job')} leased more than once (at most "
        f"{count(most, 'attempt')})"
    ) + deleted_note(sum(len(deleted_jobs(r)) for r in runs))
    if not multi:
        crashed = evidence.variant("crashes")
        if crashed:
            vj, vb, vmu, vmo = map(sum, zip(*(attempt_mismatches(r) for r in crashed), strict=True))
            m.update(variant_jobs=vj, variant_attempt_mismatches=vb, variant_re_leased_jobs=vmu)
            bad += vb
            evidence.use(KEY, "crashes")
            text += f"; crash variant: {vj - vb} of {vj} jobs match, {vmu} leased more than once"
            multi = vmu
    if not jobs:
        return UNTESTED, text + ": the final table holds no job to compare.", m
    return (*guarded(text, bad, multi, "the increment was never exercised"), m)
