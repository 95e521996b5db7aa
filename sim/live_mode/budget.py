"""Which time scales a live run can honour, checked before it starts and watched while it runs.

Live mode adds delays of its own that the scenario does not have: a statement's round trip,
the wait for a replacement worker process, the runner waking late for a fault. Played at a time
scale, each counts as delay / scale seconds of scenario time. The rule for all three: such a
delay must stay within MAX_SHARE of the scenario time it stretches; beyond it the run measures
the machine, not the lease policy.

- statement latency: the median round trip of each named statement, within MAX_SHARE of the
  scenario's shortest interval, which it competes with (the simulation models a statement
  latency of its own, so a slow tail is part of the scenario, a slow median is not);
- restart lag: how much later than planned a killed worker's replacement starts, within
  MAX_SHARE of the restart delay it stretches (or of the shortest interval, if longer); at most
  LATE_SHARE of the restarts may be later;
- scheduler delay: how late the runner plays a fault action, within MAX_SHARE of the shortest
  interval; at most LATE_SHARE of them later.

Before the run (check_scale) the runner measures the statements on the loaded table at the run's
concurrency and how long a replacement worker takes to start meanwhile (sim.live_mode.probe), and
refuses a scale those figures make unsound, naming them and the smallest sound scale. During the
run the same quantities are recorded, and `watch` names each one that went past its bound: the
run is then unsound (LiveRun.unsound), and sim.compare judges nothing on it.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

import numpy as np

from sim.errors import ConfigError
from sim.support.in_words import count, duration

MAX_SHARE = 0.05  # a delay of live mode's own: at most this share of the time it stretches
LATE_SHARE = 0.10  # of the restarts (or fault actions): at most this share later than that
WINDOW_WALL_S = 10.0  # the watch judges statement latency over windows of this many wall seconds
MIN_WINDOW_SAMPLES = 20  # ... a statement with fewer runs in a window is not judged there


def shortest_interval(scenario) -> tuple[str, float]:
    """The scenario's shortest timing setting that live mode's delays compete with, and its name."""
    p = scenario.policy
    candidates = [("policy.poll_interval", p.poll_interval), ("policy.lease_ttl", p.lease_ttl)]
    if p.heartbeat:
        candidates.append(("policy.heartbeat_interval", p.heartbeat_interval))
    if p.watcher:
        candidates.append(("policy.watcher_interval", p.watcher_interval))
    return min(candidates, key=lambda kv: kv[1])


def bound(scenario) -> tuple[str, float, float]:
    """(setting, its value, the bound in scenario seconds) of every delay live mode adds."""
    key, interval = shortest_interval(scenario)
    return key, interval, MAX_SHARE * interval


@dataclass
class Measured:
    """What the runner measured before the run (sim.live_mode.probe): each statement's median wall
    seconds on the loaded table at the run's concurrency, and a replacement worker's start."""

    statements: dict[str, float]  # statement -> median wall seconds
    samples: dict[str, int]  # statement -> how many runs of it were timed
    clients: int  # probe clients sending at once
    jobs: int  # jobs in the table while they did
    replacement_start: float = math.nan  # median wall seconds from spawn to ready
    replacements: int = 0  # replacement starts timed
    smallest_scale: float = field(default=math.nan, init=False)

    def slowest(self) -> tuple[str, float]:
        return max(self.statements.items(), key=lambda kv: kv[1])


def kills_per_worker(scenario) -> float:
    """Kills of one worker per scenario second from faults.crash_rate (crash_target holder: the
    pool-wide rate spread over the workers, all of them holding a job: its busiest case)."""
    return scenario.faults.crash_rate / 3600.0


def kills_expected(scenario) -> bool:
    """The fault schedule kills workers (which then need a replacement process)."""
    faults = scenario.faults
    return faults.crash_rate > 0 or any(c.worker is not None for c in faults.crashes)


def late_restart_share(scenario, scale: float, start_s: float) -> float:
    """The share of restarts that would come late when a replacement takes `start_s` wall seconds
    to start. A worker's spare replaces it at a kill and a new spare starts at once, due when the
    worker is next killed plus the restart delay d: it comes late when the next kill follows the
    last by less than start - d. Poisson kills: the next one comes d + Exp(rate) after the last
    (a restarting worker is not killed), late with probability 1 - exp(-rate (start - 2 d)) when
    the last restart was on time; a late one puts the next kill off, so this is an upper bound,
    close to the share itself where late restarts are rare (at the bound). Scripted kills of one
    worker: the share that follow its previous one too soon."""
    if not math.isfinite(start_s):
        return 0.0
    ready = start_s / scale  # scenario seconds after a kill until the next replacement is ready
    delay = scenario.faults.restart_delay.mean_value()
    shares = []
    rate = kills_per_worker(scenario)
    if rate > 0:
        shares.append(1 - math.exp(-rate * max(0.0, ready - 2 * delay)))
    gaps, kills = _scripted_gaps(scenario)
    if gaps:
        shares.append(sum(g < ready - delay for g in gaps) / kills)
    return max(shares, default=0.0)


def _scripted_gaps(scenario) -> tuple[list[float], int]:
    """Scenario seconds between consecutive scripted kills of the same worker (ascending), and
    how many scripted kills of a worker there are."""
    times: dict[int, list[float]] = {}
    for crash in scenario.faults.crashes:
        if crash.worker is not None:
            times.setdefault(crash.worker, []).append(crash.at)
    gaps = [b - a for ts in map(sorted, times.values()) for a, b in itertools.pairwise(ts)]
    return sorted(gaps), sum(map(len, times.values()))


def smallest_sound_scale(scenario, measured: Measured) -> float:
    """The smallest time scale at which every measured delay stays within its bound, rounded up
    to two significant digits."""
    _key, interval, _ = bound(scenario)
    scales = [latency / (MAX_SHARE * interval) for latency in measured.statements.values()]
    start = measured.replacement_start
    if math.isfinite(start):
        delay = scenario.faults.restart_delay.mean_value()
        rate = kills_per_worker(scenario)
        if rate > 0:
            scales.append(start / (2 * delay - math.log(1 - LATE_SHARE) / rate))
        gaps, kills = _scripted_gaps(scenario)
        allowed = int(LATE_SHARE * kills)  # this many may come too soon
        if allowed < len(gaps):
            scales.append(start / (gaps[allowed] + delay))
    return _round_up(max(scales, default=0.0))


def _round_up(x: float) -> float:
    if not (x > 0 and math.isfinite(x)):
        return x
    digits = 1 - math.floor(math.log10(x))
    return math.ceil(x * 10**digits - 1e-9) / 10**digits


def check_scale(scenario, scale: float, measured: Measured) -> None:
    """ConfigError naming --time-scale, the measured figures and the smallest sound scale when a
    statement's median or the restarts' lateness would pass its bound at `scale`."""
    if not (scale > 0 and np.isfinite(scale)):
        raise ConfigError(
            f"--time-scale: must be a number > 0 (wall seconds per scenario second), got {scale!r}"
        )
    key, interval, _ = bound(scenario)
    measured.smallest_scale = least = smallest_sound_scale(scenario, measured)
    if not least > scale:
        return
    name, latency = measured.slowest()
    share = latency / scale / interval
    words = [
        f"--time-scale {scale:g}: on the loaded table ({count(measured.jobs, 'job')}, "
        f"{count(measured.clients, 'client')} at once) {name} takes {_seconds(latency)} "
        f"(median of {measured.samples[name]}), {_seconds(latency / scale)} of "
        f"scenario time, {share:.1%} of {key} {interval:g} s "
        f"({'over' if share > MAX_SHARE else 'within'} the bound of {MAX_SHARE:.0%})"
    ]
    start = measured.replacement_start
    if math.isfinite(start) and kills_expected(scenario):
        late = late_restart_share(scenario, scale, start)
        restarts = f"up to {late:.0%} of restarts" if late > 0 else "no restart"
        words.append(
            f"a replacement worker takes {start:.2g} s to start, so {restarts} would come late "
            f"({'over' if late > LATE_SHARE else 'within'} the bound of {LATE_SHARE:.0%})"
        )
    raise ConfigError("; ".join(words) + f": use --time-scale >= {least:g}")


def describe_guard(run) -> str:
    """What the guard measured before a live run, and the smallest scale it found sound."""
    measured = run.guard
    if measured is None:
        return "time-scale guard: nothing measured"
    name, latency = measured.slowest() if measured.statements else ("no statement", math.nan)
    start = measured.replacement_start
    started = (
        f"; a replacement worker started in {start:.2g} s (median of {measured.replacements})"
        if math.isfinite(start)
        else ""
    )
    return (
        f"time-scale guard: on the loaded table ({count(measured.jobs, 'job')}, "
        f"{count(measured.clients, 'client')} at once) the slowest statement, {name}, took "
        f"{_seconds(latency)} (median of {measured.samples.get(name, 0)}){started}; sound from "
        f"--time-scale {measured.smallest_scale:g} (this run: {run.time_scale:g})"
    )


def _seconds(s: float) -> str:
    return duration(s, ms=True)


# ---- during the run ---------------------------------------------------------------------------


def watch(scenario, scale: float, statements, restart_lags, runner_lags) -> list[str]:
    """Why the run is unsound: each quantity that went past its bound, named with its figures.

    statements: (t, name, wall seconds) of every statement the run sent, t in scenario seconds;
    restart_lags: scenario seconds each restart came after its planned time; runner_lags: wall
    seconds late of each fault action the runner played."""
    key, interval, limit = bound(scenario)
    rule = f"{MAX_SHARE:.0%} of {key} {interval:g} s"
    reasons = []
    slow = _slow_windows(statements, scale, limit * scale, scenario.horizon)
    for name, (start, end, median, n) in slow.items():
        reasons.append(
            f"statement latency: {name} took {_seconds(median)} (median of {n}) from "
            f"{start:.4g} s to {end:.4g} s, {_seconds(median / scale)} of scenario time, over "
            f"the bound of {_seconds(limit)} ({rule})"
        )
    delay = scenario.faults.restart_delay.mean_value()
    restart_rule = (
        (limit, rule)
        if delay <= interval
        else (MAX_SHARE * delay, f"{MAX_SHARE:.0%} of faults.restart_delay {delay:g} s")
    )
    for what, items, lags, (most, why) in (
        ("restart lag", "restarts", np.asarray(restart_lags, dtype=float), restart_rule),
        (
            "scheduler delay",
            "fault actions",
            np.asarray(runner_lags, dtype=float) / scale,
            (limit, rule),
        ),
    ):
        late = int((lags > most).sum())
        if len(lags) and late > LATE_SHARE * len(lags):
            reasons.append(
                f"{what}: {late} of {len(lags)} {items} came later than {_seconds(most)} "
                f"({why}), the latest by {_seconds(float(lags.max()))}; at most "
                f"{LATE_SHARE:.0%} may"
            )
    return reasons


def _slow_windows(statements, scale: float, limit_wall: float, horizon: float) -> dict[str, tuple]:
    """Per statement, its slowest window whose median is over `limit_wall`: (start, end, median,
    count), times in scenario seconds (the last window ends at the horizon)."""
    if not len(statements):
        return {}
    t = np.asarray([s[0] for s in statements], dtype=float)
    names = np.asarray([s[1] for s in statements], dtype=object)
    seconds = np.asarray([s[2] for s in statements], dtype=float)
    width = WINDOW_WALL_S / scale
    window = np.floor(t / width)
    slow: dict[str, tuple] = {}
    for name in sorted(set(names.tolist())):
        mine = names == name
        for w in np.unique(window[mine]):
            values = seconds[mine & (window == w)]
            if len(values) < MIN_WINDOW_SAMPLES:
                continue
            median = float(np.median(values))
            if median > limit_wall and median > slow.get(name, (0, 0, 0.0))[2]:
                slow[name] = (w * width, min((w + 1) * width, horizon), median, len(values))
    return slow
