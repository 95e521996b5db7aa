"""sim.teaching: sizing, the lessons' scenarios, explorers, the hand-driven database, checkers."""

from __future__ import annotations

import json
import math
import time

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

import sim  # noqa: E402
from sim import plots, teaching  # noqa: E402
from sim.db.base import Blocked  # noqa: E402
from sim.errors import ConfigError  # noqa: E402
from sim.support import progress  # noqa: E402
from tools.link_html import link_html  # noqa: E402


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


# ---- sizing --------------------------------------------------------------------------------------


def test_fast_mode_follows_the_environment_unless_overridden(monkeypatch):
    monkeypatch.delenv("LEASELAB_FAST", raising=False)
    assert teaching.fast_mode() is False
    assert teaching.size(100, 8) == 100
    monkeypatch.setenv("LEASELAB_FAST", "1")
    assert teaching.fast_mode() is True
    assert teaching.size(100, 8) == 8
    assert teaching.size(100, 8, mode=False) == 100
    assert teaching.fast_mode(False) is False
    for text in ("true", "YES", " on "):
        monkeypatch.setenv("LEASELAB_FAST", text)
        assert teaching.fast_mode()
    for text in ("0", "false", "", "off"):
        monkeypatch.setenv("LEASELAB_FAST", text)
        assert not teaching.fast_mode()


def test_a_bad_fast_flag_is_one_line_error(monkeypatch):
    monkeypatch.setenv("LEASELAB_FAST", "maybe")
    with pytest.raises(ConfigError, match=r"\$LEASELAB_FAST: expected 1 or 0"):
        teaching.fast_mode()


def test_sizes_picks_each_pair(monkeypatch):
    monkeypatch.setenv("LEASELAB_FAST", "1")
    n = teaching.sizes(reps=(100, 8), jobs=(900, 150))
    assert (n.reps, n.jobs) == (8, 150)
    assert teaching.sizes(False, reps=(100, 8)).reps == 100
    with pytest.raises(ConfigError, match="reps: expected a"):
        teaching.sizes(reps=100)


def test_setup_sets_plotting_defaults_by_mode():
    assert teaching.setup(True) is True
    fast_dpi = matplotlib.rcParams["figure.dpi"]
    assert teaching.setup(False) is False
    assert matplotlib.rcParams["figure.dpi"] > fast_dpi


# ---- headless detection --------------------------------------------------------------------------


def test_headless_without_a_kernel_and_by_environment(monkeypatch):
    monkeypatch.delenv("LEASELAB_HEADLESS", raising=False)
    assert teaching.headless() is True  # plain Python, no IPython kernel
    assert teaching.headless(False) is False
    monkeypatch.setenv("LEASELAB_HEADLESS", "0")
    assert teaching.headless() is False
    monkeypatch.setenv("LEASELAB_HEADLESS", "1")
    assert teaching.headless() is True
    assert teaching.widgets_available() is False
    assert teaching.progress() is False


def test_headless_when_a_batch_runner_started_the_kernel(monkeypatch):
    class Shell:
        kernel = object()

    monkeypatch.delenv("LEASELAB_HEADLESS", raising=False)
    monkeypatch.setattr("IPython.get_ipython", lambda: Shell())
    monkeypatch.setattr(
        progress,
        "_parent_cmdline",
        lambda: "/venv/bin/python -m pytest tests/teaching/test_notebooks.py",
    )
    assert teaching.headless() is True
    monkeypatch.setattr(
        progress,
        "_parent_cmdline",
        lambda: "/venv/bin/python /venv/bin/jupyter-nbconvert --execute",
    )
    assert teaching.headless() is True
    monkeypatch.setattr(
        progress, "_parent_cmdline", lambda: "/venv/bin/python /venv/bin/jupyter-lab"
    )
    assert teaching.headless() is False


# ---- scenarios -----------------------------------------------------------------------------------


def test_one_job_crash_with_a_lease_is_recovered_after_the_lease_runs_out():
    run = sim.run(teaching.one_job(crash_at=12.0))
    crashed = run.leases.iloc[0]
    assert (crashed["worker"], crashed["end_reason"]) == ("w0", "crashed")
    [recovery] = run.recoveries.itertuples()
    assert recovery.reclaimed_by == "w1"
    assert recovery.reclaimed_at > crashed["until"]  # not before the lease ran out in the database
    assert run.jobs["status"].iloc[0] == "Completed"
    table = run.table_jobs.iloc[0]
    assert (table["lease_owner"], table["attempts"]) == ("w1", 2)


def test_one_job_with_a_lock_is_never_recovered():
    scenario = teaching.one_job(crash_at=12.0, lock=True)
    assert (
        scenario.policy.lease_ttl >= 1e8
        and not scenario.policy.heartbeat
        and not scenario.policy.watcher
    )
    run = sim.run(scenario)
    assert run.recoveries["latency"].isna().all()
    assert run.jobs["status"].iloc[0] == "Processing"


def test_one_job_warns_when_the_heartbeat_is_not_shorter_than_the_ttl():
    with pytest.warns(sim.scenario.settings.LeaseWarning, match="heartbeat_interval"):
        teaching.one_job(ttl=5.0, heartbeat_interval=10.0)


def test_one_job_pause_makes_a_zombie():
    run = sim.run(
        teaching.one_job(
            ttl=15.0, pause=(6.0, 45.0), abandon_on_lost_lease=False, idempotency_key=False
        )
    )
    assert run.summary["false_expiries"] == 1
    assert (run.events["kind"] == "complete_rejected").sum() == 1


def test_recovery_experiment_recovers_once_and_phase_bias_is_small():
    scenario = teaching.recovery_experiment(watcher_interval=10.0)
    run = sim.run(scenario, seed=3)
    assert len(run.recoveries) == 1 and run.recoveries["latency"].notna().all()
    assert run.recoveries["latency"].iloc[0] >= 30.0 - 10.0 - 0.01  # at least L - h after the crash
    bias = teaching.phase_bias(mean_arrival=100.0, heartbeat_interval=10.0)
    # E[phi] of the density exp(phi / mean) on [0, h'), by quadrature
    h = 10.002
    phi = np.linspace(0, h, 200_001)
    weights = np.exp(phi / 100.0)
    assert bias == pytest.approx(float((phi * weights).sum() / weights.sum()) - h / 2, rel=1e-3)
    assert 0 < bias < 0.1


def test_stalling_queue_is_valid_and_loses_leases_without_heartbeat():
    scenario = teaching.stalling_queue(jobs=150)
    run = sim.run(scenario.with_overrides({"policy.heartbeat": False, "policy.lease_ttl": 5.0}))
    assert run.summary["false_expiries"] > 0
    assert run.summary["leases"] == run.summary["jobs"]  # max_attempts 1: one lease per job


def test_busy_window_ends_after_the_activity():
    run = sim.run(teaching.one_job())
    t0, t1 = teaching.busy_window(run)
    assert t0 == 0 and run.leases["end"].max() < t1 < run.scenario.horizon


# ---- figures -------------------------------------------------------------------------------------


def test_lease_clock_draws_one_sawtooth_per_lease_and_marks_expiry():
    run = sim.run(teaching.one_job(crash_at=12.0))
    ax = teaching.lease_clock(run)
    lines = [line for line in ax.lines if line.get_gid() == "lease-left"]
    assert len(lines) == 2
    first = lines[0]
    assert max(first.get_ydata()) == pytest.approx(15.0, abs=0.01)
    assert min(first.get_ydata()) == pytest.approx(
        0.0, abs=1e-9
    )  # runs down to zero after the crash
    assert [line.get_gid() for line in ax.lines].count("expired") == 1
    with pytest.raises(ConfigError, match="never expire"):
        teaching.lease_clock(sim.run(teaching.one_job(crash_at=12.0, lock=True)))


# ---- explorers -----------------------------------------------------------------------------------


def _make_run(ttl, heartbeat_interval, watcher_interval):
    return sim.run(
        teaching.one_job(
            ttl=ttl,
            heartbeat_interval=heartbeat_interval,
            watcher_interval=watcher_interval,
            crash_at=12.0,
        )
    )


CONTROLS = [
    ("ttl", 2, 60, 1, 15, "lease TTL (s)"),
    ("heartbeat_interval", 1, 30, 1, 5),
    ("watcher_interval", 1, 60, 1, 5),
]


def test_explorer_headless_shows_one_static_figure(capsys):
    explorer = teaching.explore(_make_run, CONTROLS, headless=True)
    assert explorer.widgets is None
    assert explorer.values == {"ttl": 15, "heartbeat_interval": 5, "watcher_interval": 5}
    assert explorer.last_run.scenario.policy.lease_ttl == 15
    assert "Figure" in capsys.readouterr().out


def test_explorer_sliders_rerun_and_redraw_within_a_second():
    explorer = teaching.explore(_make_run, CONTROLS, headless=False)
    sliders = explorer.widgets.children
    assert [s.description for s in sliders] == [
        "lease TTL (s)",
        "heartbeat_interval",
        "watcher_interval",
    ]
    start = time.perf_counter()
    sliders[0].value = 30
    assert time.perf_counter() - start < 1.0
    assert explorer.seconds < 1.0
    assert explorer.last_run.scenario.policy.lease_ttl == 30
    sliders[1].value = 40  # heartbeat >= TTL: the figure carries the warning instead of raising
    fig = explorer.figure()
    assert any("heartbeat_interval" in t.get_text() for t in fig.texts)


def test_controls_are_validated():
    with pytest.raises(ConfigError, match="ttl: need low <= value <= high"):
        teaching.Control("ttl", 10, 5, 1, 7)


# ---- the database by hand ------------------------------------------------------------------------


def test_script_records_a_transcript_and_binds_the_clock():
    s = teaching.Script()
    s.at(2.0).sql("A", "insert_job", id=1, event_id="evt-1", payload="{}")
    rows = s.at(3.0).sql("A", "claim_conditional", id=1, owner="A", ttl=30)
    assert rows == [(1, 1)]
    assert s.sql("B", "claim_conditional", id=1, owner="B", ttl=30) == []
    jobs = s.table("jobs")
    assert jobs.loc[0, "lease_until"] == pytest.approx(33.0)
    assert list(s.transcript["client"]) == ["A", "A", "B"]
    assert s.transcript["result"].iloc[-1] == "0 rows"
    with pytest.raises(ConfigError, match="table: 'nope'"):
        s.table("nope")


def test_delivered_twice_applies_once():
    s = teaching.Script()
    assert teaching.deliver(s, "A", "evt-1") == "applied"
    assert teaching.deliver(s, "B", "evt-1") == "skipped"
    assert teaching.ledger_counts(s).to_dict() == {"evt-1": 1}


def test_concurrent_deliveries_wait_then_skip():
    s = teaching.Script()
    b, c = teaching.Delivery(s, "B", "evt-1"), teaching.Delivery(s, "C", "evt-1")
    assert b.start() == "claimed"
    assert c.start() == "waiting"
    assert isinstance(s.db.resume, object)
    assert b.finish() == "applied"
    assert c.finish() == "skipped"
    assert teaching.ledger_counts(s).to_dict() == {"evt-1": 1}
    assert "waits for B's transaction" in set(s.transcript["result"])


def test_concurrent_delivery_proceeds_when_the_first_rolls_back():
    s = teaching.Script()
    b, c = teaching.Delivery(s, "B", "evt-1"), teaching.Delivery(s, "C", "evt-1")
    b.start()
    assert c.start() == "waiting"
    b.crash()
    assert c.finish() == "applied"
    assert teaching.ledger_counts(s).to_dict() == {"evt-1": 1}


def test_crash_after_the_marker_leaves_the_event_eligible():
    s = teaching.Script()
    first = teaching.Delivery(s, "A", "evt-1")
    assert first.start() == "claimed"
    first.crash()
    assert s.table("processed_events").empty
    assert teaching.deliver(s, "A", "evt-1") == "applied"  # A reconnects
    assert teaching.ledger_counts(s).to_dict() == {"evt-1": 1}


def test_same_id_other_payload_is_rejected():
    s = teaching.Script()
    assert teaching.deliver(s, "A", "evt-1", payload='{"amount_cents": 1000}') == "applied"
    assert teaching.deliver(s, "A", "evt-1", payload='{"amount_cents": 9999}') == "rejected"
    assert teaching.ledger_counts(s).to_dict() == {"evt-1": 1}


def test_blocked_is_reported_in_the_transcript():
    s = teaching.Script()
    s.begin("A")
    assert s.sql("A", "insert_dedup_marker", event_id="e", payload_hash="h") == [("e",)]
    s.begin("B")
    assert isinstance(s.sql("B", "insert_dedup_marker", event_id="e", payload_hash="h"), Blocked)
    s.commit("A")
    assert s.resume("B") == []


def test_retention_shorter_than_the_window_lets_duplicates_through():
    safe = teaching.retention_experiment(60.0, window=60.0, events=80)
    assert not safe["duplicate"].any()
    short = teaching.retention_experiment(10.0, window=60.0, events=80)
    assert short["duplicate"].mean() > 0.5
    # a duplicate needs a redelivery later than the retention (plus at most one purge period)
    assert (short.loc[short["duplicate"], "delay"] > 10.0).all()
    curve = teaching.retention_curve([0, 20, 40, 60], window=60.0, events=80)
    assert list(curve["duplicate_share"]) == sorted(curve["duplicate_share"], reverse=True)
    ax = teaching.plot_retention(curve, 60.0)
    assert ax.get_xlabel().startswith("dedup marker retention")
    with pytest.raises(ConfigError, match="retention_experiment"):
        teaching.retention_experiment(-1.0)


def test_redelivery_puzzle_ends_with_one_ledger_row():
    counts, transcript = teaching.redelivery_puzzle()
    assert counts.to_dict() == {"evt-7": 1}
    assert "(crash)" in set(transcript["statement"])


# ---- contention ----------------------------------------------------------------------------------


def test_claim_contention_shows_the_race_the_herd_and_the_convoy():
    frame = teaching.claim_contention(workers=(16,), jobs=120, gap=0.05)
    by = frame.set_index("claim")
    assert by.loc["read_then_write", "double_claims"] > 0
    assert (by.drop("read_then_write")["double_claims"] == 0).all()
    assert by.loc["conditional_update", "lost_claims"] > 0
    assert (
        by.loc["skip_locked", "lost_claims"] == 0
        and by.loc["skip_locked", "lock_wait_seconds"] == 0
    )
    assert (
        by.loc["select_for_update", "lock_wait_seconds"]
        > by.drop("select_for_update")["lock_wait_seconds"].max()
    )
    axes = teaching.plot_contention(frame)
    assert len(axes) == 3 and len([line for line in axes[0].lines if line.get_gid() == "line"]) == 4
    # lock waits are summed over workers (02's text says "worker-seconds"): the axis says so too
    assert [ax.get_ylabel() for ax in axes] == [
        "time to drain the batch (s)",
        "worker-seconds waiting on row locks",
        "claims that lost the race (no row)",
    ]


# ---- runs compared -------------------------------------------------------------------------------


def test_compare_logs_of_identical_runs():
    a = sim.run("gc-pause-zombie")
    b = sim.run("gc-pause-zombie")
    frame = teaching.compare_logs(a, b)
    assert frame["equal"].all()
    other = sim.run(
        "gc-pause-zombie", seed=2, **{"faults.pauses": [{"worker": 0, "at": 3.0, "duration": 10.0}]}
    )
    assert not teaching.compare_logs(a, other)["equal"].all()


def test_followed_job_prefers_a_hand_over():
    after_psp = {
        "faults.crash_points": [{"point": "after_psp", "probability": 0.3, "limit": 5}],
        "workload.duplicate_delivery": 0.0,
        "expect": [],
    }
    run = sim.run("duplicate-delivery", seed=1, **after_psp)
    charged = [int(j) for j in run.jobs.query("external_effects > 1")["job"]]
    holders = run.leases.groupby("job")["worker"].nunique()
    assert (
        holders[charged[0]] == 1
    )  # the first one is re-claimed by its own worker after the restart
    job = teaching.followed_job(run, charged)
    assert holders[job] == 2 and job == next(j for j in charged if holders[j] > 1)
    assert teaching.followed_job(run, [charged[0]]) == charged[0]
    with pytest.raises(ConfigError):
        teaching.followed_job(run, [])


def test_sql_frame_needs_postgres():
    with pytest.raises(ConfigError, match="needs a PostgresBackend"):
        teaching.sql_frame(sim.make_backend("memory"), "SELECT 1")


# ---- exercises -----------------------------------------------------------------------------------


def test_every_checker_says_not_answered_for_none():
    lease_run = sim.run(teaching.one_job(crash_at=12.0))
    verdicts = [
        teaching.check_lease_end(None, lease_run),
        teaching.check_lock_recovery(None, lease_run),
        teaching.check_safe_claims(None),
        teaching.check_convoy(None, pd.DataFrame()),
        teaching.check_pause_ttl(None),
        teaching.check_ttl_quantile(None),
        teaching.check_recovery_prediction(
            None, ttl=30, heartbeat_interval=10, watcher_interval=30, poll_interval=2
        ),
        teaching.check_watcher_interval(
            None, target=40, ttl=30, heartbeat_interval=10, poll_interval=2
        ),
        teaching.check_ledger_rows(None),
        teaching.check_retention(None),
        teaching.check_smallest_ttl(None, None, heartbeat_interval=2, watcher_interval=2),
        teaching.check_fastest_peer(None, pd.DataFrame()),
        teaching.check_duplicating_peers(None, pd.DataFrame()),
        teaching.check_stuck_query(None, None, {}),
    ]
    for verdict in verdicts:
        assert verdict.ok is None and not verdict
        assert verdict._repr_markdown_().startswith("**Not answered yet.**")


def test_check_lease_end_and_lock_recovery():
    lease_run = sim.run(teaching.one_job(crash_at=12.0))
    until = float(lease_run.leases["until"].iloc[0])
    assert teaching.check_lease_end(until + 0.3, lease_run).ok is True
    assert (
        teaching.check_lease_end(12.0 + 15.0, lease_run).ok is False
    )  # crash time + TTL is the classic mistake
    lock_run = sim.run(teaching.one_job(crash_at=12.0, lock=True))
    assert teaching.check_lock_recovery("never", lock_run).ok is True
    assert teaching.check_lock_recovery(math.inf, lock_run).ok is True
    assert teaching.check_lock_recovery(30, lock_run).ok is False
    with pytest.raises(ConfigError):
        teaching.check_lock_recovery("never", lease_run)


def test_check_safe_claims():
    assert (
        teaching.check_safe_claims({"conditional_update", "skip_locked", "select_for_update"}).ok
        is True
    )
    assert teaching.check_safe_claims({"conditional_update"}).ok is False
    assert (
        teaching.check_safe_claims(
            ["read_then_write", "conditional_update", "skip_locked", "select_for_update"]
        ).ok
        is False
    )
    assert "not a claim strategy" in teaching.check_safe_claims({"optimistic"}).message
    # how a reader may type the names: case, spaces and hyphens do not matter
    assert (
        teaching.check_safe_claims({"Conditional_Update", "skip locked", " select-for-update"}).ok
        is True
    )


def test_check_convoy():
    frame = pd.DataFrame(
        {"claim": ["skip_locked", "select_for_update"], "lock_wait_seconds": [0.0, 12.0]}
    )
    assert teaching.check_convoy("select_for_update", frame).ok is True
    assert teaching.check_convoy("skip_locked", frame).ok is False
    assert teaching.check_convoy("SELECT FOR UPDATE ", frame).ok is True
    unknown = teaching.check_convoy("for_update_nowait", frame)
    assert (
        unknown.ok is False
        and "not a strategy" in unknown.message
        and "waited 0" not in unknown.message
    )


def test_pause_survival_threshold_is_pause_plus_one_heartbeat():
    assert teaching.pause_survival(18.0, heartbeat_interval=5.0, pause=12.0)
    assert not teaching.pause_survival(17.0, heartbeat_interval=5.0, pause=12.0)
    assert teaching.check_pause_ttl(18).ok is True
    assert teaching.check_pause_ttl(17).ok is False
    assert teaching.check_pause_ttl(25).ok is False  # works, but wastefully long
    assert teaching.check_pause_ttl(4).ok is False
    assert teaching.check_pause_ttl("18").ok is True
    assert teaching.check_pause_ttl("18 s").ok is True  # the unit the question uses is read


@pytest.mark.parametrize("answer", [17.5, 18.5, 18.000001, "17.5", math.inf])
def test_check_pause_ttl_wants_whole_seconds(answer):
    verdict = teaching.check_pause_ttl(answer)
    assert (
        verdict.ok is False
        and "whole seconds" in verdict.message
        and "not a whole number" in verdict.message
    )


@pytest.mark.parametrize("answer", ["eighteen", "18 ms", True, math.nan])
def test_check_pause_ttl_says_when_the_answer_is_no_number(answer):
    verdict = teaching.check_pause_ttl(answer)
    assert (
        verdict.ok is False
        and "whole number of seconds" in verdict.message
        and "not a number" in verdict.message
    )


def test_check_ttl_quantile_judges_the_tail_not_a_sample_maximum():
    """03's exercise 2: the smallest whole-second TTL with at most 1 false expiry in 10,000 leases
    of no-heartbeat-long-jobs. The answer comes from the distribution's tail, never from the longest
    job of one run; the seeds' runs are reported beside it and must not contradict it."""
    from sim.theory.closed_forms import sum_quantile, sum_survival
    from sim.theory.stats import wilson_interval

    truth, scenario = teaching.ttl_for_quantile(1e-4)
    w = scenario.workload
    assert truth == math.ceil(sum_quantile(w.processing, w.psp_call, 1 - 1e-4, 4 * 0.002)) == 418
    right = teaching.check_ttl_quantile(truth, target=1e-4, seeds=(1, 2, 3))
    assert right.ok is True and "No finite TTL makes a false expiry impossible" in right.message
    runs = [sim.run(scenario, seed=s, **{"policy.lease_ttl": float(truth)}) for s in (1, 2, 3)]
    leases, lapsed = (
        sum(int(r.summary["leases"]) for r in runs),
        sum(int(r.summary["false_expiries"]) for r in runs),
    )
    low, high = wilson_interval(lapsed, leases, 0.95)
    assert (
        f"On seeds 1, 2, 3 at TTL {truth:g} s: {lapsed} false expiries in {leases} leases (95% "
        f"interval {teaching.percent(low)} to {teaching.percent(high)}"
    ) in right.message
    # one second less misses the target; so do the old exercise's answers (a multiple of a sample
    # maximum)
    short = teaching.check_ttl_quantile(truth - 1, target=1e-4, seeds=(1,))
    assert (
        short.ok is False
        and teaching.percent(sum_survival(w.processing, w.psp_call, truth - 1, 0.008))
        in short.message
    )
    longest = float((runs[0].leases["released_at"] - runs[0].leases["start"]).max())
    assert teaching.check_ttl_quantile(math.ceil(longest), target=1e-4, seeds=(1,)).ok is False
    wasteful = teaching.check_ttl_quantile(600, target=1e-4, seeds=(1,))
    assert wasteful.ok is False and f"a TTL of {truth:g} s already does" in wasteful.message
    for bad in (17.5, float("inf"), "soon", 0):
        assert teaching.check_ttl_quantile(bad, seeds=(1,)).ok is False


def test_the_no_heartbeat_tail_predicts_the_simulated_false_expiries():
    """The checker's model: a first lease lapses iff processing + PSP call outlast the TTL. At TTL
    60 s (about 6% of jobs) 8 seeds' first leases agree with it within a 99% interval."""
    from sim.theory.closed_forms import sum_survival
    from sim.theory.stats import wilson_interval

    scenario = sim.preset("no-heartbeat-long-jobs")
    w = scenario.workload
    first = pd.concat(
        [
            sim.run(scenario, seed=s, **{"policy.lease_ttl": 60.0}).leases.groupby("job").head(1)
            for s in range(1, 9)
        ]
    )
    low, high = wilson_interval(int(first["false_expiry"].sum()), len(first), 0.99)
    assert len(first) >= 400 and low <= sum_survival(w.processing, w.psp_call, 60.0, 0.008) <= high


def test_check_recovery_prediction_and_watcher_interval():
    kw = dict(ttl=30.0, heartbeat_interval=10.0, poll_interval=2.0)
    assert teaching.check_recovery_prediction(41, watcher_interval=30.0, **kw).ok is True
    assert teaching.check_recovery_prediction(30, watcher_interval=30.0, **kw).ok is False
    assert teaching.check_recovery_prediction(26, watcher_interval=None, **kw).ok is True
    # L - h/2 + P/2 = 26, so W/2 <= 10 for a 36 s target: W = 20
    assert teaching.check_watcher_interval(20, target=36.0, **kw).ok is True
    assert teaching.check_watcher_interval(30, target=36.0, **kw).ok is False
    assert teaching.check_watcher_interval(5, target=36.0, **kw).ok is False
    # a target below L - h/2 + P/2 cannot be met by any watcher: only "none" is right
    assert teaching.check_watcher_interval(10, target=20.0, **kw).ok is False
    assert teaching.check_watcher_interval("none", target=20.0, **kw).ok is True


def test_check_ledger_rows_and_retention():
    assert teaching.check_ledger_rows(1).ok is True
    assert teaching.check_ledger_rows(2).ok is False
    assert teaching.check_retention(60, events=80).ok is True
    assert teaching.check_retention(30, events=80).ok is False
    assert teaching.check_retention(500, events=80).ok is False
    # just under the window: no duplicate in the sample, but a late redelivery can still get through
    lucky = teaching.check_retention(58)
    assert not teaching.retention_experiment(58.0)["duplicate"].any()
    assert lucky.ok is False and "worst case" in lucky.message
    # "the shortest": a retention far above the window is not it
    assert teaching.check_retention(120).ok is False
    assert teaching.check_retention(62).ok is True  # within one purge interval of the window
    assert teaching.check_retention(float("inf")).ok is False


def test_check_smallest_ttl_and_advice_frame():
    advice = sim.advise("sample", verify=False)
    h, w = advice.heartbeat_interval, advice.watcher_interval
    table = advice.candidates
    feasible = table[
        (table["heartbeat_interval"] == h) & (table["watcher_interval"] == w) & table["feasible"]
    ]
    smallest = float(feasible["ttl"].min())
    assert (
        teaching.check_smallest_ttl(smallest, advice, heartbeat_interval=h, watcher_interval=w).ok
        is True
    )
    bigger = float(feasible["ttl"].sort_values().iloc[1])
    assert (
        teaching.check_smallest_ttl(bigger, advice, heartbeat_interval=h, watcher_interval=w).ok
        is False
    )
    # 06's exercise (heartbeat every 10 s): a TTL under the target but shorter than two heartbeat
    # intervals (plus latency) is not feasible, and the verdict says which rule it breaks
    slow = table[
        (table["heartbeat_interval"] == 10.0) & (table["watcher_interval"] == w)
    ].set_index("ttl")
    assert (
        slow.loc[20.0, "predicted_false_expiry"] < advice.target_false_expiry
        and not slow.loc[20.0, "feasible"]
    )
    near = teaching.check_smallest_ttl(20, advice, heartbeat_interval=10.0, watcher_interval=w)
    assert near.ok is False and "heartbeat intervals" in near.message and "20.004 s" in near.message
    right = float(slow.index[slow["feasible"]].min())
    assert (
        teaching.check_smallest_ttl(right, advice, heartbeat_interval=10.0, watcher_interval=w).ok
        is True
    )
    frame = teaching.advice_frame(advice, heartbeats=[None, h], ttls=[5, 10, 30])
    assert set(frame["policy.heartbeat_interval"]) == {"none", f"{h:g} s"}
    assert set(frame["policy.lease_ttl"]) <= {5.0, 10.0, 30.0}
    # every risk as predicted (none rounded to 0), with its 95% upper bound for the whisker
    kept = table[
        (table["watcher_interval"] == w)
        & table["ttl"].isin([5.0, 10.0, 30.0])
        & (table["heartbeat_interval"].isna() | (table["heartbeat_interval"] == h))
    ]
    assert sorted(frame["predicted_false_expiry_mean"]) == sorted(kept["predicted_false_expiry"])
    assert sorted(frame["predicted_false_expiry_ci_high"]) == sorted(
        kept["predicted_false_expiry_high"]
    )
    assert (frame["predicted_false_expiry_ci_low"] == frame["predicted_false_expiry_mean"]).all()
    with pytest.raises(ConfigError, match="watcher_interval"):
        teaching.advice_frame(advice, watcher_interval=12345)


def test_advice_frame_charts_the_predictions_under_their_own_names():
    """06's trade-off chart plots the advisor's predicted false-expiry probability per job, its
    predicted mean recovery and its heartbeat + watcher load: the axes must say so, not borrow
    the labels of simulated rates (false expiries per lease, every DB statement)."""
    advice = sim.advise("sample", verify=False)
    h = advice.heartbeat_interval
    frame = teaching.advice_frame(advice, heartbeats=[None, h], ttls=[5, 10, 30])
    table = advice.candidates
    kept = table[
        (table["watcher_interval"] == advice.watcher_interval)
        & table["ttl"].isin([5.0, 10.0, 30.0])
        & (table["heartbeat_interval"].isna() | (table["heartbeat_interval"] == h))
    ]
    assert sorted(frame["predicted_recovery_mean_mean"]) == sorted(kept["predicted_recovery_mean"])
    assert sorted(frame["predicted_db_load_mean"]) == sorted(
        kept["db_load"]
    )  # heartbeats + watcher ticks only
    assert not {
        "false_expiry_rate_mean",
        "recovery_latency_mean_mean",
        "statements_per_s_mean",
    } & set(frame.columns)
    ax = plots.tradeoff(frame.drop(columns="feasible"), **teaching.ADVICE_AXES)
    assert ax.get_xlabel().startswith("predicted false-expiry probability (% of jobs)")
    assert ax.get_ylabel().startswith("predicted mean recovery latency (s)")
    assert (
        ax.figure.axes[-1]
        .get_ylabel()
        .startswith("predicted heartbeat + watcher load (statements/s)")
    )
    with pytest.raises(ConfigError, match="false_expiry_rate: the frame has neither"):
        plots.tradeoff(frame)  # the simulated-rate defaults do not silently relabel predictions


def _peer_frame():
    return pd.DataFrame(
        {
            "peer": ["river", "sqs-visibility", "solid-queue"],
            "label": ["River", "SQS", "Solid Queue"],
            "recovery_latency_mean_mean": [3600.0, 40.0, np.nan],
            "double_processed_jobs_mean": [0.0, 3.0, 0.0],
        }
    )


def test_check_peers():
    frame = _peer_frame()
    assert teaching.check_fastest_peer("SQS", frame).ok is True
    assert teaching.check_fastest_peer("sqs-visibility", frame).ok is True
    assert teaching.check_fastest_peer("River", frame).ok is False
    assert teaching.check_fastest_peer("Kafka", frame).ok is False
    assert teaching.check_duplicating_peers({"SQS"}, frame).ok is True
    assert teaching.check_duplicating_peers("sqs", frame).ok is True
    assert teaching.check_duplicating_peers({"SQS", "River"}, frame).ok is False


def test_claim_shows_true_claims_and_fails_false_ones(capsys):
    teaching.claim(True, "a checked sentence")
    assert "a checked sentence" in capsys.readouterr().out
    with pytest.raises(AssertionError, match="does not show: nope"):
        teaching.claim(False, "nope")


def test_formatting():
    assert teaching.seconds(12.345) == "12.3 s"
    assert teaching.seconds(600) == "10 min"
    assert teaching.seconds(14400) == "4 h"
    assert teaching.seconds(float("nan")) == "never"
    assert teaching.percent(0.0123) == "1.2%"
    assert teaching.percent(0) == "0%"
    assert [teaching.times(n) for n in (1, 2, np.int64(2), 3, 8.0, 0.5)] == [
        "once",
        "twice",
        "twice",
        "3 times",
        "8 times",
        "0.5 times",
    ]


def test_the_zombie_of_03_was_charged_twice_in_words():
    """03 says how often the zombie's payment was charged with teaching.times: 'twice',
    not '2 times'."""
    gc = sim.run("gc-pause-zombie", seed=1)
    charges = gc.events.query("kind == 'psp_charge' and detail == 'new'").groupby("job").size()
    assert charges.max() == 2 and teaching.times(charges.max()) == "twice"


# ---- coverage ------------------------------------------------------------------------------------


def _notebook(path, cells):
    path.write_text(
        json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5})
    )


def test_coverage_finds_tagged_cells_and_reports_gaps(tmp_path):
    _notebook(
        tmp_path / "01-a.ipynb",
        [
            {
                "cell_type": "markdown",
                "metadata": {},
                "source": ["# A\n", "## Crash: lock vs lease\n"],
            },
            {
                "cell_type": "code",
                "metadata": {"tags": ["confused:lease-vs-lock", "checklist:5"]},
                "source": [],
                "outputs": [],
                "execution_count": None,
            },
        ],
    )
    frame = teaching.coverage(tmp_path)
    shown = frame[frame["notebook"] != ""]
    assert set(shown["tag"]) == {"confused:lease-vs-lock", "checklist:5"}
    assert set(shown["section"]) == {"Crash: lock vs lease"}
    missing = set(frame.loc[frame["notebook"] == "", "tag"])
    wanted = set(teaching.REQUIRED_TAGS) | set(teaching.DEDUP_TAGS) | set(teaching.CLOCKS_TAGS)
    assert missing == wanted - {
        "confused:lease-vs-lock",
        "checklist:5",
    }
    text = teaching.coverage_markdown(frame)
    assert "[01-a.ipynb](01-a.ipynb) (Crash: lock vs lease)" in text
    assert "**not shown anywhere**" in text


def test_link_html_points_notebook_links_at_pages(tmp_path):
    page = tmp_path / "00-index.html"
    page.write_text(
        '<a href="01-what-is-a-lease.ipynb">01</a> '
        '<a href="04-stuck-watcher-and-recovery.ipynb#Takeaway"></a> '
        '<a href="https://example.org/x.ipynb">keep</a>'
    )
    (tmp_path / "plain.html").write_text("<p>no links</p>")
    assert link_html(tmp_path) == [page]
    text = page.read_text()
    assert 'href="01-what-is-a-lease.html"' in text
    assert 'href="04-stuck-watcher-and-recovery.html#Takeaway"' in text
    assert 'href="https://example.org/x.ipynb"' in text


def test_false_expiry_table_and_plot():
    scenario = teaching.stalling_queue(jobs=120)
    result = sim.sweep(
        scenario,
        {"policy.lease_ttl": [5.0, 320.0], "policy.heartbeat": [False, True]},
        replications=2,
        executor="serial",
        progress=False,
        metrics=["leases", "false_expiries"],
    )
    table = teaching.false_expiry_table(result.runs)
    assert len(table) == 4 and (table["leases"] > 0).all()
    assert ((table["low"] <= table["rate"]) & (table["rate"] <= table["high"])).all()
    short = table.set_index(["policy.heartbeat", "policy.lease_ttl"])
    assert short.loc[(False, 5.0), "rate"] > short.loc[(True, 5.0), "rate"]
    ax = teaching.plot_false_expiry(table, scenario)
    assert len([line for line in ax.lines if line.get_gid() == "theory"]) == 2
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    assert ax.get_xlabel() == "lease TTL (s)" and ax.get_ylabel().startswith(
        "false-expiry rate (share of leases"
    )


def test_duration_summary_and_plot():
    values = np.array([1.0, 2.0, 3.0, 100.0])
    summary = teaching.duration_summary(values)
    assert summary["jobs"] == 4 and summary["max"] == 100.0 and summary["median"] == 2.5
    ax = teaching.plot_durations(values, ttl=30.0, heartbeat_interval=10.0)
    texts = [t.get_text() for t in ax.texts]
    assert (
        "TTL 30 s" in texts
        and "heartbeat 10 s" in texts
        and any(t.startswith("max 100") for t in texts)
    )


def test_executor_follows_fast_mode():
    assert teaching.executor(True) == "serial"
    assert teaching.executor(False) is None
    teaching.release_workers()  # no pool started: nothing to stop, no error
