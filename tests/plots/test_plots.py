"""The lease timeline: what it draws, counted through the artists' gids."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

import sim  # noqa: E402
from sim.errors import ConfigError  # noqa: E402
from sim.plots import END_STYLES, auto_window, lease_timeline  # noqa: E402


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


@pytest.fixture(scope="module")
def zombie():
    return sim.run("gc-pause-zombie")


@pytest.fixture(scope="module")
def crashes():
    return sim.run("crash-recovery", **{"workload.jobs": 50, "horizon": 600})


@pytest.fixture(scope="module")
def race():
    return sim.run("read-then-write-race", **{"workload.jobs": 50, "horizon": 120})


def patches(ax, gid):
    return [p for p in ax.patches if p.get_gid() == gid]


def points(ax, gid) -> int:
    return sum(len(line.get_xdata()) for line in ax.lines if line.get_gid() == gid)


def test_one_bar_per_lease_hatched_by_end_reason(zombie):
    ax = lease_timeline(zombie)
    bars = patches(ax, "lease")
    assert len(bars) == len(zombie.leases) == 4
    by_start = {round(b.get_x(), 6): b for b in bars}
    for lease in zombie.leases.itertuples():
        bar = by_start[round(lease.start, 6)]
        assert bar.get_width() == pytest.approx(lease.end - lease.start)
        assert (bar.get_hatch() or "") == END_STYLES[lease.end_reason][0]
    # the paused zombie keeps the job after its lease expired; both refusals are marked
    assert len(patches(ax, "zombie")) == 1
    assert len(patches(ax, "pause")) == 1
    assert points(ax, "refused") == 2
    assert points(ax, "heartbeat") == (zombie.events.kind == "heartbeat").sum()
    assert points(ax, "charge") == 2  # job 2 charged by the zombie and by its successor
    assert len([t for t in ax.texts if t.get_text().startswith("j")]) >= 3


def test_labels_title_lanes_and_legend(zombie):
    ax = lease_timeline(zombie)
    assert ax.get_xlabel() == "simulated time (s)"
    assert ax.get_ylabel() == "worker"
    assert ax.get_title(loc="left").startswith("gc-pause-zombie: lease timeline")
    assert [t.get_text() for t in ax.get_yticklabels()] == ["w0", "w1", "watcher"]
    assert ax.get_ylim()[0] > ax.get_ylim()[1]  # w0 on top
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "completed" in legend and "expired (TTL ran out)" in legend
    assert "paused (stop-the-world)" in legend


def test_title_counts_agree_in_number_and_a_lock_has_no_ttl_figure():
    from sim import teaching

    lock = sim.run(teaching.one_job(crash_at=12.0, lock=True))
    title = lease_timeline(lock).get_title(loc="left")
    assert (
        "this run: 1 lease, 0 false expiries, 0 double claims, 1 crash, 0 duplicate PSP charges"
        in title
    )
    assert "no TTL (a lock: claims never expire)" in title and "1e+09" not in title
    lease = sim.run(teaching.one_job(crash_at=12.0))
    title = lease_timeline(lease).get_title(loc="left")
    assert "TTL 15 s" in title and "2 leases" in title and "1 crash," in title


def test_crash_markers_and_db_lease_extension(crashes):
    ax = lease_timeline(crashes)
    crash_events = crashes.events[crashes.events.kind == "crash"]
    assert len(crash_events) > 0
    assert points(ax, "crash") == len(crash_events)
    crashed = crashes.leases[crashes.leases.end_reason == "crashed"]
    assert len(crashed) > 0
    # one line (and one cap) per crashed lease: the DB still thinks it valid until `until`
    assert points(ax, "db-lease") == 3 * len(crashed)
    reclaims = [t for t in ax.texts if t.get_gid() == "reclaim"]
    assert len(reclaims) == len(crashed)
    assert len(patches(ax, "down")) == len(crash_events)


def test_overlaps_highlighted_within_window(race):
    leases = race.leases
    revoked = leases[leases.end_reason == "revoked"]
    assert len(revoked) > 0
    ax = lease_timeline(race)
    assert len(patches(ax, "overlap")) == len(revoked)
    t0, t1 = 0.0, float(revoked["start"].iloc[0]) + 0.5
    ax = lease_timeline(race, window=(t0, t1))
    tail = revoked["released_at"].fillna(revoked["end"])
    inside = revoked[(revoked["start"] <= t1) & (tail >= t0)]
    assert 0 < len(inside) <= len(revoked)
    assert len(patches(ax, "overlap")) == len(inside)


def test_no_overlap_without_the_race():
    run = sim.run(
        "read-then-write-race",
        **{"workload.jobs": 50, "horizon": 120, "policy.claim": "conditional_update"},
    )
    ax = lease_timeline(run)
    assert patches(ax, "overlap") == []
    assert len(patches(ax, "lease")) == len(run.leases)


def test_window_zooms(crashes):
    ax = lease_timeline(crashes, window=(100, 220))
    assert ax.get_xlim() == (100.0, 220.0)
    bars = patches(ax, "lease")
    assert 0 < len(bars) < len(crashes.leases)
    assert all(b.get_x() <= 220 for b in bars)
    assert "zoom 100 to 220 s" in ax.get_title(loc="left")


def test_given_axes_and_worker_subset(race):
    fig, ax = plt.subplots()
    assert lease_timeline(race, ax, workers=["w1", 3]) is ax
    assert [t.get_text() for t in ax.get_yticklabels()] == ["w1", "w3", "watcher"]
    assert len(patches(ax, "lease")) == race.leases.worker.isin(["w1", "w3"]).sum()
    ax2 = lease_timeline(race, workers=2)
    assert [t.get_text() for t in ax2.get_yticklabels()] == ["w0", "w1", "watcher"]


@pytest.mark.parametrize(
    "kwargs", [{"window": (5, 5)}, {"window": "soon"}, {"workers": ["w9"]}, {"workers": 0}]
)
def test_bad_arguments(zombie, kwargs):
    with pytest.raises(ConfigError):
        lease_timeline(zombie, **kwargs)


def test_auto_window(crashes, zombie):
    full = sim.run("crash-recovery")
    window = auto_window(full)
    assert window is not None
    t0, t1 = window
    assert 0 <= t0 < t1 <= full.scenario.horizon and t1 - t0 <= 130
    first_crash = full.leases.loc[full.leases.end_reason == "crashed", "end"].min()
    assert t0 <= first_crash <= t1
    t0, t1 = auto_window(zombie)
    assert t1 <= zombie.scenario.horizon and zombie.leases["released_at"].max() <= t1


def test_jobs_draws_only_the_followed_jobs(crashes):
    recovered = crashes.recoveries.dropna(subset=["latency"])
    job = int(recovered["job"].iloc[0])
    mine = crashes.leases[crashes.leases["job"] == job]
    ax = lease_timeline(crashes, jobs=job)
    assert len(patches(ax, "lease")) == len(mine) >= 2
    assert {round(b.get_x(), 6) for b in patches(ax, "lease")} == {
        round(s, 6) for s in mine["start"]
    }
    assert (
        points(ax, "heartbeat")
        == ((crashes.events["kind"] == "heartbeat") & (crashes.events["job"] == job)).sum()
    )
    assert points(ax, "crash") == 1  # its owner's crash, not the other workers'
    assert f"(job {job} only)" in ax.get_title(loc="left")
    assert len(patches(lease_timeline(crashes), "lease")) == len(crashes.leases)
    with pytest.raises(ConfigError, match="jobs"):
        lease_timeline(crashes, jobs=[10_000])
    with pytest.raises(ConfigError, match="jobs"):
        lease_timeline(crashes, jobs=[])
