"""What every translation of an advice into a queue's own settings reads and prints (the
translations are sim.advice.queue_terms' and sim.advice.queue_terms_pg'): a setting, a rule of
thumb, the block `advise --as QUEUE` prints, the advice's facts, and the timeout a queue that cannot
renew a lease needs, chosen from the durations (no_renewal).

Each QueueAdvice also carries what the advised settings amount to in Lease Lab's words (`preset`
and `overrides`) and the longest a crashed job waits to be found with them (`worst_wait`), which
its text prints, so that a test can simulate the queue with those settings and check the figure.
"""

from __future__ import annotations

import bisect
import math
import weakref
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from sim.advice.risk import share_upper_bound
from sim.support import output_paths
from sim.support.in_words import amount, duration, percent

FLOOR_TOLERANCE = 0.01  # no_renewal: within 1% of the lowest upper bound any timeout reaches
FLOOR_REACH = 4.0  # ... as it stands at this many times the longest observed job, plus a minute
GRID_POINTS = 40  # no_renewal's first, geometric pass over the timeouts


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
    """The shortest timeout without a heartbeat that the durations allow, at the advice's watcher
    interval (no_renewal)."""

    ttl: float
    watcher_interval: float
    risk: float  # predicted false expiry per job
    risk_high: float  # its 95% upper bound
    per_day: float
    recovery: float  # mean predicted recovery after a crash (s)
    feasible: bool


@dataclass
class OtherVersion:
    """The same advice for another version of the queue (its main branch, an older release): its
    settings, what they cost, and the worst wait and Lease Lab settings they amount to."""

    label: str
    settings: list[Setting]
    lines: list[str] = field(default_factory=list)
    worst_wait: float | None = None
    overrides: dict = field(default_factory=dict)


@dataclass
class QueueAdvice:
    """The advice in one queue's own settings, what the queue cannot do, and the rules checked."""

    queue: str
    label: str  # the queue's display name
    settings: list[Setting]
    cannot: list[str] = field(default_factory=list)
    rules: list[Rule] = field(default_factory=list)
    version: str = ""  # the release (or branch) the settings are for, with its source
    worst_wait: float | None = None  # the longest a crashed job waits to be found, as printed
    preset: str | None = None  # Lease Lab's preset of this queue (sim/scenario/presets/)
    overrides: dict = field(default_factory=dict)  # the advised settings in Lease Lab's words
    others: list[OtherVersion] = field(default_factory=list)

    def value(self, name: str):
        """The value of the setting called `name` (KeyError if the advice sets no such setting)."""
        for s in self.settings:
            if s.name == name:
                return s.value
        raise KeyError(name)

    def rule(self, name: str) -> Rule:
        return next(r for r in self.rules if r.name == name)

    def other(self, label_start: str) -> OtherVersion:
        return next(o for o in self.others if o.label.startswith(label_start))

    def lines(self) -> list[str]:
        version = f" ({self.version})" if self.version else ""
        out = [f"in {self.label}'s own settings{version}:"]
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
        for other in self.others:
            out.append(f"for {other.label}:")
            out += [f"  {s.name} = {s.text}: {s.why}" for s in other.settings]
            out += [f"  {line}" for line in other.lines]
        return out

    def __str__(self) -> str:
        return "\n".join(self.lines())

    def save(self, directory: str | Path, *, overwrite: bool = False) -> list[Path]:
        """Write settings-QUEUE.txt (as printed) into `directory` (the rules of
        sim.support.output_paths.directory)."""
        path = output_paths.directory(directory, overwrite) / f"settings-{self.queue}.txt"
        path.write_text(str(self) + "\n", encoding="utf-8")
        return [path]


# ---- the timeout of a queue that cannot renew ----------------------------------------------------


def no_renewal(advice) -> NoRenewal:
    """The shortest timeout without renewal, in whole seconds, that the durations allow at the
    advice's watcher interval: the advisor's own prediction (sim.advice.candidates) and
    feasibility rules at each timeout, searched to the second between the median and a few
    times the longest observed job, not on the advisor's coarse TTL ladder (a longest job of 300
    s would have meant 600 s). When no timeout is feasible (n durations cannot show a share below
    about 3/n), the shortest whose false-expiry upper bound is within FLOOR_TOLERANCE of the
    lowest any reaches. Computed once per advice."""
    cached = _NO_RENEWAL.get(id(advice))
    if cached is not None and cached[0]() is advice:
        return cached[1]
    found = _no_renewal(advice)
    key = id(advice)
    _NO_RENEWAL[key] = (weakref.ref(advice, lambda _: _NO_RENEWAL.pop(key, None)), found)
    return found


_NO_RENEWAL: dict[int, tuple[weakref.ref, NoRenewal]] = {}


def _no_renewal(advice) -> NoRenewal:
    samples = np.asarray(advice.durations.samples, dtype=float)
    inputs = advice.inputs
    watcher = float(advice.watcher_interval)
    low = max(1, math.ceil(max(float(np.median(samples)), inputs.get("min_ttl") or 0.0) - 1e-9))
    high = max(low + 1, math.ceil(FLOOR_REACH * float(samples.max()) + 60))

    def table(ttls):
        rows, _ = advice.model.priced(
            [float(t) for t in ttls], [None], [watcher], advice.target_false_expiry, inputs
        )
        return rows

    # a geometric grid, then the first whole second that passes between the last grid timeout that
    # fails and the first that passes, found by bisection (a longer timeout is never riskier): a
    # dozen timeouts priced, not every second of a gap that is hours wide for hour-long jobs
    grid = table(np.unique(np.ceil(np.geomspace(low, high, GRID_POINTS))).astype(int))
    feasible = bool(grid["feasible"].any())
    reach = float(grid["predicted_false_expiry_high"].min()) * (1 + FLOOR_TOLERANCE)

    def passes(rows) -> np.ndarray:
        said = rows["feasible"] if feasible else rows["predicted_false_expiry_high"] <= reach
        return said.to_numpy(bool)

    first = int(np.argmax(passes(grid)))
    shortest = int(grid["ttl"].iloc[first - 1]) + 1 if first else int(grid["ttl"].iloc[0])
    gap = range(shortest, int(grid["ttl"].iloc[first]) + 1)  # its last second passes
    ttl = gap[bisect.bisect_left(gap, True, key=lambda t: bool(passes(table([t]))[0]))]
    found = table([ttl]).iloc[0]
    return NoRenewal(
        ttl=float(found["ttl"]),
        watcher_interval=watcher,
        risk=float(found["predicted_false_expiry"]),
        risk_high=float(found["predicted_false_expiry_high"]),
        per_day=float(found["false_expiries_per_day"]),
        recovery=float(found["predicted_recovery_mean"]),
        feasible=feasible,
    )


# ---- the facts every translation reads -----------------------------------------------------------


@dataclass(frozen=True)
class Facts:
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
    jobs_per_s: float  # the arrival rate (assumed when none was given)

    @classmethod
    def of(cls, advice) -> Facts:
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
            jobs_per_s=float(i["jobs_per_s"]),
        )

    def longer_than(self, seconds: float) -> float:
        """The share of the observed durations longer than `seconds`."""
        return float(np.mean(self.samples > seconds))

    def margin_words(self, timeout: float) -> str:
        """Where `timeout` sits against the observed durations: the margin over the longest job,
        or the share of jobs that outlast it."""
        longest = self.longest
        if timeout >= longest:
            return (
                f"{duration(timeout)}, {duration(timeout - longest)} "
                f"({percent((timeout - longest) / longest)}) above the longest observed job "
                f"({duration(longest)})"
            )
        return (
            f"{duration(timeout)}, below the longest observed job ({duration(longest)}): "
            f"{percent(self.longer_than(timeout))} of the observed jobs outlast it"
        )

    def bare_words(self) -> str:
        b = self.bare
        if b.feasible:
            return (
                f"the shortest timeout without renewal that meets the target, "
                f"{self.margin_words(b.ttl)}: predicted false expiry {percent(b.risk)} per job "
                f"(95% upper bound {percent(b.risk_high)})"
            )
        return (
            f"no timeout without renewal meets the target provably ({self.n} durations cannot "
            f"show a share below {percent(share_upper_bound(0, self.n))}); this is the shortest "
            f"within {percent(FLOOR_TOLERANCE)} of that floor, {self.margin_words(b.ttl)}: "
            f"predicted {percent(b.risk)} per job, {amount(b.per_day)} false expiries a day"
        )

    def crash_cost(
        self,
        sweep: float,
        name: str,
        finder: str = "until the sweep finds it",
        timeout: float | None = None,
    ) -> tuple[str, float]:
        """(what a crash costs when nothing renews the timeout (the no_renewal one, or `timeout`),
        found by a sweep every `sweep` s (0: the timeout's end makes the job claimable): the worst
        and mean wait, and the day's extra waiting against the advised renewable lease; the worst
        wait, in seconds)."""
        b = self.bare
        longer = 0.0 if timeout is None else timeout - b.ttl
        worst = b.ttl + longer + sweep
        mean = self.bare_recovery(sweep) + longer
        by = f" ({name} + {duration(sweep)} {finder})" if sweep else ""
        text = (
            f"renew a lease: a crashed job waits out the whole {name}: it is found up to "
            f"{duration(worst)} after the crash{by} and claimed again about {duration(mean)} after "
            f"it on average"
        )
        if self.heartbeat is None:  # the advice renews nothing either
            return f"{text}; at {amount(self.crashes_per_day)} crashed jobs a day", worst
        extra = max(mean - self.recovery, 0.0)
        return (
            f"{text}, against {duration(self.recovery)} with the advised renewable lease; at "
            f"{amount(self.crashes_per_day)} crashed jobs a day that is "
            f"{duration(extra * self.crashes_per_day)} more waiting a day"
        ), worst

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


def ceil_s(seconds: float) -> int:
    """Whole seconds, rounded up."""
    return int(math.ceil(seconds - 1e-9))


def ms(seconds: float) -> int:
    return int(round(seconds * 1000))


def go_duration(seconds: float) -> str:
    """A Go time.Duration literal: 90 -> '1m30s', 0.5 -> '500ms', 3600 -> '1h0m0s'."""
    millis = ms(seconds)
    if millis < 1000:
        return f"{millis}ms"
    h, rest = divmod(millis, 3_600_000)
    m, rest = divmod(rest, 60_000)
    s = f"{rest / 1000:g}s"
    if h:
        return f"{h}h{m}m{s}"
    return f"{m}m{s}" if m else s
