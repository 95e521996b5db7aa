"""Peer presets (River, Oban, graphile-worker, pg-boss, Solid Queue, SQS, BullMQ, Temporal, Celery
on Redis and SQS, Hatchet, procrastinate) and their comparison."""

from __future__ import annotations

import itertools
from concurrent.futures import ProcessPoolExecutor
from importlib import resources

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import sim  # noqa: E402
from sim import plots  # noqa: E402
from sim.comparisons.peers import (  # noqa: E402
    METRICS,
    PEERS,
    SETTINGS,
    compare_peers,
    recovery_window,
    settings_table,
)
from sim.errors import ConfigError  # noqa: E402
from sim.results import owner_crashes  # noqa: E402

SHARED = ("workload", "faults", "horizon")
FENCED = {"solid-queue", "bullmq", "temporal", "hatchet"}


@pytest.fixture(scope="module")
def frame():
    with ProcessPoolExecutor(max_workers=2) as executor:  # the runs are independent
        return compare_peers(seeds=range(1, 3), executor=executor)


@pytest.fixture(scope="module")
def sqs():
    return sim.run("sqs-visibility", seed=1)


@pytest.mark.parametrize("name", list(PEERS))
def test_peer_preset_documents_what_it_approximates(name):
    text = (resources.files("sim.scenario") / "presets" / f"{name}.toml").read_text(
        encoding="utf-8"
    )
    assert text.startswith("#")
    header = text.split("\nname = ")[0]
    assert "Follows:" in header  # the peer version the preset describes
    assert "Approximates:" in header and "Cannot express:" in header and "fair comparison" in header
    scenario = sim.preset(name)
    assert scenario.name == name and scenario.description
    # Solid Queue (v1.5.0+, #761), BullMQ (lock token), Temporal (task token of the attempt) and
    # Hatchet (retry count) refuse a finish by a worker that no longer holds the job
    assert scenario.policy.fencing is (name in FENCED)
    assert not scenario.policy.dedup and not scenario.policy.idempotency_key


def test_peers_share_one_workload_and_differ_in_recovery_settings_only():
    presets = [sim.preset(name) for name in PEERS]
    first = presets[0]
    for other in presets[1:]:
        for section in SHARED:
            assert getattr(other, section) == getattr(first, section), (other.name, section)
        assert (other.policy.workers, other.policy.poll_interval) == (
            first.policy.workers,
            first.policy.poll_interval,
        )
    # the horizon outlasts the longest recovery window after the last arrival
    arrivals_end = first.workload.jobs / first.workload.rate
    for scenario in presets:
        assert arrivals_end * 1.5 + recovery_window(scenario.policy) < scenario.horizon, (
            scenario.name
        )
    # the documented defaults
    ttl = {s.name: s.policy.lease_ttl for s in presets}
    assert ttl == {
        "river": 3600,
        "oban-lifeline": 3600,
        "graphile-worker": 4 * 3600,
        "pg-boss": 900,
        "solid-queue": 300,
        "sqs-visibility": 30,
        "bullmq": 30,
        "temporal": 60,
        "celery-redis": 3600,
        "celery-sqs": 1800,
        "hatchet": 1e9,  # no job lease: process liveness
        "procrastinate": 1e9,
    }
    assert {s.name for s in presets if s.policy.heartbeat} == {"solid-queue", "bullmq"}
    assert sim.preset("solid-queue").policy.watcher_action == "dead"


def test_settings_table_shows_intervals_of_mechanisms_a_queue_does_not_run_as_off():
    table = settings_table()
    assert list(table.index) == list(PEERS.values()) and tuple(table.columns) == SETTINGS
    for name, label in PEERS.items():
        policy, row = sim.preset(name).policy, table.loc[label]
        assert row["lease_ttl"] == policy.lease_ttl and row["max_attempts"] == policy.max_attempts
        assert row["heartbeat_interval"] == (
            policy.heartbeat_interval if policy.heartbeat else "off"
        ), label
        assert row["watcher_interval"] == (policy.watcher_interval if policy.watcher else "off"), (
            label
        )
        assert row["watcher_action"] == (policy.watcher_action if policy.watcher else "\u2014"), (
            label
        )
    # the defaults a Policy still holds never show: SQS runs neither, the others no heartbeat but
    # Solid Queue
    assert table.loc[
        "SQS", ["heartbeat_interval", "watcher_interval", "watcher_action"]
    ].tolist() == ["off", "off", "\u2014"]
    assert (
        table.loc["River", "heartbeat_interval"] == "off"
        and table.loc["River", "watcher_interval"] == 30.0
    )
    assert table.loc["Solid Queue", "heartbeat_interval"] == 60.0
    assert list(settings_table(["sqs-visibility"]).index) == ["SQS"]


@pytest.mark.slow  # every peer, simulated: make test only
def test_one_row_per_peer_with_confidence_intervals(frame):
    assert list(frame["peer"]) == list(PEERS)
    assert list(frame["label"]) == list(PEERS.values())
    assert (frame["n"] == 2).all()
    for metric in METRICS:
        assert {f"{metric}_mean", f"{metric}_ci_low", f"{metric}_ci_high"} <= set(frame.columns)
    runs = frame.attrs["runs"]
    assert len(runs) == 2 * len(PEERS)
    river = runs[runs["peer"] == "river"]
    row = frame.set_index("peer").loc["river"]
    assert row["recovery_latency_mean_mean"] == pytest.approx(river["recovery_latency_mean"].mean())
    assert (
        row["recovery_latency_mean_ci_low"]
        <= row["recovery_latency_mean_mean"]
        <= row["recovery_latency_mean_ci_high"]
    )
    assert (frame["crashed_jobs_mean"] > 2).all()  # every peer meets crashed jobs


@pytest.mark.slow  # every peer, simulated: make test only
def test_documented_facts_show_up(frame):
    rows = frame.set_index("peer")
    mean = rows["recovery_latency_mean_mean"]
    # a 1 h rescue window (River, Oban) recovers crashed jobs far slower than pg-boss's 15 min
    # expiry
    for slow in ("river", "oban-lifeline"):
        assert (
            rows.loc[slow, "recovery_latency_mean_ci_low"]
            > 3 * rows.loc["pg-boss", "recovery_latency_mean_ci_high"]
        )
        assert 3600 <= mean[slow] < 3600 + 120
    assert 900 <= mean["pg-boss"] < 900 + 120
    assert mean["graphile-worker"] > 4 * 3600 - 60  # locked_at stale after 4 h
    # Solid Queue detects a crash within minutes but fails the job instead of running it again
    assert rows.loc["solid-queue", "unrecovered_share_mean"] == 1.0
    assert np.isnan(mean["solid-queue"])
    assert 300 - 60 < rows.loc["solid-queue", "detection_latency_mean_mean"] < 300 + 300 + 60
    assert rows.loc["solid-queue", "dead_mean"] == rows.loc["solid-queue", "crashed_jobs_mean"]
    # SQS: a 30 s visibility timeout without extension recovers in seconds, but processes long jobs
    # twice
    assert mean["sqs-visibility"] < 60
    assert rows.loc["sqs-visibility", "double_processed_jobs_mean"] > 0
    assert rows.loc["sqs-visibility", "duplicate_db_effects_mean"] > 0
    # execution timeouts (Temporal's StartToClose, Hatchet's step timeout, 60 s each) cut the
    # slowest PSP calls short: Temporal retries them beside the running original, Hatchet (no
    # retries by default) fails them; both refuse the late completion (fenced)
    for timed in ("temporal", "hatchet"):
        assert rows.loc[timed, "false_expiries_mean"] > 0
        assert rows.loc[timed, "duplicate_db_effects_mean"] == 0
    assert rows.loc["temporal", "double_processed_jobs_mean"] > 0
    assert rows.loc["hatchet", "dead_mean"] > 0
    others = rows.drop(index=["sqs-visibility", "temporal", "hatchet"])
    assert (others["false_expiries_mean"] == 0).all() and (
        others["duplicate_db_effects_mean"] == 0
    ).all()
    # issue 25's peers: BullMQ's 30 s lock and two-phase check every 30 s; Temporal's 60 s
    # StartToClose and a 1 s retry; Celery's 1 h (Redis, swept every ~100 s) and 30 min (SQS)
    # visibility timeouts; Hatchet's 30 s process stale age; procrastinate's 30 s stale age and a
    # rescue task every 10 min
    assert 30 <= mean["bullmq"] < 30 + 2 * 30 + 10
    assert 30 < mean["temporal"] < 60 + 5
    assert 3600 <= mean["celery-redis"] < 3600 + 100 + 60
    assert 1800 - 120 < mean["celery-sqs"] < 1800 + 10
    assert 30 - 4 < mean["hatchet"] < 30 + 10
    assert 30 - 10 < mean["procrastinate"] < 30 + 600 + 60
    # crashes after the PSP call charge again everywhere a crashed job is re-run (no idempotency
    # key)
    assert (rows.drop(index="solid-queue")["duplicate_external_effects_mean"] > 0).all()


def test_sqs_processes_exactly_the_jobs_longer_than_the_visibility_timeout_twice(sqs):
    leases = sqs.leases
    held = leases["released_at"] - leases["start"]
    expired = leases[leases["false_expiry"]]
    assert len(expired) > 0
    assert (held[leases["false_expiry"]] > 30).all()
    # every job whose first lease ran past 30 s (and was not crashed) was leased again
    first = leases.groupby("job").head(1)
    long = first[(first["released_at"] - first["start"] > 30.5) & (first["outcome"] != "crashed")]
    assert len(long) > 0
    per_job = leases.groupby("job").size()
    assert (per_job.loc[long["job"]] >= 2).all()
    report = sqs.check()
    assert report.ok and report.counts()["duplicate_db_effect"] > 0


def test_owner_crashes_leaves_out_crashed_zombies(sqs):
    everything, owners = sqs.recoveries, owner_crashes(sqs)
    assert 0 < len(owners) <= len(everything)
    claims = sqs.events[sqs.events["kind"] == "claim"]
    for crash in owners.itertuples():
        before = claims[(claims["job"] == crash.job) & (claims["t"] <= crash.crash_at)]
        assert before["worker"].iloc[-1] == crash.worker


def test_compare_peers_with_overrides_and_bad_names():
    small = compare_peers(
        ["pg-boss", "sqs-visibility"], seeds=[1], **{"workload.jobs": 100, "horizon": 2400.0}
    )
    assert list(small["peer"]) == ["pg-boss", "sqs-visibility"] and (small["n"] == 1).all()
    assert small.attrs["runs"]["seed"].tolist() == [1, 1]
    with pytest.raises(ConfigError, match="no such preset"):
        compare_peers(["rivr"], seeds=[1])


@pytest.mark.slow  # every peer, simulated: make test only
def test_peer_comparison_figure(frame):
    ax = plots.peer_comparison(frame)
    bars = [p for p in ax.patches if p.get_gid() == "bar"]
    recovered = frame["recovery_latency_mean_mean"].notna()
    assert len(bars) == recovered.sum() == len(PEERS) - 1
    assert [t for t in ax.texts if t.get_gid() == "no-bar"][0].get_text().startswith("never re-run")
    cells = [t for t in ax.texts if t.get_gid() == "cell-text"]
    assert len(cells) == len(PEERS) * len(plots.PEER_COLUMNS)
    headers = [t for t in ax.texts if t.get_gid() == "column-header"]
    assert [t.get_text() for t in headers][-2:] == [
        "DB load\nall stmt/s",
        "heartbeat +\nwatcher\nstmt/s",
    ]
    # rendered: no header overlaps another or a cell, and all fit in the figure
    ax.figure.canvas.draw()
    renderer = ax.figure.canvas.get_renderer()
    boxes = [t.get_window_extent(renderer) for t in headers + cells]
    assert not [
        (a, b)
        for a, b in itertools.combinations(range(len(boxes)), 2)
        if boxes[a].overlaps(boxes[b])
    ]
    figure = ax.figure.bbox
    assert all(
        figure.x0 <= b.x0 and b.x1 <= figure.x1 and figure.y0 <= b.y0 and b.y1 <= figure.y1
        for b in boxes
    )
    assert [t.get_text().split("\n")[0] for t in ax.get_yticklabels()] == list(PEERS.values())
    assert ax.get_xscale() == "log" and "log scale" in ax.get_xlabel()
    assert "1 h" in [t.get_text() for t in ax.get_xticklabels()]
    river = bars[0]
    assert river.get_x() + river.get_width() == pytest.approx(
        frame["recovery_latency_mean_mean"].iloc[0]
    )
    assert ax.get_title(loc="left").startswith("Peer queues' default recovery settings")
    assert "\n2 seeds per peer;" in ax.get_title(loc="left")
    assert "\n1 seed per peer;" in plots.peer_comparison(frame.assign(n=1)).get_title(loc="left")
    # watcher requeues / claim takes expired / job failed / a dead process's jobs requeued
    assert len(ax.get_legend().get_texts()) == 4
    plt.close("all")
    with pytest.raises(ConfigError):
        plots.peer_comparison(frame.drop(columns=["recovery"]))


@pytest.mark.slow  # every peer, simulated: make test only
def test_only_a_crash_on_a_retry_can_outlast_the_horizon():
    """07 says so: a job whose first attempt crashes is recovered before the run ends (the horizon
    outlasts every recovery window after the last arrival); only a second crash, on the retry
    hours later, can still be waiting at the end (graphile-worker, seed 1)."""
    for name in PEERS:
        run = sim.run(name, seed=1)
        if run.scenario.policy.watcher_action == "dead":
            continue  # Solid Queue fails crashed jobs instead of re-running them
        crashed = run.leases[run.leases["end_reason"] == "crashed"]
        waiting = owner_crashes(run)
        waiting = waiting[waiting["latency"].isna()]
        for crash in waiting.itertuples():
            lease = crashed[
                (crashed["job"] == crash.job)
                & (crashed["worker"] == crash.worker)
                & np.isclose(crashed["end"], crash.crash_at)
            ]
            assert len(lease) == 1 and int(lease["attempt"].iloc[0]) >= 2, (name, crash)
