"""Issue 25's peer presets hold their queue's documented defaults, each cited in the header.

The table below is written from the queues' sources (the commit and file:line each preset header
names), not read back from the presets: a preset that drifts from its queue fails here.
"""

from __future__ import annotations

from importlib import resources

import pytest

import sim
from sim.comparisons.peers import PEERS, recovery_mechanism
from sim.scenario.settings import LOCK_TTL

# preset -> (the version its header must name, {setting: (value, the citation in its header)})
DEFAULTS = {
    "bullmq": (
        "v6.2.0",
        {
            "lease_ttl": (30.0, "src/classes/worker.ts:245"),  # lockDuration: 30000 ms
            "heartbeat": (True, "src/classes/worker.ts:288-289"),
            "heartbeat_interval": (15.0, "src/classes/worker.ts:288-289"),  # lockDuration / 2
            "watcher_interval": (30.0, "src/classes/worker.ts:248"),  # stalledInterval: 30000
            "max_stalls": (1, "src/classes/worker.ts:247"),  # maxStalledCount: 1
            "stall_check": ("two_phase", "0002_functions.sql:2274"),
            "max_attempts": (1, "src/interfaces/base-job-options.ts:32"),  # attempts default 1
            "fencing": (True, "0002_functions.sql:373"),  # lock token checked at completion
            "clock": ("worker", "postgres-queue-backend.ts:1154"),  # Date.now() binds lock expiry
        },
    ),
    "temporal": (
        "v1.48.0",
        {
            "heartbeat": (False, "internal/activity.go:138"),  # HeartbeatTimeout zero: none
            "lease_ttl": (60.0, "internal/activity.go:133"),  # StartToClose: required, assumed
            "execution_timeout": (60.0, "internal/activity.go:133"),
            "watcher_interval": (1.0, "internal/activity.go:155"),  # InitialInterval 1 s
            "max_attempts": (1_000_000, "internal/activity.go:158"),  # MaximumAttempts 0
            "fencing": (True, "fencing = true"),
        },
    ),
    "celery-redis": (
        "5.6.2",
        {
            "lease_ttl": (3600.0, "kombu/transport/redis.py:726"),  # visibility_timeout
            "heartbeat": (False, "never renewed"),
            "watcher_interval": (100.0, "redis.py:725"),  # 10 s x every 10th call
            "prefetch": (4, "celery/app/defaults.py:356"),  # worker_prefetch_multiplier
            "max_attempts": (1_000_000, "no cap"),
            "fencing": (False, "fencing = false"),
            "claim_takes_expired": (False, "restore_visible"),
        },
    ),
    "celery-sqs": (
        "5.6.2",
        {
            "lease_ttl": (1800.0, "kombu/transport/SQS/__init__.py:326"),
            "heartbeat": (False, "never extends"),
            "watcher": (False, "watcher = false"),
            "claim_takes_expired": (True, "claim_takes_expired = true"),
            "prefetch": (4, "celery/app/defaults.py:356"),
            "max_attempts": (1_000_000, "no cap"),
            "fencing": (False, "fencing = false"),
        },
    ),
    "hatchet": (
        "1.37.5",
        {
            "process_heartbeat_interval": (4.0, "pkg/client/action_listener.go:62"),
            "process_stale_after": (30.0, "pkg/repository/sqlcv1/tasks.sql:471"),
            "max_stalls": (10, "pkg/config/server/server.go:271"),  # MaxInternalRetryCount
            "execution_timeout": (60.0, "hatchet_sdk/hatchet.py:411"),
            "max_attempts": (1, "hatchet.py:412"),  # retries: 0
            "fencing": (True, "tasks.sql:536"),  # events match the current retry_count
            "prune_action": ("requeue", 'prune_action = "requeue"'),
            "worker_identity": ("fresh", "pkg/repository/worker.go:618"),
            "watcher_interval": (1.0, "controller.go:277-282"),
            "lease_ttl": (LOCK_TTL, "lease_ttl = 1e9"),
        },
    ),
    "procrastinate": (
        "3.9.0",
        {
            "process_heartbeat_interval": (10.0, "procrastinate/worker.py:48"),
            "process_stale_after": (30.0, "procrastinate/manager.py:228"),
            "rescue": ("job", "retry_stalled_jobs.md:28"),
            "watcher_interval": (600.0, "retry_stalled_jobs.md:28"),  # cron */10
            "worker_identity": ("fresh", "procrastinate/sql/schema.sql:527"),
            "fencing": (False, "fencing = false"),
            "max_attempts": (1_000_000, "procrastinate/tasks.py:87"),
            "lease_ttl": (LOCK_TTL, "lease_ttl = 1e9"),
        },
    ),
}


def header(name: str) -> str:
    text = (resources.files("sim.scenario") / "presets" / f"{name}.toml").read_text(
        encoding="utf-8"
    )
    return text.split("\nname = ")[0]


def test_every_issue_25_queue_is_a_peer():
    assert set(DEFAULTS) <= set(PEERS)


@pytest.mark.parametrize("name", list(DEFAULTS))
def test_preset_holds_the_cited_defaults(name):
    version, settings = DEFAULTS[name]
    text = header(name)
    follows = text.split("# Follows:")[1].split("# Approximates:")[0]
    assert version in follows, (name, version)
    policy = sim.preset(name).policy
    for setting, (value, citation) in settings.items():
        assert getattr(policy, setting) == value, (name, setting)
        assert citation in " ".join(line.lstrip("# ") for line in text.splitlines()), (
            name,
            setting,
            citation,
        )


def test_recovery_mechanisms_of_the_new_peers():
    mechanism = {name: recovery_mechanism(sim.preset(name).policy) for name in DEFAULTS}
    assert mechanism == {
        "bullmq": "watcher requeues",
        "temporal": "watcher requeues",
        "celery-redis": "watcher requeues",
        "celery-sqs": "claim takes expired",
        "hatchet": "process prune requeues",
        "procrastinate": "process prune requeues",
    }


@pytest.mark.postgres
@pytest.mark.parametrize("name", list(DEFAULTS))
def test_preset_runs_identically_on_the_simulated_and_the_real_database(name):
    """Each new peer's mechanisms (two-phase check, process prune, rescue job, prefetch, execution
    timeout, worker clock) on a short, crash-heavy run: the same event log on both backends."""
    short = {"workload.jobs": 40, "horizon": 900.0, "faults.crash_rate": 60.0}
    memory = sim.run(name, seed=3, **short)
    real = sim.run(name, seed=3, backend="postgres", **short)
    assert memory.summary["crashes"] > 0
    assert list(real.log) == list(memory.log)
