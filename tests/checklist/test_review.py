"""The design-review checklist: statuses follow the scenarios, evidence numbers are the runs'
own."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from sim.checklist.design_review import FAIL, ITEMS, PASS, RISK, UNTESTED, Review, review  # noqa: E402
from sim.cli.main import main  # noqa: E402
from sim.support.in_words import percent as _pct  # noqa: E402

SEEDS = (1, 2)


@pytest.fixture(scope="module")
def baseline() -> Review:
    return review("baseline", seeds=SEEDS)


@pytest.fixture(scope="module")
def race() -> Review:
    return review("read-then-write-race", seeds=SEEDS)


@pytest.fixture(scope="module")
def long_jobs() -> Review:
    return review("no-heartbeat-long-jobs", seeds=SEEDS)


def total(runs, key: str) -> int:
    return int(sum(r.summary[key] for r in runs))


def test_table_shape(baseline):
    table = baseline.table
    assert list(table.index) == list(ITEMS)
    assert list(table.columns) == ["item", "status", "evidence", "basis"]
    assert set(table["status"]) <= {PASS, RISK, FAIL, UNTESTED}
    assert len(baseline.runs) == len(SEEDS) and [r.scenario.seed for r in baseline.runs] == list(
        SEEDS
    )


def test_baseline_passes_the_checklist(baseline):
    status = baseline.table["status"]
    for key in ("claim", "watcher", "owner", "attempts", "fencing"):
        assert status[key] == PASS, baseline.table.loc[key, "evidence"]
    assert baseline.ok
    # the evidence comes from the runs and the named variants
    leases = total(baseline.runs, "leases")
    assert f"0 double claims in {leases} leases" in baseline.table.loc["claim", "evidence"]
    contention = baseline.variants["contention"]
    assert (
        f"0 double claims in {total(contention, 'leases')} leases"
        in baseline.table.loc["claim", "evidence"]
    )
    # fencing was exercised: the zombie variant's late completions were refused
    zombies = baseline.variants["zombie"]
    refused = sum(int((r.events["kind"] == "complete_rejected").sum()) for r in zombies)
    assert refused > 0 and baseline.measured["fencing"]["refused_completions"] == refused
    assert f"{refused} late completions refused" in baseline.table.loc["fencing", "evidence"]
    # owner and attempts checked against the final table
    leased = sum(r.leases["job"].nunique() for r in baseline.runs)
    assert f"on {leased} of {leased} leased jobs" in baseline.table.loc["owner", "evidence"]
    for r in baseline.runs:
        table = r.table_jobs.set_index("id")
        claims = r.events[r.events["kind"] == "claim"].groupby("job")
        assert (table["attempts"].reindex(claims.size().index) == claims.size()).all()
        assert (table["lease_owner"].reindex(claims.size().index) == claims["worker"].last()).all()


def test_read_then_write_fails_item_1_with_the_measured_double_claims(race):
    row = race.table.loc["claim"]
    assert row["status"] == FAIL
    doubles, leases = total(race.runs, "double_claims"), total(race.runs, "leases")
    assert doubles > 0
    assert race.measured["claim"] == {
        "double_claims": doubles,
        "leases": leases,
        "handed_double_claims": 0,  # every one the claim's own: no watcher requeued a live lease
    }  # the preset is already contended
    assert f"{doubles} double claims in {leases} leases" in row["evidence"]
    assert _pct(doubles / leases) in row["evidence"]
    # unfenced, no dedup marker, no idempotency key: the duplicates it causes are counted too
    assert race.table.loc["fencing", "status"] == FAIL
    charged = sum(
        int(
            (
                r.events[(r.events.kind == "psp_charge") & (r.events.detail == "new")]
                .merge(r.jobs[["job", "event_id"]], on="job")
                .groupby("event_id")
                .size()
                > 1
            ).sum()
        )
        for r in race.runs
    )
    assert (
        race.table.loc["psp", "status"] == FAIL
        and f"{charged} of" in race.table.loc["psp", "evidence"]
    )
    assert not race.ok


def test_no_heartbeat_long_jobs_fails_items_2_and_3_with_the_measured_fraction(long_jobs):
    table = long_jobs.table
    assert table.loc["ttl", "status"] in (FAIL, RISK)
    assert table.loc["heartbeat", "status"] in (FAIL, RISK)
    runs = long_jobs.runs
    ttl = runs[0].scenario.policy.lease_ttl
    # recompute from the runs: each job's processing time from its first finished lease
    durations = []
    for r in runs:
        done = (
            r.leases[r.leases["outcome"].isin(["completed", "rejected", "rejected_payload"])]
            .groupby("job")
            .head(1)
        )
        durations.extend(done["released_at"] - done["start"])
    durations = np.asarray(durations)
    over = float((durations > ttl).mean())
    false_expiries = total(runs, "false_expiries")
    twice = 0
    leased = 0
    for r in runs:
        per_job = r.leases.groupby("job").size()
        leased += len(per_job)
        twice += sum(per_job[j] > 1 for j in r.leases.loc[r.leases["false_expiry"], "job"].unique())
    assert over > 0.05 and false_expiries > 0 and twice > 0
    m = long_jobs.measured["ttl"]
    assert m["over_ttl_share"] == pytest.approx(over)
    assert m["p999_processing"] == pytest.approx(np.quantile(durations, 0.999))
    assert (m["false_expiries"], m["double_processed_jobs"], m["jobs"]) == (
        false_expiries,
        twice,
        leased,
    )
    for key in ("ttl", "heartbeat"):
        evidence = table.loc[key, "evidence"]
        assert f"{_pct(over)} of jobs outlived" in evidence
        assert (
            f"{false_expiries} leases" in evidence
            or f"{false_expiries} of {total(runs, 'leases')} leases" in evidence
        )
        assert f"{twice} of {leased} leased jobs ({_pct(twice / leased)})" in evidence
    assert f"TTL {ttl:g} s < p99.9 processing" in table.loc["ttl", "evidence"]


def test_heartbeat_evidence_measures_the_no_heartbeat_variant():
    r = review("gc-pause-zombie", seeds=(1,))
    m = r.measured["heartbeat"]
    without = r.variants["no-heartbeat"]
    assert all(not v.scenario.policy.heartbeat for v in without)
    assert m["variant_false_expiries"] == total(without, "false_expiries") > m["false_expiries"]
    assert (
        f"without it (variant): {m['variant_false_expiries']} leases"
        in r.table.loc["heartbeat", "evidence"]
    )
    assert (
        r.table.loc["ttl", "status"] == FAIL
    )  # the 45 s pause outlives the 15 s TTL despite heartbeats


def test_text_and_figure(race):
    text = str(race)
    assert text.splitlines()[0].startswith(
        "Design review of read-then-write-race: 2 runs (seeds 1, 2)"
    )
    assert "[FAIL] 1. The claim is one atomic UPDATE" in text
    fig = race.figure()
    [table_ax, timeline_ax] = fig.axes
    badges = [p.get_gid() for p in table_ax.patches if (p.get_gid() or "").startswith("status-")]
    assert badges == [f"status-{s}" for s in race.table["status"]]
    words = [t.get_text() for t in table_ax.texts if t.get_gid() == "status-text"]
    assert words[0] == "\u2717 FAIL"  # symbol and word: readable without colour
    evidence = [
        t.get_text().replace("\n", " ") for t in table_ax.texts if t.get_gid() == "evidence"
    ]
    assert evidence == list(race.table["evidence"])
    assert any(
        p.get_gid() == "overlap" for p in timeline_ax.patches
    )  # the race's double claims, drawn


def test_without_variants(tmp_path):
    r = review("baseline", seeds=(1,), variants=False, **{"workload.jobs": 100})
    assert r.variants == {}
    assert r.table.loc["watcher", "status"] == UNTESTED  # nothing expired: recovery not exercised
    assert "recovery not exercised" in r.table.loc["watcher", "evidence"]


def test_cli_review_prints_the_table_and_writes_files(capsys, tmp_path):
    out = tmp_path / "review"
    code = main(
        [
            "review",
            "read-then-write-race",
            "--seeds",
            "1",
            "--set",
            "workload.jobs=100",
            "--out",
            str(out),
        ]
    )
    printed = capsys.readouterr()
    assert code == 0, printed.err
    assert "[FAIL] 1. The claim is one atomic UPDATE" in printed.out
    assert sorted(p.name for p in out.iterdir()) == ["review.csv", "review.png", "review.txt"]
    assert (out / "review.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(
    "argv",
    [
        ["review", "nope"],
        ["review", "baseline", "--set", "policy.lease_ttl=-1"],
        ["review", "baseline", "--seeds", "0"],
        ["review"],
    ],
)
def test_cli_review_bad_input_is_one_line_exit_2(capsys, argv):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ")


def test_watcher_evidence_without_a_watcher_reads_unambiguously():
    """04 shows this evidence to newcomers: the stuck jobs must not read as 'left Processing'."""
    item = review(
        "crash-recovery", seeds=(1,), variants=False, **{"policy.watcher": False}
    ).table.loc["watcher"]
    assert item["status"] == FAIL
    text = item["evidence"]
    assert "left Processing" not in text and "n/a" not in text
    expired = int(text.split(" of ")[1].split()[0])
    assert f"0 of {expired} expired leases moved out of Processing" in text
    assert f"0 of {expired} crashed owners' jobs claimed again;" in text
    assert f"{expired} jobs stayed Processing" in text


def test_watcher_evidence_with_a_watcher_says_how_fast(baseline):
    text = baseline.table.loc["watcher", "evidence"]
    assert "expired leases (crash variant" in text and "moved out of Processing" in text
    assert "after expiry" in text and "after the crash on average" in text


# ---- item 2 and 3: the rule matches the label ----------------------------------------------------

PAUSES = {
    "faults.pause_rate": 0.5,
    "faults.pause_duration": {"kind": "lognormal", "median": 1.0, "p99": 10.0},
}


@pytest.mark.parametrize(
    "overrides, status, slack",
    [
        (
            {"policy.lease_ttl": 30, "policy.heartbeat_interval": 10, **PAUSES},
            PASS,
            "20 s of slack between renewals > the pause p99 10 s",
        ),
        (
            {"policy.lease_ttl": 12, "policy.heartbeat_interval": 5, **PAUSES},
            RISK,
            "6.99 s of slack between renewals < "
            "the pause p99 10 s: such a stall lapses the lease under a live owner",
        ),
        (
            {},
            UNTESTED,
            "20 s of slack between renewals; no pause, partition or heartbeat delay was declared "
            "or observed, so it was never tested",
        ),
    ],
)
def test_item_2_with_a_heartbeat_compares_the_slack_between_renewals_with_the_stall_tail(
    overrides, status, slack
):
    """baseline: statement latency p99 0.01 s; slack = TTL - interval - 0.01 s against the
    declared pause p99."""
    r = review("baseline", seeds=(1,), variants=False, **overrides)
    row, m = r.table.loc["ttl"], r.measured["ttl"]
    assert row["status"] == status and slack in row["evidence"], row["evidence"]
    p = r.scenario.policy
    assert m["slack"] == pytest.approx(p.lease_ttl - p.heartbeat_interval - 0.01)
    high = m["false_expiry_ci_high"]
    assert m["false_expiries"] == 0 and 0.003 < high < 0.005
    assert (
        f"0 of 883 leases expired under a live owner (95% interval 0% to {_pct(high)})"
        in row["evidence"]
    )


def test_item_2_fails_when_leases_lapsed_under_live_owners():
    r = review("gc-pause-zombie", seeds=(1,), variants=False)
    row, m = r.table.loc["ttl"], r.measured["ttl"]
    assert row["status"] == FAIL and m["false_expiries"] > 0 and m["longest_stall"] == 45
    assert "the longest scripted pause 45 s: stalls outlasted it" in row["evidence"]


def test_item_3_counts_renewals_even_without_heartbeat_records():
    """With record_heartbeats off the log has no heartbeat rows; the renewals still count (they
    read 0 before, and the item passed with '0 renewals')."""
    on = review(
        "baseline",
        seeds=(1,),
        variants=False,
        **{"policy.lease_ttl": 12, "policy.heartbeat_interval": 2},
    )
    off = review(
        "baseline",
        seeds=(1,),
        variants=False,
        **{"policy.lease_ttl": 12, "policy.heartbeat_interval": 2, "record_heartbeats": False},
    )
    renewals = on.measured["heartbeat"]["renewals"]
    assert renewals == int((on.runs[0].events["kind"] == "heartbeat").sum()) > 0
    assert off.measured["heartbeat"]["renewals"] == renewals
    assert (
        off.table.loc["heartbeat", "status"] == PASS
        and f"{renewals} renewals in 1 run" in off.table.loc["heartbeat", "evidence"]
    )


def test_short_jobs_leave_the_heartbeat_untested_and_every_verdict_names_its_basis():
    r = review("baseline", seeds=(1, 2), variants=False, **{"workload.jobs": 40})
    m = r.measured["heartbeat"]
    assert m["jobs_over_interval"] == 0 and r.table.loc["heartbeat", "status"] == UNTESTED
    assert "0 jobs that ran longer than the interval" in r.table.loc["heartbeat", "evidence"]
    leases = total(r.runs, "leases")
    basis = f"baseline: seeds 1, 2; {leases} leases observed; simulated t = 0-600 s each"
    assert (r.table["basis"] == basis).all()
    assert r.counts()[UNTESTED] == int((r.table["status"] == UNTESTED).sum()) >= 2
    assert r.tally() == ", ".join(f"{r.counts()[s]} {s}" for s in (PASS, RISK, FAIL, UNTESTED))
    assert f"basis: {basis}" in str(r)
