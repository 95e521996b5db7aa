"""The invariant checker flags what the source article warns about, and nothing on healthy runs."""

import pytest

from sim import run
from sim.scenario.dists import Dist
from sim.scenario.settings import Faults, ScriptedCrash, recovery_allowance

from .scripts import scripted


def _crash_without_recovery(**policy):
    faults = Faults(crashes=(ScriptedCrash(at=5.0, worker=0),), restart_delay=Dist.constant(1000))
    return run(scripted(workers=2, work=20, horizon=120, faults=faults, **policy))


def test_no_watcher_and_no_expired_claims_leaves_the_job_stuck_forever():
    report = _crash_without_recovery(watcher=False, claim_takes_expired=False).check()
    assert report.counts() == {"lost_job": 1, "stuck_processing": 1}
    assert not report.ok
    assert [v.job for v in report.violations] == [1, 1]


def test_the_watcher_recovers_the_same_crash():
    r = _crash_without_recovery(watcher=True, watcher_interval=10.0, claim_takes_expired=False)
    assert r.check().counts() == {}
    assert r.table_jobs.loc[0, "status"] == "Completed" and r.table_jobs.loc[0, "attempts"] == 2


@pytest.mark.parametrize(
    "backend", ["memory", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def test_a_job_waiting_out_its_retry_backoff_is_not_lost(backend, request):
    """crash-recovery with retry_backoff = 1000 s: five requeued jobs are due again after 16,000 s
    (1000 x 2^4), past the 3600 s horizon; they wait, they are not lost. A job that no requeue
    ever made claimable is still lost, backoff or not."""
    dsn = request.getfixturevalue("pg_dsn") if backend == "postgres" else None
    r = run("crash-recovery", backend, dsn=dsn, **{"policy.retry_backoff": 1000.0})
    assert r.summary["unfinished"] == 5 and r.summary["lost_jobs"] == 0
    assert r.check().counts() == {}
    stranded = _crash_without_recovery(
        watcher=False, claim_takes_expired=False, retry_backoff=1000.0
    )
    assert stranded.check().counts() == {"lost_job": 1, "stuck_processing": 1}


@pytest.mark.parametrize(
    "backend", ["memory", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def test_stuck_processing_allows_for_the_watchers_gap(backend, request):
    """A read-then-write watcher moves an expired job at its write, watcher_gap after the read: job
    11 of no-heartbeat-long-jobs seed 2 expired at 477.3 s and was requeued 32.5 s later, within
    one 30 s tick plus twice the 3 s gap (read one gap and one interval after the previous read,
    written a gap later). (Its double claims are the buggy rescue's own doing.)"""
    dsn = request.getfixturevalue("pg_dsn") if backend == "postgres" else None
    r = run("no-heartbeat-long-jobs", backend, seed=2, dsn=dsn, **{"policy.watcher_gap": 3.0})
    assert r.check().counts() == {"double_claim": 2, "duplicate_external_effect": 8}
    without_gap_allowance = r.scenario.with_overrides({"policy.watcher_gap": 0.0})
    assert recovery_allowance(r.scenario) == pytest.approx(
        recovery_allowance(without_gap_allowance) + 6.0
    )
