"""`advise --as QUEUE`: the advice in each queue's own settings and units, what the queue cannot
do (with the crash cost from the durations), and the rules of thumb checked.

Two fixed advices on the bundled sample (2000 payment times, longest 117 s; 1 job/s): the
default one recommends TTL 3 s, heartbeat 1 s, watcher 0.5 s (recovery ~3.25 s), and its best
timeout without renewal is 120 s; a second one is restricted to no heartbeat (TTL 300 s, watcher
5 s). Every figure below follows from those.
"""

from __future__ import annotations

import pytest

import sim
from sim.__main__ import main
from sim.advice_settings import (
    QUEUES,
    check_queue,
    go_duration,
    in_queue_terms,
    no_renewal,
    procrastinate_cron,
    temporal_heartbeat_timeout,
)
from sim.errors import ConfigError

NO_HEARTBEAT = {
    "ttl": [60, 120, 180, 300],
    "heartbeat_interval": [None],
    "watcher_interval": [5, 30],
}


@pytest.fixture(scope="module")
def advice():
    return sim.advise("sample", arrival_rate=1, verify=False)


@pytest.fixture(scope="module")
def bare():
    return sim.advise("sample", arrival_rate=1, verify=False, candidates=NO_HEARTBEAT)


def test_the_fixed_advices(advice, bare):
    assert (advice.ttl, advice.heartbeat_interval, advice.watcher_interval) == (3.0, 1.0, 0.5)
    assert advice.recovery_mean == pytest.approx(3.25, abs=0.01)
    assert advice.inputs["durations_max"] == pytest.approx(117.002)
    cover = no_renewal(advice)  # no TTL without renewal is provably under 0.1% from 2000 jobs
    assert (cover.ttl, cover.watcher_interval, cover.feasible) == (120.0, 0.5, False)
    assert cover.risk_high == pytest.approx(0.0015, abs=1e-5)
    assert (bare.ttl, bare.heartbeat_interval, bare.watcher_interval) == (300.0, None, 5.0)
    assert no_renewal(bare).ttl == bare.ttl  # an advice without a heartbeat is its own


def test_bullmq(advice, bare):
    q = in_queue_terms(advice, "bullmq")
    assert [q.value(k) for k in ("lockDuration", "lockRenewTime", "stalledInterval")] == [
        3000,
        1000,
        500,
    ]
    assert q.value("maxStalledCount") == 1
    assert q.rule("heartbeat at most half the TTL").holds
    text = str(q)
    assert "lockDuration = 3000 ms" in text and "stalledInterval = 500 ms" in text
    assert "up to 0.5 s (one stalledInterval)" in text  # the two-phase check's extra pass
    assert "a worker clock 2 s behind" in text  # lockDuration - lockRenewTime
    # no heartbeat advised: BullMQ renews anyway, at its default half the lock
    assert in_queue_terms(bare, "bullmq").value("lockRenewTime") == 150_000


def test_temporal(advice, bare):
    q = in_queue_terms(advice, "temporal")
    assert q.value("StartToCloseTimeout") == 120  # the tail: heartbeats cannot extend it
    assert q.value("HeartbeatTimeout") == 10.0  # the SDK sends at 0.8 x 10 = 8 s: 2 s of slack
    text = str(q)
    assert "StartToCloseTimeout = 2m0s" in text and "HeartbeatTimeout = 10s" in text
    assert "the SDK sends one every 8 s" in text and "leaves 2 s for a late one" in text
    rule = q.rule("heartbeat at most half the TTL")
    assert not rule.holds and "8 s against 10 s" in rule.text
    q = in_queue_terms(bare, "temporal")
    assert (q.value("StartToCloseTimeout"), q.value("HeartbeatTimeout")) == (300.0, 0.0)
    assert "found up to 5.02 min after the crash" in str(q)  # 300 s + the 1 s InitialInterval


def test_temporal_heartbeat_timeout_keeps_the_advised_slack_under_the_throttle():
    assert temporal_heartbeat_timeout(3, 1) == pytest.approx(10)  # 0.2 T = 2 s
    assert temporal_heartbeat_timeout(10, 9) == 10  # 0.8 x 10 <= 9: the TTL itself
    assert temporal_heartbeat_timeout(100, 40) == 120  # the 60 s cap: 120 - 60 = 60 s of slack


def test_celery_redis(advice):
    q = in_queue_terms(advice, "celery-redis")
    assert q.value("task_acks_late") is True
    assert q.value("broker_transport_options['visibility_timeout']") == 120
    assert q.value("broker_transport_options['unacked_restore_interval']") == 1  # 0.5 s rounded up
    assert q.value("worker_prefetch_multiplier") == 1
    text = str(q)
    # 120 s + a 1 s sweep; 54 crashed jobs a day (1/worker-hour x 4 workers x 24 h x 56% busy),
    # each waiting ~113 s instead of ~3.25 s
    assert "found up to 2.02 min after the crash" in text
    assert "claimed again about 113 s after it on average" in text
    assert "at 54 crashed jobs a day that is 98.9 min more waiting a day" in text
    assert q.rule("visibility_timeout above the longest task").holds
    default = q.rule("the default 1 h")
    assert default.holds and "30x what these durations need" in default.text


def test_celery_sqs(advice):
    q = in_queue_terms(advice, "celery-sqs")
    assert q.value("broker_transport_options['visibility_timeout']") == 120
    assert "found up to 2 min after the crash" in str(q)  # SQS redelivers itself: no sweep
    assert "15x what these durations need" in q.rule("the default 30 min").text


def test_sqs(advice, bare):
    q = in_queue_terms(advice, "sqs")
    assert (q.value("VisibilityTimeout"), q.value("ChangeMessageVisibility")) == (3, 1.0)
    rule = q.rule("VisibilityTimeout at least 6x a Lambda's timeout")
    # a Lambda must run 120 s to outlast these jobs: the rule asks 720 s, 240x the 3 s advised
    assert not rule.holds and "asks 720 s" in rule.text and "240x the 3 s" in rule.text
    q = in_queue_terms(bare, "sqs")
    assert q.value("VisibilityTimeout") == 300
    assert "asks 1800 s" in q.rule("VisibilityTimeout at least 6x a Lambda's timeout").text


def test_hatchet(advice):
    q = in_queue_terms(advice, "hatchet")
    assert q.value("execution_timeout") == 120
    text = str(q)
    # stale after 30 s, beats every 4 s, reassignment every 1-30 s: 30 - 2 + 0.5 = 28.5 s
    assert "waits about 28.5 s (at most 60 s), against the advised 3.25 s" in text
    assert q.rule("heartbeat at most half the TTL").holds


def test_procrastinate(advice, bare):
    q = in_queue_terms(advice, "procrastinate")
    assert (q.value("update_heartbeat_interval"), q.value("stalled_worker_timeout")) == (1.0, 3.0)
    assert q.value("retry_stalled_jobs cron") == 1
    assert 'cron = "* * * * * */1"' in str(q)
    q = in_queue_terms(bare, "procrastinate")
    assert (q.value("update_heartbeat_interval"), q.value("stalled_worker_timeout")) == (150, 300)
    assert procrastinate_cron(600) == "*/10 * * * *" and procrastinate_cron(90) == "*/2 * * * *"


def test_river(advice):
    q = in_queue_terms(advice, "river")
    assert q.value("RescueStuckJobsAfter") == 120.0 and q.value("JobTimeout") == 120.0
    text = str(q)
    assert "RescueStuckJobsAfter = 2m0s" in text
    assert "found up to 2.5 min after the crash" in text  # 120 s + the rescuer's 30 s
    assert "default 1 min, which 0.15% of the observed jobs outlast" in text
    assert not q.rule("JobTimeout above the longest job").holds


def test_oban(advice):
    q = in_queue_terms(advice, "oban")
    assert q.value("Lifeline rescue_after") == 120 and q.value("Lifeline interval") == 500
    assert "rescue_after = :timer.seconds(120)" in str(q)


def test_pg_boss(advice, bare):
    q = in_queue_terms(advice, "pg-boss")
    assert q.value("expireInSeconds") == 120 and q.value("monitorIntervalSeconds") == 1
    assert (q.value("heartbeatSeconds"), q.value("heartbeatRefreshSeconds")) == (10, 5)
    assert "the advised 3 s becomes 10 s, so a crash waits up to 11 s" in str(q)
    q = in_queue_terms(bare, "pg-boss")
    assert q.value("expireInSeconds") == 300 and q.value("monitorIntervalSeconds") == 5
    with pytest.raises(KeyError):
        q.value("heartbeatSeconds")


def test_graphile(advice):
    q = in_queue_terms(advice, "graphile")
    assert q.settings == [] and "none: it has no lease" in str(q)
    assert "waits up to 4.17 h, against the advised 3.25 s" in str(q)  # 4 h + a 10 min reset


def test_solid_queue(advice):
    q = in_queue_terms(advice, "solid-queue")
    assert q.value("process_heartbeat_interval") == 1.0
    assert q.value("process_alive_threshold") == 3.0
    assert "process_alive_threshold = 3.seconds" in str(q)
    assert "re-run a crashed job" in str(q)


def test_every_queue_has_a_translation(advice):
    for name in QUEUES:
        assert str(in_queue_terms(advice, name)).startswith(f"in {QUEUES[name]}'s own settings:")


def test_go_duration():
    assert [go_duration(s) for s in (0.5, 3, 90, 120, 3600, 5400.5)] == [
        "500ms",
        "3s",
        "1m30s",
        "2m0s",
        "1h0m0s",
        "1h30m0.5s",
    ]


def test_an_unknown_queue_is_one_line_naming_them_all(capsys):
    with pytest.raises(ConfigError, match="--as bulmq: unknown queue; one of bullmq, temporal"):
        check_queue("bulmq")
    assert main(["advise", "sample", "--no-verify", "--as", "bulmq"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == f"error: --as bulmq: unknown queue; one of {', '.join(QUEUES)}\n"


def test_the_command_line_prints_and_saves_the_translation(capsys, tmp_path):
    argv = ["advise", "sample", "--arrival-rate", "1", "--no-verify", "--as", "bullmq"]
    assert main([*argv, "--out", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert "in BullMQ 6 (PostgreSQL backend)'s own settings:" in out
    assert "lockDuration = 3000 ms: the advised TTL" in out
    saved = (tmp_path / "out" / "settings-bullmq.txt").read_text(encoding="utf-8")
    assert saved.startswith("in BullMQ") and saved in out
    assert (tmp_path / "out" / "advice.txt").exists()
