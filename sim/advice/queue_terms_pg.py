"""The advice in the settings of the PostgreSQL queues (`advise --as QUEUE`, sim.advice.queue_terms
has the face and the other queues): procrastinate, River, Oban, pg-boss, graphile-worker and
Solid Queue. Each mechanism a line relies on is cited beside its value (repository, version,
file:line), and each QueueAdvice says the worst wait it prints and what its settings are in
Lease Lab's words (preset, overrides), which tests simulate.
"""

from __future__ import annotations

from sim.advice.queue_facts import (
    Facts,
    OtherVersion,
    QueueAdvice,
    Rule,
    Setting,
    ceil_s,
    go_duration,
    ms,
)
from sim.support.in_words import amount, duration, percent

PG_QUEUES = {  # --as name -> display name
    "procrastinate": "procrastinate 3",
    "river": "River",
    "oban": "Oban (Lifeline plugin)",
    "pg-boss": "pg-boss",
    "graphile": "graphile-worker",
    "solid-queue": "Solid Queue",
}
SECONDS_PER_DAY = 86_400
# riverqueue/river v0.43.0: internal/maintenance/job_rescuer.go:31 (JobRescuerIntervalDefault
# 30 s), client.go:53 (JobTimeoutDefault 1 min), client.go:52 (JobStuckThresholdDefault 10 s: a
# job that has not returned that long after its timeout's cancellation is stuck), client.go:361
# ("RescueStuckJobsAfter must be greater than JobTimeout"), internal/jobexecutor/
# job_executor.go:244 (JobTimeout cancels the job's context; the executor waits for Work to return)
RIVER_RESCUER, RIVER_JOB_TIMEOUT, RIVER_STUCK = 30.0, 60.0, 10.0
# graphile/worker v0.16: a lock counts as stale after 4 h; the reset runs every 8-10 min
GRAPHILE_STALE, GRAPHILE_RESET = 4 * 3600.0, (480.0, 600.0)
# timgit/pg-boss 12.27.0: src/attorney.ts:609 (heartbeatSeconds an integer >= 10), :657
# (superviseIntervalSeconds default 60), :670-673 (monitorIntervalSeconds >= 1, default 60);
# src/boss.ts:60 (supervise() every superviseIntervalSeconds runs #monitor, :211, which
# monitorIntervalSeconds only throttles per queue, plans.ts:785); the per-job heartbeat and
# failJobsByHeartbeat exist from 12.12.0 (PR #716)
PG_BOSS_MIN_HEARTBEAT, PG_BOSS_SUPERVISE = 10, 60
# procrastinate 3.9.0: the documented retry_stalled_jobs task (docs/howto/production/
# retry_stalled_jobs.md) is a periodic job deferred into the queue: each tick is a job that
# takes a worker slot for its fetch, its get_stalled_jobs query and its finish
# (procrastinate/manager.py:223); cron has a seconds column; the docs' example runs every 10 min
RESCUE_JOB_SHARE = 0.01  # the rescue jobs chosen to be at most 1% of the jobs the queue runs
RESCUE_CRON_MAX = 600.0
# rails/solid_queue v1.5.0: lib/solid_queue/supervisor/maintenance.rb:11 (the prune runs every
# process_alive_threshold), lib/solid_queue.rb:30-31 (heartbeat 60 s, threshold 5 min)
# oban-bg/oban v2.23.1: lib/oban/plugins/lifeline.ex:69-70 (interval 1 min, rescue_after 60 min,
# in ms); on main after 2.23.1 (commit 9de05cee) it is Oban.Lifeline, configured by a top-level
# `lifeline:` key, taking Oban.Period tuples


def procrastinate_cron(seconds: float) -> str:
    """A periodic task's cron every `seconds` (procrastinate takes a 6th column for seconds)."""
    s = ceil_s(seconds)
    if s < 60:
        return f"* * * * * */{s}"
    return f"*/{ceil_s(s / 60)} * * * *"


def _cron_step(seconds: float) -> float:
    """The interval a cron can express, at least `seconds`: whole seconds, whole minutes above 1."""
    return float(ceil_s(seconds) if seconds < 60 else 60 * ceil_s(seconds / 60))


def procrastinate(f: Facts) -> QueueAdvice:
    beat = f.heartbeat if f.heartbeat is not None else f.ttl / 2
    stale = f.ttl
    fast = _cron_step(f.watcher)
    # each tick is a job of the queue: chosen so that the rescue jobs stay within
    # RESCUE_JOB_SHARE of the queue's own jobs (never beyond the docs' 10 min)
    budget = 1.0 / (RESCUE_JOB_SHARE * f.jobs_per_s)
    cron = max(fast, min(_cron_step(budget), RESCUE_CRON_MAX))
    daily = SECONDS_PER_DAY * f.jobs_per_s

    def cost(every: float) -> str:
        ticks = SECONDS_PER_DAY / every
        return (
            f"{amount(ticks)} rescue jobs a day, {percent(ticks / daily)} of the {amount(daily)} "
            f"jobs the queue runs at {f.jobs_per_s:.3g} jobs/s, each a worker slot for its fetch, "
            "its query and its finish"
        )

    worst = stale + cron
    settings = [
        Setting(
            "update_heartbeat_interval",
            beat,
            f"{beat:g}",
            "seconds (Worker option), the advised heartbeat: liveness is per worker process"
            if f.heartbeat is not None
            else "seconds: liveness is per process and always on; half the stale age",
        ),
        Setting("stalled_worker_timeout", stale, f"{stale:g}", "seconds, the advised TTL"),
        Setting(
            "get_stalled_jobs(seconds_since_heartbeat=...)",
            stale,
            f"{stale:g}",
            "the same age, in the retry_stalled_jobs task",
        ),
        Setting(
            "retry_stalled_jobs cron",
            cron,
            f'"{procrastinate_cron(cron)}"',
            f"every {duration(cron)}: {cost(cron)}"
            + (
                f"; the advised watcher interval ({duration(f.watcher)}) would be a job every "
                f"{duration(fast)}, {cost(fast)}, so the interval is the shortest whose rescue "
                f"jobs stay within {percent(RESCUE_JOB_SHARE)} of the queue's jobs"
                if cron > fast
                else ""
            ),
        ),
    ]
    cannot = [
        f"rescue without your task: nothing retries stalled jobs unless retry_stalled_jobs is "
        f"scheduled, and it runs as a job in the same queue, so a crashed job is found up to "
        f"{duration(worst)} after the crash (the stale age, then a cron tick), later when every "
        "worker is busy",
        "see a hung job in a live process: liveness is per process, so a job stuck inside a "
        "process that still heartbeats is never rescued",
    ]
    base = {
        "policy.process_heartbeat_interval": beat,
        "policy.process_stale_after": stale,
        "policy.watcher_interval": cron,
    }
    others = []
    if cron > fast:
        others.append(
            OtherVersion(
                f"the advised recovery instead, at that cost (cron every {duration(fast)})",
                [
                    Setting(
                        "retry_stalled_jobs cron", fast, f'"{procrastinate_cron(fast)}"', cost(fast)
                    )
                ],
                [f"a crashed job is then found up to {duration(stale + fast)} after the crash"],
                worst_wait=stale + fast,
                overrides={**base, "policy.watcher_interval": fast},
            )
        )
    return QueueAdvice(
        "procrastinate",
        PG_QUEUES["procrastinate"],
        settings,
        cannot,
        [f.half_rule(beat, stale, "update_heartbeat_interval / stalled_worker_timeout")],
        version="procrastinate 3.9.0",
        worst_wait=worst,
        preset="procrastinate",
        overrides=base,
        others=others,
    )


def river(f: Facts) -> QueueAdvice:
    timeout = float(ceil_s(f.bare.ttl))
    rescue = timeout + RIVER_STUCK
    text, worst = f.crash_cost(RIVER_RESCUER, "RescueStuckJobsAfter", timeout=rescue)
    settings = [
        Setting(
            "JobTimeout",
            timeout,
            go_duration(timeout),
            "River cancels a job's context after it: "
            + f.bare_words()
            + f" (the default {duration(RIVER_JOB_TIMEOUT)} would cut off "
            f"{percent(f.longer_than(RIVER_JOB_TIMEOUT))} of the observed jobs)",
        ),
        Setting(
            "RescueStuckJobsAfter",
            rescue,
            f"{go_duration(rescue)} (time.Duration)",
            f"no heartbeat in River: JobTimeout plus JobStuckThreshold's default "
            f"{duration(RIVER_STUCK)}, by which a job cancelled at its timeout has returned, or is "
            "stuck for River too; River requires it to be greater than JobTimeout, or running "
            "jobs would be rescued",
        ),
    ]
    rules = [
        Rule(
            "JobTimeout above the longest job",
            timeout >= f.longest,
            f"the advised {duration(timeout)} against the longest observed {duration(f.longest)}",
        ),
        Rule(
            "RescueStuckJobsAfter greater than JobTimeout",
            rescue > timeout,
            f"{duration(rescue)} against {duration(timeout)}: a {duration(RIVER_STUCK)} margin",
        ),
    ]
    return QueueAdvice(
        "river",
        PG_QUEUES["river"],
        settings,
        [text],
        rules,
        version="riverqueue/river v0.43.0",
        worst_wait=worst,
        preset="river",
        overrides={
            "policy.lease_ttl": rescue,
            "policy.watcher_interval": RIVER_RESCUER,
            "policy.deadline": timeout,
            "policy.deadline_action": "cancel",
        },
    )


def oban(f: Facts) -> QueueAdvice:
    rescue = ceil_s(f.bare.ttl)
    interval = ms(f.watcher)
    text, worst = f.crash_cost(interval / 1000, "rescue_after")
    released = [
        Setting(
            "Lifeline rescue_after",
            rescue,
            f"plugins: [{{Oban.Plugins.Lifeline, rescue_after: :timer.seconds({rescue}), "
            f"interval: {interval}}}]",
            "no heartbeat in open-source Oban: " + f.bare_words(),
        ),
        Setting(
            "Lifeline interval",
            interval,
            f"{interval}",
            "milliseconds between rescues, the advised watcher interval",
        ),
    ]
    main = OtherVersion(
        "Oban's main branch (after 2.23.1: the plugin is Oban.Lifeline, a top-level key)",
        [
            Setting(
                "lifeline",
                rescue,
                f"[rescue_after: {{{rescue}, :seconds}}, interval: {interval}]",
                "the same values (Oban.Plugins.Lifeline still works there, deprecated)",
            )
        ],
        worst_wait=worst,
        overrides={"policy.lease_ttl": float(rescue), "policy.watcher_interval": interval / 1000},
    )
    return QueueAdvice(
        "oban",
        PG_QUEUES["oban"],
        released,
        [text],
        version="Oban 2.23, oban-bg/oban v2.23.1",
        worst_wait=worst,
        preset="oban-lifeline",
        overrides=main.overrides,
        others=[main],
    )


def pg_boss(f: Facts) -> QueueAdvice:
    b = f.bare
    expire = ceil_s(b.ttl)
    supervise = max(1, ceil_s(f.watcher))
    settings = [
        Setting(
            "expireInSeconds",
            expire,
            f"{expire}",
            "a hard limit: the monitor fails a job this long after it started even while it "
            "heartbeats, and work() drops the handler's late result, so it must outlast the "
            "longest job: " + f.bare_words(),
        ),
        Setting(
            "superviseIntervalSeconds",
            supervise,
            f"{supervise}",
            f"the monitor runs only inside supervise(), every superviseIntervalSeconds (default "
            f"{PG_BOSS_SUPERVISE} s): {f.watcher_words(supervise)}",
        ),
        Setting(
            "monitorIntervalSeconds",
            1,
            "1",
            "its smallest value: it only throttles each queue's monitor further, so 1 leaves "
            "superviseIntervalSeconds in charge",
        ),
    ]
    base = {
        "policy.lease_ttl": float(expire),
        "policy.deadline": float(expire),
        "policy.deadline_action": "drop",
        "policy.watcher_interval": float(supervise),
        "policy.heartbeat": False,
    }
    out = QueueAdvice(
        "pg-boss",
        PG_QUEUES["pg-boss"],
        settings,
        version="pg-boss 12.27; heartbeatSeconds from 12.12",
        preset="pg-boss",
        overrides=base,
    )
    beat = max(PG_BOSS_MIN_HEARTBEAT, ceil_s(f.ttl))
    no_beat_text, no_beat_worst = f.crash_cost(
        supervise, "expireInSeconds", "until the monitor finds it"
    )
    if f.heartbeat is None or beat >= expire:
        if f.heartbeat is not None:
            settings.append(
                Setting(
                    "heartbeatSeconds",
                    None,
                    "unset",
                    f"a heartbeat timeout of {beat} s would never fire before expireInSeconds",
                )
            )
        out.cannot.append(no_beat_text)
        out.worst_wait = no_beat_worst
        return out
    _pg_boss_heartbeat(f, out, beat, supervise, expire)
    out.others.append(
        OtherVersion(
            "pg-boss before 12.12 (no per-job heartbeat)",
            [],
            [no_beat_text.removeprefix("renew a lease: ")],
            worst_wait=no_beat_worst,
            overrides=base,
        )
    )
    return out


def _pg_boss_heartbeat(f: Facts, out: QueueAdvice, beat: int, supervise: int, expire: int):
    """pg-boss 12.12+'s per-job heartbeat lines, their worst wait and Lease Lab settings, into
    `out` (heartbeatSeconds at least 10)."""
    raised = beat > ceil_s(f.ttl)
    refresh = beat / 2 if raised else float(f.heartbeat or 0.0)
    out.worst_wait = beat + supervise
    out.settings += [
        Setting(
            "heartbeatSeconds",
            beat,
            f"{beat}",
            "12.12+: "
            + (
                f"the advised TTL, {duration(f.ttl)}, raised to pg-boss's minimum"
                if raised
                else "the advised TTL in whole seconds"
            )
            + f"; a crash is found up to {duration(out.worst_wait)} after it (heartbeatSeconds + "
            "superviseIntervalSeconds)",
        ),
        Setting(
            "heartbeatRefreshSeconds",
            refresh,
            f"{refresh:g}",
            "12.12+: "
            + (
                "half of heartbeatSeconds, pg-boss's default" if raised else "the advised heartbeat"
            ),
        ),
    ]
    out.overrides = {
        **out.overrides,
        "policy.heartbeat": True,
        "policy.heartbeat_interval": float(refresh),
        "policy.lease_ttl": float(beat),
        "policy.execution_timeout": float(expire),
    }
    if raised:
        out.cannot.append(
            f"a heartbeat timeout below {PG_BOSS_MIN_HEARTBEAT} s: the advised {duration(f.ttl)} "
            f"becomes {beat} s, so a crash waits up to {duration(out.worst_wait)}"
        )
    out.rules.append(f.half_rule(refresh, beat, "heartbeatRefreshSeconds / heartbeatSeconds"))


def graphile(f: Facts) -> QueueAdvice:
    low, high = GRAPHILE_RESET
    worst = GRAPHILE_STALE + high
    return QueueAdvice(
        "graphile",
        PG_QUEUES["graphile"],
        [],
        [
            "set a lease: a job's lock counts as stale after a fixed "
            f"{duration(GRAPHILE_STALE)} and the reset runs every {duration(low)} to "
            f"{duration(high)}, so a crashed job is found up to {duration(worst)} after the "
            f"crash, against the advised {duration(f.recovery)}; there is no heartbeat, so the "
            f"{duration(f.ttl)} TTL advised cannot be expressed",
            "a graceful shutdown releases its jobs at once: stop workers with SIGTERM, not SIGKILL",
        ],
        version="graphile-worker 0.16 and later",
        worst_wait=worst,
        preset="graphile-worker",
        overrides={"policy.watcher_interval": high},
    )


def solid_queue(f: Facts) -> QueueAdvice:
    beat = f.heartbeat if f.heartbeat is not None else f.ttl / 2
    threshold = f.ttl
    worst = 2 * threshold
    settings = [
        Setting(
            "process_heartbeat_interval",
            beat,
            f"{beat:g}.seconds",
            "the advised heartbeat (per process)"
            if f.heartbeat is not None
            else "liveness is per process and always on; half the alive threshold",
        ),
        Setting("process_alive_threshold", threshold, f"{threshold:g}.seconds", "the advised TTL"),
    ]
    cannot = [
        f"re-run a crashed job: the supervisor prunes dead processes every "
        f"process_alive_threshold, and their jobs fail, so a crashed job is failed up to "
        f"{duration(worst)} after the crash (the threshold, then a prune) and costs a retry by "
        "hand (or Active Job's retry_on), however short the threshold is"
    ]
    return QueueAdvice(
        "solid-queue",
        PG_QUEUES["solid-queue"],
        settings,
        cannot,
        [f.half_rule(beat, threshold, "process_heartbeat_interval / process_alive_threshold")],
        version="Solid Queue 1.5, rails/solid_queue v1.5.0",
        worst_wait=worst,
        preset="solid-queue",
        overrides={
            "policy.lease_ttl": threshold,
            "policy.heartbeat_interval": beat,
            "policy.watcher_interval": threshold,
        },
    )
