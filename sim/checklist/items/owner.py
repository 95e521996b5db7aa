"""Item 5: lease_owner is stored. The final table's lease_owner of every leased job against the
job's last claimer in the event log."""

from __future__ import annotations

from sim.checklist.evidence import Evidence, deleted_note
from sim.checklist.verdicts import FAIL, PASS, UNTESTED, Verdict
from sim.invariants import deleted_jobs

KEY = "owner"
TITLE = "5. lease_owner is stored"


def owner_mismatches(run) -> tuple[int, int]:
    """(leased jobs the final table holds, of which the table's lease_owner is empty or not the last
    claimer in the log); jobs deleted once finished are not counted."""
    claims = run.events[run.events["kind"] == "claim"]
    last = claims.groupby("job")["worker"].last()
    last = last[~last.index.isin(deleted_jobs(run))]
    owners = run.table_jobs.set_index("id")["lease_owner"]
    stored = owners.reindex(last.index)
    bad = stored.isna() | (stored != last)
    return len(last), int(bad.sum())


def check(evidence: Evidence) -> Verdict:
    runs = evidence.runs
    leased, bad = map(sum, zip(*(owner_mismatches(r) for r in runs), strict=True))
    gone = sum(len(deleted_jobs(r)) for r in runs)
    m = {"leased_jobs": leased, "owner_mismatches": bad, "deleted_jobs": gone}
    text = (
        f"lease_owner set in the final table on {leased - bad} of {leased} leased jobs and "
        f"equal to the job's last claimer in the event log ({evidence.n_runs})"
    ) + deleted_note(gone)
    return (
        (PASS if bad == 0 and leased else FAIL if bad else UNTESTED),
        text + ("." if leased else ": no job was leased."),
        m,
    )
