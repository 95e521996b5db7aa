"""Processing times with cut-off work counted as censored (issue 31 item 3): the Kaplan-Meier
estimate by hand, the attempts a deadline cuts off, and the review's items 2 and 3 on a queue
whose every job outlasts its deadline (no job finishes, yet the TTL is judged)."""

from __future__ import annotations

import numpy as np
import pytest

import sim
from sim.checklist.design_review import FAIL
from sim.checklist.processing_times import ProcessingTimes, processing_times
from tests.model.scripts import with_deadline


def test_the_kaplan_meier_estimate_by_hand():
    """Finished at 1, 2, 3, 10 s; three cut off at 15 s. KM: S = 6/7 after 1, 5/7 after 2, 4/7
    after 3, 3/7 after 10, and it stays there: more than 0.1% ran past the last finish, so p99.9
    is not known (None), but p50 is 10 s (S first at or below 1/2 there)."""
    t = ProcessingTimes(np.array([1.0, 2, 3, 10, 15, 15, 15]), np.array([True] * 4 + [False] * 3))
    assert (t.n_finished, t.n_cut, t.longest) == (4, 3, 15.0)
    assert t.share_longer(2.5) == pytest.approx(5 / 7)
    assert t.share_longer(15.0) == pytest.approx(3 / 7)  # cut off at 15: they ran at least 15
    assert t.quantile(0.5) == 10.0 and t.quantile(0.999) is None
    assert t.basis() == "7 jobs: 4 finished, 3 cut off after up to 15 s"
    whole = ProcessingTimes(np.arange(1.0, 11.0), np.ones(10, dtype=bool))
    assert whole.quantile(0.9) == pytest.approx(np.quantile(np.arange(1.0, 11.0), 0.9))
    assert whole.share_longer(7.5) == pytest.approx(0.3)


def test_a_deadline_cuts_the_work_off_and_a_dropped_late_result_still_measures_it():
    """8 s jobs, a 5 s deadline, 3 attempts: cancelled, every attempt is cut off at the deadline
    (the one job's work: at least 5 s, not finished); dropped, each handler runs on to its end,
    and the work it did (8 s, the late result's time minus the claim) is an observation."""
    cancelled = sim.run(with_deadline(workers=2, max_attempts=3, deadline_action="cancel"))
    t = processing_times([cancelled])
    assert (len(t), t.n_finished) == (1, 0)
    assert t.times[0] == pytest.approx(5.001)  # claim 0.001 -> cancel 5.001 (the longest attempt)
    assert t.share_longer(5.0) == 1.0 and t.quantile(0.999) is None
    dropped = sim.run(with_deadline(workers=2, max_attempts=3))
    t = processing_times([dropped])
    assert (len(t), t.n_finished) == (1, 1)
    assert t.times[0] == pytest.approx(8.0)  # claim 0.001 -> late_result 8.001


def test_items_2_and_3_judge_jobs_that_all_outlast_the_deadline():
    """Issue 31: every job runs 20 s against a 15 s deadline (the handler cancelled there), so no
    job ever finishes. Items 2 and 3 used to say UNTESTED ("no job finished") and "n/a of jobs
    outlived the TTL"; the cut-off work now shows that every job outlasts the 15 s TTL, in the
    same sentence as the leases that expired under a live owner. (Jobs 1 and 2 are retried
    forever ahead of job 3, which two workers never reach.)"""
    r = sim.review(
        "gc-pause-zombie",
        seeds=(1,),
        variants=False,
        **{
            "policy.deadline": 15,
            "policy.deadline_action": "cancel",
            "policy.heartbeat": False,
            "faults.pauses": [],
        },
    )
    m = r.measured["ttl"]
    assert (m["finished_jobs"], m["cut_off_jobs"], m["over_ttl_share"]) == (0, 2, 1.0)
    assert np.isnan(m["p999_processing"])
    for key in ("ttl", "heartbeat"):
        assert r.table.loc[key, "status"] == FAIL
        assert "100% of jobs outlived" in r.table.loc[key, "evidence"]
    assert r.table.loc["ttl", "evidence"].startswith(
        "no heartbeat: TTL 15 s < p99.9 processing beyond 15 s, where the estimate stops "
        "(Kaplan-Meier over 2 jobs: 0 finished, 2 cut off before the end of their work"
    )
