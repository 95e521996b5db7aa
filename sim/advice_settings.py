"""Lease advice in a queue's own settings: `python -m sim advise durations.csv --as QUEUE`.

    advice = sim.advise("durations.csv", arrival_rate=1)
    print(in_queue_terms(advice, "bullmq"))   # lockDuration / lockRenewTime / stalledInterval ...

The advisor (sim.advisor) recommends a TTL L, a heartbeat interval h (or none) and a watcher
interval W. Each queue names and bounds these differently, and some cannot renew a lease at all:
for those, the timeout must outlast the longest job, and this module takes that timeout from the
advisor's own candidates without a heartbeat (`no_renewal`), and says what a crash then costs.
Published rules of thumb (a heartbeat at most half the TTL; SQS's visibility timeout at least 6x
a Lambda's timeout; Celery's timeout above the longest task) are checked against the durations.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from sim import files
from sim.errors import ConfigError
from sim.wording import amount, duration, percent

QUEUES = {  # --as name -> display name
    "bullmq": "BullMQ 6 (PostgreSQL backend)",
    "temporal": "Temporal activity",
    "celery-redis": "Celery on Redis",
    "celery-sqs": "Celery on SQS",
    "sqs": "Amazon SQS",
    "hatchet": "Hatchet",
    "procrastinate": "procrastinate 3",
    "river": "River",
    "oban": "Oban (Lifeline plugin)",
    "pg-boss": "pg-boss",
    "graphile": "graphile-worker",
    "solid-queue": "Solid Queue",
}
FLOOR_TOLERANCE = 0.01  # no_renewal: within 1% of the lowest upper bound any timeout reaches
TEMPORAL_THROTTLE, TEMPORAL_MAX_THROTTLE = 0.8, 60.0  # sdk-go internal_task_handlers.go:2594, :46
SQS_MAX_VISIBILITY = 43_200  # seconds (12 h), the SQS API's ceiling
LAMBDA_FACTOR = 6  # AWS: a queue's visibility timeout at least 6x its function's timeout
CELERY_SWEEP = 100.0  # kombu redis: restore every 10 s, scanning every 10th call
HATCHET_BEAT, HATCHET_STALE, HATCHET_REASSIGN = 4.0, 30.0, (1.0, 30.0)
RIVER_RESCUER, RIVER_JOB_TIMEOUT = 30.0, 60.0
GRAPHILE_STALE, GRAPHILE_RESET = 4 * 3600.0, (480.0, 600.0)
PG_BOSS_MIN_HEARTBEAT = 10


def check_queue(name: str) -> str:
    """`name` if it is a queue `--as` knows; else ConfigError listing them in one line."""
    if name not in QUEUES:
        raise ConfigError(f"--as {name}: unknown queue; one of {', '.join(QUEUES)}")
    return name


@dataclass(frozen=True)
class Setting:
    """One of the queue's settings: its name, the value in the queue's own unit, and why."""

    name: str
    value: object
    text: str  # the value as the queue's configuration spells it
    why: str


@dataclass(frozen=True)
class Rule:
    """A published rule of thumb, whether the recommendation keeps it, and what that means here."""

    name: str
    holds: bool
    text: str


@dataclass(frozen=True)
class NoRenewal:
    """The advisor's best timeout without a heartbeat, at its watcher interval."""

    ttl: float
    watcher_interval: float
    risk: float  # predicted false expiry per job
    risk_high: float  # its 95% upper bound
    per_day: float
    recovery: float  # mean predicted recovery after a crash (s)
    feasible: bool


@dataclass
class QueueAdvice:
    """The advice in one queue's own settings, what the queue cannot do, and the rules checked."""

    queue: str
    settings: list[Setting]
    cannot: list[str] = field(default_factory=list)
    rules: list[Rule] = field(default_factory=list)

    @property
    def label(self) -> str:
        return QUEUES[self.queue]

    def value(self, name: str):
        """The value of the setting called `name` (KeyError if the advice sets no such setting)."""
        for s in self.settings:
            if s.name == name:
                return s.value
        raise KeyError(name)

    def rule(self, name: str) -> Rule:
        return next(r for r in self.rules if r.name == name)

    def lines(self) -> list[str]:
        out = [f"in {self.label}'s own settings:"]
        out += [f"  {s.name} = {s.text}: {s.why}" for s in self.settings] or [
            "  none: it has no lease, heartbeat or rescue setting to change"
        ]
        if self.cannot:
            out.append(f"what {self.label} cannot do:")
            out += [f"  {line}" for line in self.cannot]
        if self.rules:
            out.append("rules of thumb:")
            out += [
                f"  {r.name}: {'holds' if r.holds else 'DOES NOT HOLD'}; {r.text}"
                for r in self.rules
            ]
        return out

    def __str__(self) -> str:
        return "\n".join(self.lines())

    def save(self, directory: str | Path, *, overwrite: bool = False) -> list[Path]:
        """Write settings-QUEUE.txt (as printed) into `directory` (sim.files.directory's rules)."""
        path = files.directory(directory, overwrite) / f"settings-{self.queue}.txt"
        path.write_text(str(self) + "\n", encoding="utf-8")
        return [path]


def in_queue_terms(advice, queue: str) -> QueueAdvice:
    """`advice` (sim.advisor.Advice) in `queue`'s own setting names and units (see QUEUES)."""
    return _TRANSLATORS[check_queue(queue)](_Facts.of(advice))


def no_renewal(advice) -> NoRenewal:
    """The advice itself when it has no heartbeat; else the shortest timeout without one that the
    advisor finds feasible at its watcher interval, or, when none is (a sample of n durations
    cannot show a share below about 3/n), the shortest whose false-expiry upper bound is within
    FLOOR_TOLERANCE of the lowest any reaches."""
    if advice.heartbeat_interval is None:
        return NoRenewal(
            ttl=float(advice.ttl),
            watcher_interval=float(advice.watcher_interval),
            risk=float(advice.predicted_false_expiry),
            risk_high=float(advice.predicted_false_expiry_high),
            per_day=float(advice.false_expiries_per_day),
            recovery=float(advice.predicted_recovery_mean),
            feasible=bool(advice.met),
        )
    table = advice.candidates
    bare = table[table["heartbeat_interval"].isna()]
    at_w = bare[bare["watcher_interval"] == advice.watcher_interval]
    bare = at_w if len(at_w) else bare
    feasible = bare[bare["feasible"]]
    if len(feasible):
        row = feasible.loc[feasible["ttl"].idxmin()]
    else:
        floor = bare["predicted_false_expiry_high"].min()
        near = bare[bare["predicted_false_expiry_high"] <= floor * (1 + FLOOR_TOLERANCE)]
        row = near.sort_values(["ttl", "predicted_false_expiry"]).iloc[0]
    return NoRenewal(
        ttl=float(row["ttl"]),
        watcher_interval=float(row["watcher_interval"]),
        risk=float(row["predicted_false_expiry"]),
        risk_high=float(row["predicted_false_expiry_high"]),
        per_day=float(row["false_expiries_per_day"]),
        recovery=float(row["predicted_recovery_mean"]),
        feasible=bool(len(feasible)),
    )


@dataclass(frozen=True)
class _Facts:
    """What every translation reads from an Advice."""

    ttl: float
    heartbeat: float | None
    watcher: float
    recovery: float
    bare: NoRenewal
    p99: float
    longest: float
    n: int
    samples: np.ndarray
    crashes_per_day: float  # jobs whose worker crashes under them, a day

    @classmethod
    def of(cls, advice) -> _Facts:
        i = advice.inputs
        a = advice.assumptions
        return cls(
            ttl=float(advice.ttl),
            heartbeat=advice.heartbeat_interval,
            watcher=float(advice.watcher_interval),
            recovery=float(advice.recovery_mean),
            bare=no_renewal(advice),
            p99=float(i["durations_p99"]),
            longest=float(i["durations_max"]),
            n=int(i["durations_n"]),
            samples=np.asarray(advice.durations.samples, dtype=float),
            crashes_per_day=a.crash_rate * i["workers"] * 24 * i["utilisation"],
        )

    def longer_than(self, seconds: float) -> float:
        """The share of the observed durations longer than `seconds`."""
        return float(np.mean(self.samples > seconds))

    def bare_words(self) -> str:
        b = self.bare
        if self.heartbeat is None:
            return "the advised TTL (the advice renews nothing)"
        if b.feasible:
            return (
                "the shortest timeout without renewal that meets the target: predicted false "
                f"expiry {percent(b.risk)} per job (95% upper bound {percent(b.risk_high)})"
            )
        return (
            f"no timeout without renewal meets the target provably ({self.n} durations "
            f"cannot show a share below {percent(b.risk_high)}); this is the shortest at that "
            f"floor: predicted {percent(b.risk)} per job, {amount(b.per_day)} false expiries a "
            f"day; the longest observed job took {duration(self.longest)}"
        )

    def crash_cost(self, sweep: float, name: str, finder: str = "until the sweep finds it") -> str:
        """What a crash costs when nothing renews the no_renewal timeout, found by a sweep every
        `sweep` s (0: the timeout's end makes the job claimable): the worst and mean wait, and the
        day's extra waiting against the advised renewable lease."""
        b = self.bare
        found = b.ttl + sweep
        mean = self.bare_recovery(sweep)
        by = f" ({name} + {duration(sweep)} {finder})" if sweep else ""
        text = (
            f"renew a lease: a crashed job waits out the whole {name}: it is found up to "
            f"{duration(found)} after the crash{by} and claimed again about {duration(mean)} after "
            f"it on average"
        )
        if self.heartbeat is None:  # the advice renews nothing either
            return f"{text}; at {amount(self.crashes_per_day)} crashed jobs a day"
        extra = max(mean - self.recovery, 0.0)
        return (
            f"{text}, against {duration(self.recovery)} with the advised renewable lease; at "
            f"{amount(self.crashes_per_day)} crashed jobs a day that is "
            f"{duration(extra * self.crashes_per_day)} more waiting a day"
        )

    def bare_recovery(self, sweep: float) -> float:
        """The advisor's mean recovery without renewal, its watcher's mean wait (W/2) replaced by
        the queue's sweep's (sweep/2)."""
        return self.bare.recovery - self.bare.watcher_interval / 2 + sweep / 2

    def watcher_words(self, whole: float, unit: str = "seconds") -> str:
        """'the advised watcher interval', saying so when the queue's whole units round it up."""
        if whole == self.watcher:
            return "the advised watcher interval"
        return f"the advised watcher interval, {duration(self.watcher)}, rounded up to whole {unit}"

    def half_rule(self, interval: float, ttl: float, names: str) -> Rule:
        holds = interval <= ttl / 2
        return Rule(
            "heartbeat at most half the TTL",
            holds,
            f"{names}: {duration(interval)} against {duration(ttl)}, "
            + (
                "so one late renewal does not lose the lease"
                if holds
                else f"so a renewal {duration(ttl - interval)} late loses the lease"
            ),
        )


def _ceil(seconds: float) -> int:
    return int(math.ceil(seconds - 1e-9))


def _ms(seconds: float) -> int:
    return int(round(seconds * 1000))


def go_duration(seconds: float) -> str:
    """A Go time.Duration literal: 90 -> '1m30s', 0.5 -> '500ms', 3600 -> '1h0m0s'."""
    ms = _ms(seconds)
    if ms < 1000:
        return f"{ms}ms"
    h, rest = divmod(ms, 3_600_000)
    m, rest = divmod(rest, 60_000)
    s = f"{rest / 1000:g}s"
    if h:
        return f"{h}h{m}m{s}"
    return f"{m}m{s}" if m else s


# ---- the queues ----------------------------------------------------------------------------------


def _bullmq(f: _Facts) -> QueueAdvice:
    renew = f.heartbeat if f.heartbeat is not None else f.ttl / 2
    worst_wait = f.watcher * (2 if f.ttl < f.watcher else 1)
    passes = (
        "two stalledIntervals: the lock is shorter than one"
        if f.ttl < f.watcher
        else "one stalledInterval"
    )
    settings = [
        Setting("lockDuration", _ms(f.ttl), f"{_ms(f.ttl)} ms", "the advised TTL"),
        Setting(
            "lockRenewTime",
            _ms(renew),
            f"{_ms(renew)} ms",
            "the advised heartbeat interval"
            if f.heartbeat is not None
            else "BullMQ always renews; the advice needs no heartbeat, so keep its default, half "
            "the lock",
        ),
        Setting(
            "stalledInterval",
            _ms(f.watcher),
            f"{_ms(f.watcher)} ms",
            "the advised watcher interval",
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
        f"so a crashed job waits its lock out and then up to {duration(worst_wait)} "
        f"({passes})",
        f"stamp lock expiry with the database's clock: the PostgreSQL backend binds the worker's "
        f"Date.now(), so a worker clock {duration(f.ttl - renew)} behind (lockDuration - "
        f"lockRenewTime) loses its locks between renewals; keep clock skew well below that",
    ]
    return QueueAdvice(
        "bullmq", settings, cannot, [f.half_rule(renew, f.ttl, "lockRenewTime / lockDuration")]
    )


def temporal_heartbeat_timeout(ttl: float, heartbeat: float) -> float:
    """The HeartbeatTimeout T whose SDK-throttled heartbeats (every min(0.8 T, 60 s)) leave at
    least the advised slack ttl - heartbeat before the timeout."""
    slack = ttl - heartbeat
    short = slack / (1 - TEMPORAL_THROTTLE)  # 0.8 T <= 60 s: T - 0.8 T >= slack
    timeout = short if TEMPORAL_THROTTLE * short <= TEMPORAL_MAX_THROTTLE else slack + 60
    return max(ttl, timeout)


def _temporal(f: _Facts) -> QueueAdvice:
    b = f.bare
    settings = [
        Setting(
            "StartToCloseTimeout",
            _ceil(b.ttl),
            go_duration(_ceil(b.ttl)),
            "it ends an attempt whatever its heartbeats, so it must outlast the longest job: "
            + f.bare_words(),
        )
    ]
    rules = []
    cannot = []
    # Temporal resolves its timeouts in whole seconds, rounding up (internal/activity.go:101)
    h = f.heartbeat
    timeout = None if h is None else _ceil(temporal_heartbeat_timeout(f.ttl, h))
    if h is None or timeout is None or timeout >= b.ttl:
        why = (
            "the advice needs no heartbeat"
            if timeout is None
            else f"a heartbeat timeout of {go_duration(timeout)} would never fire before "
            "StartToCloseTimeout ends the attempt"
        )
        settings.append(Setting("HeartbeatTimeout", 0.0, "0 (unset)", why))
        cannot.append(f.crash_cost(1.0, "StartToCloseTimeout", "the retry's InitialInterval"))
    else:
        sent = max(h, min(TEMPORAL_THROTTLE * timeout, TEMPORAL_MAX_THROTTLE))
        at_ttl = f.ttl - min(TEMPORAL_THROTTLE * f.ttl, TEMPORAL_MAX_THROTTLE)
        settings.append(
            Setting(
                "HeartbeatTimeout",
                timeout,
                go_duration(timeout),
                f"call RecordHeartbeat every {duration(h)}; the SDK sends one every "
                f"{duration(sent)} (at most one per 0.8 x the timeout, capped at 60 s), which "
                f"leaves {duration(timeout - sent)} for a late one, the advised "
                f"{duration(f.ttl - h)}"
                + (
                    f" (the advised {duration(f.ttl)} TTL would leave only {duration(at_ttl)})"
                    if timeout > f.ttl
                    else ""
                ),
            )
        )
        rules.append(
            Rule(
                "heartbeat at most half the TTL",
                sent <= timeout / 2,
                f"the SDK's heartbeat / HeartbeatTimeout: {duration(sent)} against "
                f"{duration(timeout)}; "
                + (
                    "one late heartbeat does not time the activity out"
                    if sent <= timeout / 2
                    else "Temporal's throttle sends at 0.8x by design, so the rule cannot hold; "
                    "the timeout above is lengthened until a heartbeat may be "
                    f"{duration(timeout - sent)} late, the slack the advice asked for"
                ),
            )
        )
    cannot.append(
        "stop an attempt that timed out: the worker hears of it only through a heartbeat, so "
        "without one the first attempt runs on beside its retry (its late completion is refused)"
    )
    return QueueAdvice("temporal", settings, cannot, rules)


def _celery_rules(f: _Facts, default: float) -> list[Rule]:
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
                "longer, up to "
                f"{duration(default)}"
            )
            if default >= b.ttl
            else f"too short: {percent(f.longer_than(default))} of the observed tasks outlast it "
            "and would run twice",
        ),
    ]


def _celery_settings(f: _Facts, acked: str, renewed: str) -> list[Setting]:
    """acks_late, the visibility timeout and the prefetch, on either broker."""
    return [
        Setting(
            "task_acks_late", True, "True", f"{acked} after the task, so a crash redelivers it"
        ),
        Setting(
            "broker_transport_options['visibility_timeout']",
            _ceil(f.bare.ttl),
            f"{_ceil(f.bare.ttl)}",
            f"seconds, never {renewed}: " + f.bare_words(),
        ),
        Setting(
            "worker_prefetch_multiplier",
            1,
            "1",
            "a prefetched message's visibility timeout runs while it waits in the worker's buffer",
        ),
    ]


def _celery_redis(f: _Facts) -> QueueAdvice:
    sweep = _ceil(f.watcher)
    settings = _celery_settings(f, "acked", "renewed")
    settings.insert(
        2,
        Setting(
            "broker_transport_options['unacked_restore_interval']",
            sweep,
            f"{sweep}",
            f"with unacked_restore_throttle = 1, the restore sweeps every {duration(sweep)} "
            f"({f.watcher_words(sweep)}) instead of about every {duration(CELERY_SWEEP)}",
        ),
    )
    cannot = [
        f.crash_cost(sweep, "visibility_timeout"),
        "with task_acks_late = False (the default) a crash loses the running task: no "
        "timeout helps",
    ]
    return QueueAdvice("celery-redis", settings, cannot, _celery_rules(f, 3600.0))


def _celery_sqs(f: _Facts) -> QueueAdvice:
    b = f.bare
    settings = _celery_settings(f, "deleted", "extended")
    cannot = [f.crash_cost(0.0, "visibility_timeout")]
    if b.ttl > SQS_MAX_VISIBILITY:
        cannot.append(
            f"hold a message longer than 12 h: SQS caps the visibility timeout at "
            f"{SQS_MAX_VISIBILITY} s, below the {_ceil(b.ttl)} s these durations need"
        )
    return QueueAdvice("celery-sqs", settings, cannot, _celery_rules(f, 1800.0))


def _sqs(f: _Facts) -> QueueAdvice:
    b = f.bare
    if f.heartbeat is not None:
        visibility = _ceil(f.ttl)
        settings = [
            Setting("VisibilityTimeout", visibility, f"{visibility}", "seconds, the advised TTL"),
            Setting(
                "ChangeMessageVisibility",
                f.heartbeat,
                f"VisibilityTimeout={visibility} every {duration(f.heartbeat)}",
                "the advised heartbeat: each call restarts the timeout from now",
            ),
        ]
        cannot = []
        rules = [f.half_rule(f.heartbeat, visibility, "extension interval / VisibilityTimeout")]
    else:
        visibility = _ceil(b.ttl)
        settings = [
            Setting("VisibilityTimeout", visibility, f"{visibility}", "seconds: " + f.bare_words())
        ]
        cannot = [f.crash_cost(0.0, "VisibilityTimeout")]
        rules = []
    function = _ceil(b.ttl)  # a Lambda's timeout must outlast the longest job
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
    return QueueAdvice("sqs", settings, cannot, rules)


def _hatchet(f: _Facts) -> QueueAdvice:
    b = f.bare
    low, high = HATCHET_REASSIGN
    typical = HATCHET_STALE - HATCHET_BEAT / 2 + low / 2
    settings = [
        Setting(
            "execution_timeout",
            _ceil(b.ttl),
            f'"{_ceil(b.ttl)}s"',
            "a hard limit per attempt: " + f.bare_words() + "; ctx.refresh_timeout() extends it "
            "from inside a longer task",
        )
    ]
    cannot = [
        f"tune crash detection: workers heartbeat every {duration(HATCHET_BEAT)} and are declared "
        f"dead after {duration(HATCHET_STALE)} (fixed in the client and the server's SQL), and the "
        f"reassignment polls every {duration(low)} to {duration(high)}: a crashed task waits about "
        f"{duration(typical)} (at most {duration(HATCHET_STALE + high)}), against the advised "
        f"{duration(f.recovery)}"
    ]
    rules = [f.half_rule(HATCHET_BEAT, HATCHET_STALE, "process heartbeat / stale age (fixed)")]
    return QueueAdvice("hatchet", settings, cannot, rules)


def procrastinate_cron(seconds: float) -> str:
    """A periodic task's cron every `seconds` (procrastinate takes a 6th column for seconds)."""
    s = _ceil(seconds)
    if s < 60:
        return f"* * * * * */{s}"
    return f"*/{_ceil(s / 60)} * * * *"


def _procrastinate(f: _Facts) -> QueueAdvice:
    beat = f.heartbeat if f.heartbeat is not None else f.ttl / 2
    stale = f.ttl
    cron = _ceil(f.watcher) if f.watcher < 60 else 60 * _ceil(f.watcher / 60)
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
            f'"{procrastinate_cron(f.watcher)}"',
            f"every {duration(cron)}: "
            + f.watcher_words(cron, "seconds" if f.watcher < 60 else "minutes"),
        ),
    ]
    cannot = [
        "rescue without your task: nothing retries stalled jobs unless retry_stalled_jobs is "
        "scheduled, and it runs as a job in the same queue, so a backlog delays the rescue too",
        "see a hung job in a live process: liveness is per process, so a job stuck inside a "
        "process that still heartbeats is never rescued",
    ]
    return QueueAdvice(
        "procrastinate",
        settings,
        cannot,
        [f.half_rule(beat, stale, "update_heartbeat_interval / stalled_worker_timeout")],
    )


def _no_renewal_queue(
    queue: str, f: _Facts, timeout_setting: Setting, sweep: float, name: str, extra=()
) -> QueueAdvice:
    return QueueAdvice(
        queue,
        [timeout_setting, *extra],
        [f.crash_cost(sweep, name)],
        [],
    )


def _river(f: _Facts) -> QueueAdvice:
    b = f.bare
    timeout = Setting(
        "RescueStuckJobsAfter",
        b.ttl,
        f"{go_duration(b.ttl)} (time.Duration)",
        "no heartbeat in River: " + f.bare_words(),
    )
    job_timeout = Setting(
        "JobTimeout",
        b.ttl,
        go_duration(b.ttl),
        "River cancels a job's context after it (default 1 min, which "
        f"{percent(f.longer_than(RIVER_JOB_TIMEOUT))} "
        "of the observed jobs outlast); at most RescueStuckJobsAfter",
    )
    out = _no_renewal_queue("river", f, timeout, RIVER_RESCUER, "RescueStuckJobsAfter")
    out.settings.append(job_timeout)
    out.rules.append(
        Rule(
            "JobTimeout above the longest job",
            RIVER_JOB_TIMEOUT >= f.longest,
            f"the default 1 min against the longest observed {duration(f.longest)}",
        )
    )
    return out


def _oban(f: _Facts) -> QueueAdvice:
    b = f.bare
    rescue = _ceil(b.ttl)
    interval = _ms(f.watcher)
    return _no_renewal_queue(
        "oban",
        f,
        Setting(
            "Lifeline rescue_after",
            rescue,
            f":timer.seconds({rescue})",
            "no heartbeat in open-source Oban: " + f.bare_words(),
        ),
        f.watcher,
        "rescue_after",
        [
            Setting(
                "Lifeline interval",
                interval,
                f"{interval}",
                "milliseconds, the advised watcher interval",
            )
        ],
    )


def _pg_boss(f: _Facts) -> QueueAdvice:
    b = f.bare
    monitor = _ceil(f.watcher)
    settings = [
        Setting(
            "expireInSeconds",
            _ceil(b.ttl),
            f"{_ceil(b.ttl)}",
            "a hard limit: the job fails at it even while it heartbeats, so it must outlast the "
            "longest job: " + f.bare_words(),
        ),
        Setting("monitorIntervalSeconds", monitor, f"{monitor}", f.watcher_words(monitor)),
    ]
    cannot, rules = [], []
    beat = max(PG_BOSS_MIN_HEARTBEAT, _ceil(f.ttl))
    if f.heartbeat is None or beat >= _ceil(b.ttl):
        if f.heartbeat is not None:
            settings.append(
                Setting(
                    "heartbeatSeconds",
                    None,
                    "unset",
                    f"a heartbeat timeout of {beat} s would never fire before expireInSeconds",
                )
            )
        cannot.append(f.crash_cost(monitor, "expireInSeconds", "until the monitor finds it"))
    else:
        raised = beat > _ceil(f.ttl)
        refresh = beat / 2 if raised else f.heartbeat
        settings += [
            Setting(
                "heartbeatSeconds",
                beat,
                f"{beat}",
                f"the advised TTL, {duration(f.ttl)}, raised to pg-boss's minimum"
                if raised
                else "the advised TTL in whole seconds",
            ),
            Setting(
                "heartbeatRefreshSeconds",
                refresh,
                f"{refresh:g}",
                "half of heartbeatSeconds, pg-boss's default"
                if raised
                else "the advised heartbeat",
            ),
        ]
        if beat > _ceil(f.ttl):
            cannot.append(
                f"a heartbeat timeout below {PG_BOSS_MIN_HEARTBEAT} s: the advised "
                f"{duration(f.ttl)} "
                f"becomes {beat} s, so a crash waits up to {duration(beat + monitor)}"
            )
        rules.append(f.half_rule(refresh, beat, "heartbeatRefreshSeconds / heartbeatSeconds"))
    return QueueAdvice("pg-boss", settings, cannot, rules)


def _graphile(f: _Facts) -> QueueAdvice:
    low, high = GRAPHILE_RESET
    return QueueAdvice(
        "graphile",
        [],
        [
            "set a lease: a job's lock counts as stale after a fixed "
            f"{duration(GRAPHILE_STALE)} and the reset runs every {duration(low)} to "
            f"{duration(high)}, so a crashed job waits up to "
            f"{duration(GRAPHILE_STALE + high)}, against the advised {duration(f.recovery)}; there "
            f"is no heartbeat, so the {duration(f.ttl)} TTL advised cannot be expressed",
            "a graceful shutdown releases its jobs at once: stop workers with SIGTERM, not SIGKILL",
        ],
    )


def _solid_queue(f: _Facts) -> QueueAdvice:
    beat = f.heartbeat if f.heartbeat is not None else f.ttl / 2
    settings = [
        Setting(
            "process_heartbeat_interval",
            beat,
            f"{beat:g}.seconds",
            "the advised heartbeat (per process)"
            if f.heartbeat is not None
            else "liveness is per process and always on; half the alive threshold",
        ),
        Setting("process_alive_threshold", f.ttl, f"{f.ttl:g}.seconds", "the advised TTL"),
    ]
    cannot = [
        "re-run a crashed job: the jobs of a pruned process fail, so a crash costs a retry by hand "
        "(or Active Job's retry_on) after the threshold, however short it is"
    ]
    return QueueAdvice(
        "solid-queue",
        settings,
        cannot,
        [f.half_rule(beat, f.ttl, "process_heartbeat_interval / process_alive_threshold")],
    )


_TRANSLATORS = {
    "bullmq": _bullmq,
    "temporal": _temporal,
    "celery-redis": _celery_redis,
    "celery-sqs": _celery_sqs,
    "sqs": _sqs,
    "hatchet": _hatchet,
    "procrastinate": _procrastinate,
    "river": _river,
    "oban": _oban,
    "pg-boss": _pg_boss,
    "graphile": _graphile,
    "solid-queue": _solid_queue,
}
