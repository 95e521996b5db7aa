"""A queue directory carries its own settings (queue.toml): they apply over the scenario run on
the queue, --set and overrides apply over them, and a bad one is one line naming the file and
the setting. The watcher's statements get the stuck age as %(stuck_after)s."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import sim
from sim.db.queue.directory import QueueDefinitionError, load_queue
from sim.runner import with_queue
from sim.scenario.settings import resolve

from .test_queue_dir import cli

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "examples" / "queues"
RIVER = EXAMPLES / "river-like"


def copy(tmp_path: Path, source: Path, toml: str | None) -> Path:
    d = tmp_path / source.name
    d.mkdir()
    for f in ("queries.sql", "schema.sql"):
        if (source / f).is_file():
            (d / f).write_text((source / f).read_text())
    if toml is not None:
        (d / "queue.toml").write_text(toml)
    return d


def test_the_queues_settings_replace_the_scenarios():
    q = load_queue(RIVER)
    assert q.settings["policy.watcher_gap"] == 0.05 and q.settings["policy.heartbeat"] is False
    scenario, settled = with_queue(resolve("gc-pause-zombie"), q)
    p = scenario.policy
    assert (p.claim, p.heartbeat, p.watcher_gap, p.lease_ttl) == ("skip_locked", False, 0.05, 30.0)
    assert scenario.workload == resolve("gc-pause-zombie").workload  # the scenario's own
    again, _ = with_queue(scenario.with_overrides({"policy.heartbeat": True}), settled)
    assert again.policy.heartbeat is True  # settled: applied once, overrides stay


@pytest.mark.parametrize(
    "toml, expected",
    [
        ("[policy]\nclaim = 3\nclaim = 4\n", "queue.toml: not valid TOML ("),
        (
            "[workload]\njobs = 3\n",
            "queue.toml: workload: a queue.toml holds the queue's own [policy] settings only",
        ),
        (
            "[policy]\nwatcher_intervall = 3\n",
            "queue.toml: policy.watcher_intervall: unknown key; did you mean "
            "policy.watcher_interval?",
        ),
        (
            '[policy]\nclaim = "pop"\n',
            "queue.toml: policy.claim: must be one of read_then_write, conditional_update, "
            "skip_locked, select_for_update",
        ),
        ("[policy]\nlease_ttl = -1\n", "queue.toml: policy.lease_ttl: must be > 0 seconds"),
        ("policy = 3\n", "queue.toml: policy: expected a [policy] table, got int"),
        (b"[policy]\nclaim = '\xff'\n", "queue.toml:2: not UTF-8 text (byte 0xff)"),
    ],
)
def test_a_bad_queue_toml_is_one_line_naming_the_file_and_the_setting(tmp_path, toml, expected):
    d = copy(tmp_path, EXAMPLES / "seed", None)
    (d / "queue.toml").write_bytes(toml if isinstance(toml, bytes) else toml.encode())
    with pytest.raises(QueueDefinitionError) as info:
        load_queue(d)
    message = str(info.value)
    assert "\n" not in message and message.startswith(
        str(d / expected.split(": ", 1)[0].split(":")[0])
    )
    assert expected in message
    assert cli("run", "baseline", "--sql", str(d)) == (2, f"error: {message}\n")


@pytest.mark.postgres
def test_set_and_overrides_win_over_the_queue_toml_which_wins_over_the_scenario(tmp_path, pg_dsn):
    """The river-like queue has no heartbeat: a scenario with one runs without it (no statement
    missing); --set policy.heartbeat=true asks for the statement the queue lacks and is refused;
    a sweep's grid and review's overrides reach the runs over the queue's settings."""
    run = sim.run("gc-pause-zombie", sql=RIVER, dsn=pg_dsn)
    assert run.scenario.policy.heartbeat is False and run.scenario.policy.watcher_gap == 0.05
    with pytest.raises(QueueDefinitionError, match=r"heartbeat \(policy.heartbeat = true\)"):
        sim.run("gc-pause-zombie", sql=RIVER, dsn=pg_dsn, **{"policy.heartbeat": True})
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "sim",
            "run",
            "gc-pause-zombie",
            "--sql",
            str(RIVER),
            "--dsn",
            pg_dsn,
            "--set",
            "policy.lease_ttl=45",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert out.returncode in (0, 1) and "TTL 45 s" in out.stdout.splitlines()[0]
    s = sim.sweep(
        "gc-pause-zombie",
        {"policy.lease_ttl": [30.0, 45.0]},
        sql=RIVER,
        dsn=pg_dsn,
        executor="serial",
    )
    assert s.runs["policy.lease_ttl"].tolist() == [30.0, 45.0]
    r = sim.review(
        "gc-pause-zombie",
        seeds=(1,),
        variants=False,
        sql=RIVER,
        dsn=pg_dsn,
        **{"policy.workers": 2},
    )
    assert r.scenario.policy.workers == 2 and r.scenario.policy.claim == "skip_locked"
    assert "its queue.toml sets claim = skip_locked" in r.header()


@pytest.mark.postgres
@pytest.mark.parametrize("ttl", [30.0, 45.0])
def test_the_stuck_age_reaches_the_watcher_as_a_parameter(pg_dsn, ttl):
    """river-like's rescuer reads `attempted_at < %(now)s - %(stuck_after)s`: each job it rescues
    had run for at least the scenario's lease_ttl, and at most one rescue tick more."""
    run = sim.run(str(RIVER / "scenario.toml"), sql=RIVER, dsn=pg_dsn, **{"policy.lease_ttl": ttl})
    events = run.events
    rescued = events[events["kind"] == "requeue"]
    claims = events[events["kind"] == "claim"]
    assert len(rescued) > 0
    for row in rescued.itertuples():
        started = claims[(claims["job"] == row.job) & (claims["t"] < row.t)]["t"].max()
        assert ttl < row.t - started <= ttl + 5.0 + 0.1  # watcher_interval 5 s, plus the gap
