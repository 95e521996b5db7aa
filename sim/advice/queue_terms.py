"""Lease advice in a queue's own settings: `python -m sim advise durations.csv --as QUEUE`.

    advice = sim.advise("durations.csv", arrival_rate=1)
    print(in_queue_terms(advice, "bullmq"))   # lockDuration / lockRenewTime / stalledInterval ...

The advisor (sim.advice.advisor) recommends a TTL L, a heartbeat interval h (or none) and a watcher
interval W. Each queue names and bounds these differently, and some cannot renew a lease at all:
for those, the timeout must outlast the longest job, and it is chosen from the durations
(sim.advice.queue_facts.no_renewal), with what a crash then costs. Published rules of thumb (a
heartbeat at most half the TTL; SQS's visibility timeout at least 6x a Lambda's timeout; Celery's
timeout above the longest task) are checked against the durations.

Each translation names the release its lines are for, cites the source of every mechanism it
relies on beside the value (repository, version, file:line), gives another version's lines apart
where they differ, and states the longest a crashed job waits to be found with the advised
settings; QueueAdvice.preset and .overrides say what those settings are in Lease Lab's words, so
that tests simulate the queue with them and check that figure. This module holds the broker and
workflow queues; sim.advice.queue_terms_pg the PostgreSQL ones.
"""

from __future__ import annotations

from sim.advice.queue_facts import (
    Facts,
    NoRenewal,
    OtherVersion,
    QueueAdvice,
    Rule,
    Setting,
    ceil_s,
    go_duration,
    ms,
    no_renewal,
)
from sim.advice.queue_terms_pg import (
    PG_QUEUES,
    graphile,
    oban,
    pg_boss,
    procrastinate,
    procrastinate_cron,
    river,
    solid_queue,
)
from sim.errors import ConfigError
from sim.support.in_words import duration, percent

__all__ = [
    "QUEUES",
    "NoRenewal",
    "QueueAdvice",
    "Rule",
    "Setting",
    "check_queue",
    "go_duration",
    "in_queue_terms",
    "no_renewal",
    "procrastinate_cron",
    "temporal_heartbeat_timeout",
]

QUEUES = {  # --as name -> display name
    "bullmq": "BullMQ 6 (PostgreSQL backend)",
    "temporal": "Temporal activity",
    "celery-redis": "Celery on Redis",
    "celery-sqs": "Celery on SQS",
    "sqs": "Amazon SQS",
    "hatchet": "Hatchet",
    **PG_QUEUES,
}
# Temporal Go SDK v1.48.0, internal/internal_task_handlers.go:2594 (0.8 x HeartbeatTimeout) and
# :46 (defaultMaxHeartbeatThrottleInterval 60 s); WorkerOptions.MaxHeartbeatThrottleInterval
# (internal/worker.go:340) sets that cap, since v1.13.0 (PR #660)
TEMPORAL_THROTTLE, TEMPORAL_MAX_THROTTLE = 0.8, 60.0
TEMPORAL_RETRY = 1.0  # RetryPolicy.InitialInterval default 1 s (internal/activity.go:155)
SQS_MAX_VISIBILITY = 43_200  # seconds (12 h), the SQS API's ceiling
LAMBDA_FACTOR = 6  # AWS: a queue's visibility timeout at least 6x its function's timeout
# kombu 5.6.2 kombu/transport/redis.py:1382 (call_repeatedly(10, maybe_restore_messages)) and
# :410 (restore_visible scans on every 10th call): the restore sweep runs about every 100 s,
# fixed; unacked_restore_interval / unacked_restore_throttle exist on kombu's main branch only
# (celery/kombu PR #2558, after 5.6.2)
CELERY_SWEEP = 100.0
KOMBU_RELEASE = "kombu 5.6.2, the latest release, with Celery 5.6"
KOMBU_MAIN = "kombu's main branch (PR #2558, unreleased after 5.6.2)"
# hatchet-dev/hatchet@89d130f3: pkg/client/action_listener.go:62 (worker heartbeat 4 s),
# pkg/repository/sqlcv1/tasks.sql:471 (stale after 30 s), internal/services/controllers/task/
# controller.go:277-282 (the reassignment polls every 1 s, backing off to 30 s when idle)
HATCHET_BEAT, HATCHET_STALE, HATCHET_REASSIGN = 4.0, 30.0, (1.0, 30.0)


def check_queue(name: str) -> str:
    """`name` if it is a queue `--as` knows; else ConfigError listing them in one line."""
    if name not in QUEUES:
        raise ConfigError(f"--as {name}: unknown queue; one of {', '.join(QUEUES)}")
    return name


def in_queue_terms(advice, queue: str) -> QueueAdvice:
    """`advice` (sim.advice.advisor.Advice) in `queue`'s own setting names and units (QUEUES)."""
    out = _TRANSLATORS[check_queue(queue)](Facts.of(advice))
    out.label = QUEUES[queue]
    return out


def _queue(queue: str, settings: list[Setting], **fields) -> QueueAdvice:
    return QueueAdvice(queue, QUEUES[queue], settings, **fields)


# ---- the queues ----------------------------------------------------------------------------------


def _bullmq(f: Facts) -> QueueAdvice:
    renew = f.heartbeat if f.heartbeat is not None else f.ttl / 2
    lock, renew_at, stall = ms(f.ttl) / 1000, ms(renew) / 1000, ms(f.watcher) / 1000
    # the two-phase check (0002_functions.sql:2274): a pass marks every active job, the next
    # reclaims a marked one whose lock is gone; a job crashed right after a renewal, just after a
    # pass, is marked one interval later and reclaimed at the first pass after its lock ends
    worst = max(lock, stall) + stall
    passes = (
        "two stalledIntervals: the lock is shorter than one"
        if lock < stall
        else "its lock, then one stalledInterval"
    )
    settings = [
        Setting("lockDuration", ms(f.ttl), f"{ms(f.ttl)} ms", "the advised TTL"),
        Setting(
            "lockRenewTime",
            ms(renew),
            f"{ms(renew)} ms",
            "the advised heartbeat interval"
            if f.heartbeat is not None
            else "BullMQ always renews; the advice needs no heartbeat, so keep its default, half "
            "the lock",
        ),
        Setting(
            "stalledInterval", ms(f.watcher), f"{ms(f.watcher)} ms", "the advised watcher interval"
        ),
        Setting(
            "maxStalledCount",
            1,
            "1",
            "the default: a job whose lock lapses twice fails; stalls do not use up its attempts",
        ),
    ]
    cannot = [
        f"reclaim a stalled job in one pass: the check marks on one pass and reclaims on the next, "
        f"so a crashed job is found up to {duration(worst)} after the crash ({passes})",
        f"stamp lock expiry with the database's clock: the PostgreSQL backend binds the worker's "
        f"Date.now(), so a worker clock {duration(f.ttl - renew)} behind (lockDuration - "
        f"lockRenewTime) loses its locks between renewals; keep clock skew well below that",
    ]
    return _queue(
        "bullmq",
        settings,
        cannot=cannot,
        rules=[f.half_rule(renew, f.ttl, "lockRenewTime / lockDuration")],
        version="BullMQ 6.2, taskforcesh/bullmq v6.2.0",
        worst_wait=worst,
        preset="bullmq",
        overrides={
            "policy.lease_ttl": lock,
            "policy.heartbeat": True,
            "policy.heartbeat_interval": renew_at,
            "policy.watcher_interval": stall,
        },
    )


def temporal_heartbeat_timeout(ttl: float, heartbeat: float) -> float:
    """The HeartbeatTimeout T whose SDK-throttled heartbeats (every min(0.8 T, 60 s), the
    throttle's cap left at its default) leave at least the advised slack ttl - heartbeat."""
    slack = ttl - heartbeat
    short = slack / (1 - TEMPORAL_THROTTLE)  # 0.8 T <= 60 s: T - 0.8 T >= slack
    timeout = short if TEMPORAL_THROTTLE * short <= TEMPORAL_MAX_THROTTLE else slack + 60
    return max(ttl, timeout)


def _temporal(f: Facts) -> QueueAdvice:
    b = f.bare
    close = ceil_s(b.ttl)
    settings = [
        Setting(
            "StartToCloseTimeout",
            close,
            go_duration(close),
            "it ends an attempt whatever its heartbeats, so it must outlast the longest job: "
            + f.bare_words(),
        )
    ]
    base = {
        "policy.execution_timeout": float(close),
        "policy.watcher_interval": TEMPORAL_RETRY,
        "policy.lease_ttl": float(close),
        "policy.heartbeat": False,
    }
    out = _queue(
        "temporal",
        settings,
        version="Go SDK v1.48.0; WorkerOptions.MaxHeartbeatThrottleInterval since v1.13.0, "
        "max_heartbeat_throttle_interval in Python, maxHeartbeatThrottleInterval in TypeScript "
        "and Java",
        preset="temporal",
        overrides=base,
    )
    h = f.heartbeat
    # Temporal resolves its timeouts in whole seconds, rounding up (internal/activity.go:101)
    timeout = None if h is None else ceil_s(f.ttl)
    if h is None or timeout is None or timeout >= close:
        why = (
            "the advice needs no heartbeat"
            if timeout is None
            else f"a heartbeat timeout of {go_duration(timeout)} would never fire before "
            "StartToCloseTimeout ends the attempt"
        )
        settings.append(Setting("HeartbeatTimeout", 0.0, "0 (unset)", why))
        text, out.worst_wait = f.crash_cost(
            TEMPORAL_RETRY, "StartToCloseTimeout", "the retry's InitialInterval"
        )
        out.cannot.append(text)
    else:
        sent = h  # min(0.8 x timeout, h) <= h: every RecordHeartbeat call goes through
        out.worst_wait = timeout + TEMPORAL_RETRY
        settings += [
            Setting(
                "HeartbeatTimeout",
                timeout,
                go_duration(timeout),
                f"the advised TTL in whole seconds; call RecordHeartbeat every {duration(h)}",
            ),
            Setting(
                "MaxHeartbeatThrottleInterval",
                h,
                go_duration(h),
                f"a worker option: the SDK sends at most one heartbeat per min(0.8 x "
                f"HeartbeatTimeout, this), 60 s by default, so heartbeats reach the server every "
                f"{duration(sent)}: a crash is found {duration(timeout - sent)} to "
                f"{duration(timeout)} after it, and the retry starts up to "
                f"{duration(out.worst_wait)} after it",
            ),
        ]
        out.overrides = {
            **base,
            "policy.heartbeat": True,
            "policy.heartbeat_interval": sent,
            "policy.lease_ttl": float(timeout),
        }
        out.rules.append(f.half_rule(sent, timeout, "heartbeats sent / HeartbeatTimeout"))
        slow = ceil_s(temporal_heartbeat_timeout(f.ttl, h))
        if slow < close:
            out.others.append(_temporal_default_cap(f, slow, base))
    out.cannot.append(
        "stop an attempt at StartToCloseTimeout unless it honours its context: its retry runs "
        "beside it, and its late result is dropped (the SDK logs 'Activity complete after "
        "timeout', internal/internal_task_handlers.go:2480)"
    )
    return out


def _temporal_default_cap(f: Facts, slow: int, base: dict) -> OtherVersion:
    """The heartbeat lines with MaxHeartbeatThrottleInterval left at 60 s: the SDK sends one
    heartbeat per 0.8 x HeartbeatTimeout, so the timeout `slow` is lengthened to keep the advised
    slack, and a crash is found later."""
    h = f.heartbeat or 0.0
    slow_sent = max(h, min(TEMPORAL_THROTTLE * slow, TEMPORAL_MAX_THROTTLE))
    return OtherVersion(
        "MaxHeartbeatThrottleInterval left at its 60 s default (or a Go SDK before v1.13.0)",
        [
            Setting(
                "HeartbeatTimeout",
                slow,
                go_duration(slow),
                f"the SDK sends one heartbeat per 0.8 x the timeout, {duration(slow_sent)}, so "
                f"the timeout must be {go_duration(slow)} to leave the advised "
                f"{duration(f.ttl - h)} for a late one",
            )
        ],
        [
            f"a crash is then found {duration(slow - slow_sent)} to {duration(slow)} after it "
            f"(the retry up to {duration(slow + TEMPORAL_RETRY)}), against the advised "
            f"{duration(f.recovery)} on average"
        ],
        worst_wait=slow + TEMPORAL_RETRY,
        overrides={
            **base,
            "policy.heartbeat": True,
            "policy.heartbeat_interval": slow_sent,
            "policy.lease_ttl": float(slow),
        },
    )


def _celery_rules(f: Facts, default: float) -> list[Rule]:
    b = f.bare
    return [
        Rule(
            "visibility_timeout above the longest task",
            b.ttl >= f.longest,
            f"{duration(b.ttl)} against the longest observed {duration(f.longest)} (add any eta or "
            f"countdown you use)",
        ),
        Rule(
            f"the default {duration(default)}",
            default >= b.ttl,
            (
                f"it covers the observed tasks, at {default / b.ttl:.3g}x what these durations "
                "need: raising it (as projects do after a duplicate) only makes every crash wait "
                f"longer, up to {duration(default)}"
            )
            if default >= b.ttl
            else f"too short: {percent(f.longer_than(default))} of the observed tasks outlast it "
            "and would run twice",
        ),
    ]


def _celery_settings(f: Facts, acked: str, renewed: str) -> list[Setting]:
    """acks_late, the visibility timeout and the prefetch, on either broker."""
    return [
        Setting(
            "task_acks_late", True, "True", f"{acked} after the task, so a crash redelivers it"
        ),
        Setting(
            "broker_transport_options['visibility_timeout']",
            ceil_s(f.bare.ttl),
            f"{ceil_s(f.bare.ttl)}",
            f"seconds, never {renewed}: " + f.bare_words(),
        ),
        Setting(
            "worker_prefetch_multiplier",
            1,
            "1",
            "a prefetched message's visibility timeout runs while it waits in the worker's buffer",
        ),
    ]


def _celery_redis(f: Facts) -> QueueAdvice:
    visibility = float(ceil_s(f.bare.ttl))
    sweep = ceil_s(f.watcher)
    text, worst = f.crash_cost(
        CELERY_SWEEP, "visibility_timeout", "until the restore sweep finds it"
    )
    base = {"policy.lease_ttl": visibility, "policy.prefetch": 1}
    main_text, main_worst = f.crash_cost(float(sweep), "visibility_timeout")
    main = OtherVersion(
        KOMBU_MAIN,
        [
            Setting(
                "broker_transport_options['unacked_restore_interval']",
                sweep,
                f"{sweep}",
                f"seconds between restore sweeps, {f.watcher_words(sweep)}",
            ),
            Setting(
                "broker_transport_options['unacked_restore_throttle']",
                1,
                "1",
                "a scan on every sweep (the default 10 scans on every 10th)",
            ),
        ],
        [f"with them, {main_text.removeprefix('renew a lease: ')}"],
        worst_wait=main_worst,
        overrides={**base, "policy.watcher_interval": float(sweep)},
    )
    return _queue(
        "celery-redis",
        _celery_settings(f, "acked", "renewed"),
        cannot=[
            text,
            f"restore sooner: the sweep runs about every {duration(CELERY_SWEEP)} in the released "
            "kombu (every 10th of its 10 s calls, redis.py:1382 and :410); kombu's main branch "
            "makes it a setting (below)",
            "with task_acks_late = False (the default) a crash loses the running task: no "
            "timeout helps",
        ],
        rules=_celery_rules(f, 3600.0),
        version=KOMBU_RELEASE,
        worst_wait=worst,
        preset="celery-redis",
        overrides={**base, "policy.watcher_interval": CELERY_SWEEP},
        others=[main],
    )


def _celery_sqs(f: Facts) -> QueueAdvice:
    b = f.bare
    text, worst = f.crash_cost(0.0, "visibility_timeout")
    cannot = [text]
    if b.ttl > SQS_MAX_VISIBILITY:
        cannot.append(
            f"hold a message longer than 12 h: SQS caps the visibility timeout at "
            f"{SQS_MAX_VISIBILITY} s, below the {ceil_s(b.ttl)} s these durations need"
        )
    return _queue(
        "celery-sqs",
        _celery_settings(f, "deleted", "extended"),
        cannot=cannot,
        rules=_celery_rules(f, 1800.0),
        version=KOMBU_RELEASE,
        worst_wait=worst,
        preset="celery-sqs",
        overrides={"policy.lease_ttl": float(ceil_s(b.ttl)), "policy.prefetch": 1},
    )


def _sqs(f: Facts) -> QueueAdvice:
    b = f.bare
    if f.heartbeat is not None:
        visibility = ceil_s(f.ttl)
        settings = [
            Setting("VisibilityTimeout", visibility, f"{visibility}", "seconds, the advised TTL"),
            Setting(
                "ChangeMessageVisibility",
                f.heartbeat,
                f"VisibilityTimeout={visibility} every {duration(f.heartbeat)}",
                "the advised heartbeat: each call restarts the timeout from now",
            ),
        ]
        cannot = [
            f"hold a crashed consumer's message past its timeout: it is visible again up to "
            f"{duration(visibility)} after the crash (the last extension, then the timeout)"
        ]
        rules = [f.half_rule(f.heartbeat, visibility, "extension interval / VisibilityTimeout")]
        worst = float(visibility)
        overrides = {
            "policy.lease_ttl": float(visibility),
            "policy.heartbeat": True,
            "policy.heartbeat_interval": f.heartbeat,
        }
    else:
        visibility = ceil_s(b.ttl)
        settings = [
            Setting("VisibilityTimeout", visibility, f"{visibility}", "seconds: " + f.bare_words())
        ]
        text, worst = f.crash_cost(0.0, "VisibilityTimeout")
        cannot, rules = [text], []
        overrides = {"policy.lease_ttl": float(visibility)}
    function = ceil_s(b.ttl)  # a Lambda's timeout must outlast the longest job
    lambda_visibility = LAMBDA_FACTOR * function
    rules.append(
        Rule(
            "VisibilityTimeout at least 6x a Lambda's timeout",
            visibility >= lambda_visibility,
            f"a Lambda consumer needs a timeout of {function} s to outlast these jobs, so the "
            f"rule asks {lambda_visibility} s; it leaves room for the poller's retries, but a "
            f"crashed or timed-out invocation then waits up to {duration(lambda_visibility)}, "
            f"{lambda_visibility / visibility:.3g}x the {visibility} s advised here: follow it for "
            "Lambda, not for a consumer that extends visibility",
        )
    )
    if visibility > SQS_MAX_VISIBILITY:
        cannot.append(f"hold a message longer than {SQS_MAX_VISIBILITY} s (12 h)")
    return _queue(
        "sqs",
        settings,
        cannot=cannot,
        rules=rules,
        version="SQS API 2012-11-05",
        worst_wait=worst,
        preset="sqs-visibility",
        overrides=overrides,
    )


def _hatchet(f: Facts) -> QueueAdvice:
    b = f.bare
    low, high = HATCHET_REASSIGN
    typical = HATCHET_STALE - HATCHET_BEAT / 2 + low / 2
    worst = HATCHET_STALE + high
    settings = [
        Setting(
            "execution_timeout",
            ceil_s(b.ttl),
            f'"{ceil_s(b.ttl)}s"',
            "a hard limit per attempt: " + f.bare_words() + "; ctx.refresh_timeout() extends it "
            "from inside a longer task",
        )
    ]
    cannot = [
        f"tune crash detection: workers heartbeat every {duration(HATCHET_BEAT)} and are declared "
        f"dead after {duration(HATCHET_STALE)} (fixed in the client and the server's SQL), and the "
        f"reassignment polls every {duration(low)} to {duration(high)}: a crashed task is found "
        f"about {duration(typical)} after the crash when the tenant is busy, up to "
        f"{duration(worst)} when it is idle, against the advised {duration(f.recovery)}"
    ]
    rules = [f.half_rule(HATCHET_BEAT, HATCHET_STALE, "process heartbeat / stale age (fixed)")]
    return _queue(
        "hatchet",
        settings,
        cannot=cannot,
        rules=rules,
        version="hatchet-dev/hatchet@89d130f3, Python SDK 1.37.5",
        worst_wait=worst,
        preset="hatchet",
        overrides={
            "policy.execution_timeout": float(ceil_s(b.ttl)),
            "policy.watcher_interval": high,  # the idle tenant's reassignment: the worst case
        },
    )


_TRANSLATORS = {
    "bullmq": _bullmq,
    "temporal": _temporal,
    "celery-redis": _celery_redis,
    "celery-sqs": _celery_sqs,
    "sqs": _sqs,
    "hatchet": _hatchet,
    "procrastinate": procrastinate,
    "river": river,
    "oban": oban,
    "pg-boss": pg_boss,
    "graphile": graphile,
    "solid-queue": solid_queue,
}
