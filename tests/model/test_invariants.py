"""The invariant checker flags what the source article warns about, and nothing on healthy runs."""

from sim import run
from sim.dists import Dist
from sim.scenario import Faults, ScriptedCrash

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
