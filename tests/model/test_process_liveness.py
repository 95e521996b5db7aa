"""Process liveness (policy.process_heartbeat_interval): one heartbeat row per worker process, a
prune after process_stale_after, the process's jobs requeued or failed; worker identity reused on
restart (procrastinate #1518) or fresh."""

from sim import run

from .scripts import mechanism_scenarios, timeline

MECHANISMS = mechanism_scenarios()
STORY = ("idle", "watcher_tick", "enqueue", "lock_wait")


def test_a_crashed_process_is_pruned_after_the_stale_age_and_its_job_requeued():
    """Both processes register at 0.001 and beat every 4 s (4.002, 8.003, ...). w0 crashes at 10
    holding job 1; its row's last beat, 8.003, is 30 s old after 38.003, so the prune of the tick
    at 38.038 requeues the job (stall 1), and w1 claims it at 38.043."""
    r = run(MECHANISMS["process prune"])
    assert timeline(r, skip=STORY) == [
        (0.001, "register", "w0", None, None),
        (0.001, "register", "w1", None, None),
        (0.003, "claim", "w0", 1, 1),
        (0.003, "claim_lost", "w1", 1, None),
        (10.0, "crash", "w0", 1, 1),
        (38.039, "requeue", "watcher", 1, 1),
        (38.043, "claim", "w1", 1, 2),
    ]
    assert r.recoveries["latency"].round(6).tolist() == [28.043]
    counts = r.statement_counts
    assert counts["process_heartbeat"] == 19 + 2  # w1 every 4 s to 76, w0 twice before its crash
    assert counts["prune_processes"] == 80 and "requeue_expired" not in counts  # no lease sweep
    assert "heartbeat" not in counts  # liveness is per process, not per job


def test_with_prune_action_dead_the_jobs_of_a_dead_process_fail():
    """Solid Queue: the claimed executions of a pruned process are failed, not retried."""
    r = run(MECHANISMS["process prune fails"])
    assert [(round(t, 6), k) for t, k, *_ in timeline(r, skip=STORY)][-1] == (38.039, "requeue")
    job = r.table_jobs.iloc[0]
    assert (job.status, job.attempts, job.last_error) == ("Dead", 1, "process gone")


def test_a_restarted_process_with_the_same_name_keeps_its_old_jobs_stuck_forever():
    """procrastinate #1518: w0 crashes at 10 holding job 1 and comes back at 15 under the same
    name: its registration refreshes the row, so the process looks alive and job 1 is never
    pruned; the checker reports it stuck. With a fresh identity (w0.1) the old row goes stale and
    the prune at 38.039 hands job 1 back, to w0.1 itself."""
    reused = run(MECHANISMS["identity reused"])
    assert timeline(reused, skip=STORY) == [
        (0.001, "register", "w0", None, None),
        (0.003, "claim", "w0", 1, 1),
        (10.0, "crash", "w0", 1, 1),
        (15.0, "restart", "w0", None, None),
        (15.001, "register", "w0", None, None),
        (15.003, "claim", "w0", 2, 1),
        (25.003, "psp_charge", "w0", 2, 1),
        (35.006, "effect", "w0", 2, 1),
        (35.006, "complete", "w0", 2, 1),
    ]
    assert reused.table_jobs[["status", "lease_owner"]].values.tolist() == [
        ["Processing", "w0"],
        ["Completed", "w0"],
    ]
    assert reused.check().counts() == {"stuck_processing": 1}
    fresh = run(MECHANISMS["identity fresh"])
    assert timeline(fresh, skip=STORY)[3:5] == [
        (15.0, "restart", "w0.1", None, None),
        (15.001, "register", "w0.1", None, None),
    ]
    assert timeline(fresh, skip=STORY)[-5:] == [
        (38.039, "requeue", "watcher", 1, 1),
        (39.012, "claim", "w0.1", 1, 2),
        (49.012, "psp_charge", "w0.1", 1, 2),
        (59.015, "effect", "w0.1", 1, 2),
        (59.015, "complete", "w0.1", 1, 2),
    ]
    assert fresh.check().ok and fresh.table_jobs["status"].tolist() == ["Completed"] * 2


def test_a_process_paused_past_the_stale_age_loses_its_job_and_comes_back_a_zombie():
    """w0 is paused from 5 to 50 holding job 1: its last beat (4.002) goes stale at 34.002, the
    prune at 34.035 requeues the job and w1 takes it. When w0 wakes, its heartbeat finds no row
    (process_pruned) and it registers again; it still finishes the job, charging the card a
    second time, and its completion, fenced by attempt, is refused."""
    r = run(MECHANISMS["process paused past stale"])
    assert timeline(r, skip=STORY)[4:] == [
        (5.0, "pause_start", "w0", None, None),
        (34.035, "requeue", "watcher", 1, 1),
        (34.039, "claim", "w1", 1, 2),
        (50.0, "pause_end", "w0", None, None),
        (50.001, "process_pruned", "w0", None, None),
        (50.002, "register", "w0", None, None),
        (64.039, "psp_charge", "w1", 1, 2),
        (75.003, "psp_charge", "w0", 1, 1),
        (94.042, "effect", "w1", 1, 2),
        (94.042, "complete", "w1", 1, 2),
        (105.006, "complete_rejected", "w0", 1, 1),
    ]
    assert r.check().counts() == {"double_claim": 1, "duplicate_external_effect": 1}
