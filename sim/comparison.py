"""sim.compare(live_run, simulated): a live run against simulated runs of the same scenario.

Recovery latency (mean, p50, p90, each with a confidence interval), duplicate effects, duplicate
completions and false expiries, as a table and a figure; recovery broken into its parts (the lease
still to run at the crash, the wait for the watcher, the wait for a poller); warnings when the
machine was too busy for the live figures to mean much (statement latency tail, scheduler lag).
Verdict: the live mean lies within the simulated mean's interval widened by WIDEN (10%) of its ends.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from sim import files
from sim.errors import ConfigError
from sim.limits import MAX_COMPARE_SEEDS
from sim.results import Run
from sim.stats import mean_ci

WIDEN = 0.10
PARTS = ("lease_remaining", "watcher_wait", "poll_wait")


def quantile_ci(values, q: float, confidence: float = 0.95) -> tuple[float, float, float]:
    """(quantile, low, high): the sample quantile and its distribution-free order-statistic interval."""
    x = np.sort(np.asarray(values, dtype=float))
    x = x[np.isfinite(x)]
    n = len(x)
    if n == 0:
        return np.nan, np.nan, np.nan
    point = float(np.quantile(x, q))
    lo_rank, hi_rank = stats.binom.interval(confidence, n, q)
    lo, hi = int(max(lo_rank - 1, 0)), int(min(hi_rank, n - 1))
    return point, float(x[lo]), float(x[hi])


def recovery_parts(run: Run) -> pd.DataFrame:
    """One row per recovered crash: latency = lease_remaining + watcher_wait + poll_wait.

    lease_remaining: crash -> the end of the lease the owner last renewed (0 if it had already run
    out); watcher_wait: the lease's end -> the watcher's requeue of the job (0 when the claim takes
    expired leases: the job is claimable from the lease's end); poll_wait: claimable -> claimed."""
    until = {}
    requeues: dict[int, list[float]] = {}
    takes_expired = run.scenario.policy.claim_takes_expired
    for t, kind, _worker, job, _attempt, detail in run.log:
        if kind == "crash" and job is not None:
            until[(t, job)] = detail
        elif kind == "requeue":
            requeues.setdefault(job, []).append(t)
    rows = []
    for rec in run.recoveries.dropna(subset=["latency"]).itertuples():
        end = until.get((rec.crash_at, rec.job))
        end = rec.crash_at if end is None else max(float(end), rec.crash_at)
        end = min(end, rec.reclaimed_at)
        requeued = [t for t in requeues.get(rec.job, []) if rec.crash_at <= t <= rec.reclaimed_at]
        # a claim that takes expired leases could have it from the lease's end, requeued or not
        claimable = max(requeued[0], end) if requeued and not takes_expired else end
        rows.append(
            {
                "crash_at": rec.crash_at,
                "job": rec.job,
                "latency": rec.latency,
                "lease_remaining": end - rec.crash_at,
                "watcher_wait": claimable - end,
                "poll_wait": rec.reclaimed_at - claimable,
            }
        )
    return pd.DataFrame(rows, columns=["crash_at", "job", "latency", *PARTS])


def duplicate_completions(run: Run) -> int:
    """Jobs whose completion committed more than once (a zombie's completion went through)."""
    events = run.events
    done = events[events.kind == "complete"].groupby("job").size()
    return int((done > 1).sum())


@dataclass
class Comparison:
    table: pd.DataFrame  # one row per metric: live (+ interval), simulated (+ interval)
    parts: pd.DataFrame  # mean of each recovery part, live and simulated
    live_latencies: np.ndarray
    simulated_latencies: np.ndarray
    warnings: list[str] = field(default_factory=list)
    seeds: int = 0
    confidence: float = 0.95  # of every interval in the table and of the band

    @property
    def band(self) -> tuple[float, float]:
        """The simulated mean's interval, each end widened by WIDEN."""
        row = self.table.loc["recovery latency mean (s)"]
        return float(row.sim_low) * (1 - WIDEN), float(row.sim_high) * (1 + WIDEN)

    @property
    def within(self) -> bool:
        """The live mean lies within the band (False when either is undefined)."""
        low, high = self.band
        return bool(low <= self.table.loc["recovery latency mean (s)", "live"] <= high)

    @property
    def verdict(self) -> str:
        row = self.table.loc["recovery latency mean (s)"]
        if (
            np.isnan(row.live) or np.isnan(self.band).any()
        ):  # nothing to place: neither within nor outside
            return (
                f"no verdict: {len(self.live_latencies)} live and {len(self.simulated_latencies)} simulated recoveries "
                f"leave the live mean or the simulated {self.confidence:.0%} interval widened by {WIDEN:.0%} undefined "
                f"(the mean needs one recovery, the interval two)"
            )
        where = "within" if self.within else "OUTSIDE"
        return (
            f"live mean recovery {row.live:.3f} s [{row.live_low:.3f}, {row.live_high:.3f}] is {where} the "
            f"simulated {self.confidence:.0%} interval widened by {WIDEN:.0%}: [{self.band[0]:.3f}, {self.band[1]:.3f}] "
            f"(simulated {row.simulated:.3f} s over {self.seeds} seeds)"
        )

    def __str__(self) -> str:
        lines = [
            self.table.to_string(float_format=lambda v: f"{v:.3f}"),
            "",
            "recovery parts (mean s):",
            self.parts.to_string(float_format=lambda v: f"{v:.3f}"),
            "",
            self.verdict,
        ]
        lines += [f"warning: {w}" for w in self.warnings]
        return "\n".join(lines)

    def save(self, directory: str | Path, *, overwrite: bool = False) -> list[Path]:
        """Write comparison.csv (the table) and comparison.png (figure()) into `directory` (created
        if missing; one that holds files only with `overwrite`). Returns the files written."""
        import matplotlib.pyplot as plt

        out = files.directory(directory, overwrite)
        written = [out / "comparison.csv", out / "comparison.png"]
        self.table.to_csv(written[0])
        figure = self.figure()
        figure.savefig(written[1], dpi=120)
        plt.close(figure)
        return written

    def figure(self, ax=None):
        """Recovery latency distributions (live vs simulated) and the parts of the mean, side by side."""
        import matplotlib.pyplot as plt

        if ax is None:
            fig, ax = plt.subplots(1, 2, figsize=(11, 4), gridspec_kw={"width_ratios": [3, 2]})
        left, right = ax
        for values, label, color in (
            (self.simulated_latencies, f"simulated ({self.seeds} seeds)", "tab:blue"),
            (self.live_latencies, "live", "tab:orange"),
        ):
            if len(values):
                x = np.sort(values)
                left.step(
                    x,
                    np.arange(1, len(x) + 1) / len(x),
                    where="post",
                    label=f"{label}, n={len(x)}",
                    color=color,
                )
                left.axvline(values.mean(), color=color, linestyle="--", linewidth=1)
        left.set(
            xlabel="recovery latency (s)",
            ylabel="share of recoveries at most x",
            title="Recovery latency: live vs simulated (dashed: means)",
        )
        left.legend(loc="lower right")
        bottom = np.zeros(2)
        for part, color in zip(PARTS, ("tab:gray", "tab:purple", "tab:green"), strict=True):
            heights = self.parts.loc[part, ["live", "simulated"]].to_numpy(dtype=float)
            right.bar(
                ["live", "simulated"],
                heights,
                bottom=bottom,
                label=part.replace("_", " "),
                color=color,
            )
            bottom += np.nan_to_num(heights)
        right.set(ylabel="mean seconds", title="Where the recovery time goes")
        right.legend(loc="lower right")
        left.figure.tight_layout()
        return left.figure


def _simulate(live_run: Run, seeds: int) -> list[Run]:
    from sim.runner import run

    base = live_run.scenario.replace(backend="memory")
    return [run(base, seed=base.seed + k, progress=False) for k in range(seeds)]


def compare(
    live_run, simulated: Iterable[Run] | int = 20, *, confidence: float = 0.95
) -> Comparison:
    """Live against simulated: `simulated` is a list of simulated Runs of the same scenario, or how many
    seeds to simulate (scenario seed, seed + 1, ...) with the live run's horizon."""
    if not isinstance(live_run, Run):
        raise ConfigError(
            f"live_run: expected the LiveRun of sim.live(...), got {type(live_run).__name__}"
        )
    if isinstance(simulated, int) and not (
        not isinstance(simulated, bool) and 0 <= simulated <= MAX_COMPARE_SEEDS
    ):
        raise ConfigError(
            f"--compare-seeds: must be a whole number from 0 to {MAX_COMPARE_SEEDS:,}, got {simulated!r}"
        )
    runs = _simulate(live_run, simulated) if isinstance(simulated, int) else list(simulated)
    sim_lat = (
        np.concatenate([r.recoveries["latency"].dropna().to_numpy(dtype=float) for r in runs])
        if runs
        else np.zeros(0)
    )
    live_lat = live_run.recoveries["latency"].dropna().to_numpy(dtype=float)
    rows = {}
    live_mean, sim_mean = mean_ci(live_lat, confidence), mean_ci(sim_lat, confidence)
    rows["recovery latency mean (s)"] = (*live_mean[:3], *sim_mean[:3])
    for q in (0.5, 0.9):
        rows[f"recovery latency p{int(q * 100)} (s)"] = (
            *quantile_ci(live_lat, q, confidence),
            *quantile_ci(sim_lat, q, confidence),
        )
    rows["recoveries"] = (
        len(live_lat),
        np.nan,
        np.nan,
        len(sim_lat) / max(len(runs), 1),
        np.nan,
        np.nan,
    )
    per_run = {
        "duplicate DB effects": lambda r: r.summary["duplicate_db_effects"],
        "duplicate external effects": lambda r: r.summary["duplicate_external_effects"],
        "duplicate completions": duplicate_completions,
        "false expiries": lambda r: r.summary["false_expiries"],
    }
    for name, metric in per_run.items():
        rows[f"{name} per run"] = (
            float(metric(live_run)),
            np.nan,
            np.nan,
            *mean_ci([metric(r) for r in runs], confidence)[:3],
        )
    table = pd.DataFrame.from_dict(
        rows,
        orient="index",
        columns=["live", "live_low", "live_high", "simulated", "sim_low", "sim_high"],
    )
    live_parts = recovery_parts(live_run)
    sim_parts = pd.concat([recovery_parts(r) for r in runs]) if runs else live_parts.iloc[0:0]
    parts = pd.DataFrame(
        {"live": live_parts[list(PARTS)].mean(), "simulated": sim_parts[list(PARTS)].mean()}
    )
    warnings = live_run.overload() if hasattr(live_run, "overload") else []
    return Comparison(table, parts, live_lat, sim_lat, warnings, len(runs), confidence)
