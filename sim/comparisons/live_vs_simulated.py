"""sim.compare(live_run, simulated): a live run against simulated runs of the same queue.

The simulated runs play the same scenario with the same statements: Lease Lab's on the memory
backend, or, when the live run used a queue directory (--sql), that queue's SQL on PostgreSQL.
Rows: recovery latency (mean, p50, p90) and, per run, double claims, duplicate DB and external
effects, duplicate completions, false expiries and stuck jobs. Each row puts the live figure and
the simulated one side by side (each with its own interval) and judges their difference:

- recovery mean: live minus simulated, Welch's interval; p50 and p90: the difference of the two
  sample quantiles, bootstrap interval (sim.comparisons.two_sample); below MIN_RECOVERIES recoveries
  on either side a recovery row says "too few recoveries to judge";
- counts: the live run's count over the simulated runs' mean, the interval of that rate ratio
  from the exact test of two Poisson rates (allowing the runs' own spread).

A row DIFFERs when its interval leaves out no difference (0, or a ratio of 1). The rows are
judged together: each difference interval is at 1 - (1 - confidence) / rows, so that a live run
that matches the simulation is called different on some row with probability at most
1 - confidence (Bonferroni). The live run's soundness (sim.live_mode.budget) comes first: a run
whose statement latency, restart lag or scheduler delay went past its bound is named unsound, and
its rows are then shown but judge nothing.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from sim.comparisons import two_sample
from sim.errors import ConfigError
from sim.results import Run
from sim.scenario.limits import MAX_COMPARE_SEEDS
from sim.support import output_paths
from sim.theory.stats import mean_ci

PARTS = ("lease_remaining", "watcher_wait", "poll_wait")
MIN_RECOVERIES = 20  # on each side, for a recovery row to be judged
MEAN, P50, P90 = "recovery latency mean (s)", "recovery latency p50 (s)", "recovery latency p90 (s)"
RECOVERY_ROWS = (MEAN, P50, P90)
AGREE, DIFFER, TOO_FEW = "agree", "DIFFER", "too few recoveries to judge"
OWN_STATEMENTS = "Lease Lab's statements on the memory backend"
COLUMNS = [
    "live",
    "live_low",
    "live_high",
    "simulated",
    "sim_low",
    "sim_high",
    "compared",
    "estimate",
    "low",
    "high",
    "verdict",
]


def quantile_ci(values, q: float, confidence: float = 0.95) -> tuple[float, float, float]:
    """(quantile, low, high): the sample quantile and its distribution-free order-statistic
    interval."""
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
    until: dict[tuple[float, int], Any] = {}  # (crash, job) -> the lease's end it logged
    requeues: dict[int, list[float]] = {}
    takes_expired = run.scenario.policy.claim_takes_expired
    for t, kind, _worker, job, _attempt, detail in run.log:
        if kind == "crash" and job is not None:
            until[(t, job)] = detail
        elif kind == "requeue" and job is not None:
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


def stuck_jobs(run: Run) -> int:
    """Jobs left Processing past their lease longer than the recovery mechanism allows."""
    return int(run.check().counts().get("stuck_processing", 0))


COUNTS = {  # row -> the per-run count it compares
    "double claims per run": lambda r: r.summary["double_claims"],
    "duplicate DB effects per run": lambda r: r.summary["duplicate_db_effects"],
    "duplicate external effects per run": lambda r: r.summary["duplicate_external_effects"],
    "duplicate completions per run": duplicate_completions,
    "false expiries per run": lambda r: r.summary["false_expiries"],
    "stuck jobs per run": stuck_jobs,
}
JUDGED_ROWS = len(RECOVERY_ROWS) + len(COUNTS)


@dataclass
class Comparison:
    table: pd.DataFrame  # one row per metric: live, simulated (each with its interval), judged
    parts: pd.DataFrame  # mean of each recovery part, live and simulated
    live_latencies: np.ndarray
    simulated_latencies: np.ndarray
    warnings: list[str] = field(default_factory=list)  # why the live run is unsound (if it is)
    seeds: int = 0
    confidence: float = 0.95  # of each side's interval, and of all rows' verdicts together
    simulated_with: str = OWN_STATEMENTS

    @property
    def row_confidence(self) -> float:
        """The confidence of each row's difference interval (Bonferroni over the judged rows)."""
        return 1 - (1 - self.confidence) / JUDGED_ROWS

    @property
    def sound(self) -> bool:
        """The live run kept its measured delays within their bounds (no warning)."""
        return not self.warnings

    @property
    def differ(self) -> list[str]:
        """The rows whose difference is more than chance explains."""
        return [row for row, v in self.table["verdict"].items() if v == DIFFER]

    @property
    def agree(self) -> bool:
        """A sound live run, every row judged, none different."""
        judged = self.table["verdict"].isin([AGREE, DIFFER, ""]).all()
        return bool(self.sound and judged and not self.differ)

    @property
    def verdict(self) -> str:
        """The comparison in a sentence: the rows that differ (with their figures), the recovery
        rows too few to judge, the basis; led by the live run's unsoundness when it has any."""
        table = self.table
        lines = []
        differ = self.differ
        if differ:
            lines.append(
                "live and simulated DIFFER on "
                + "; ".join(_row_words(row, table.loc[row]) for row in differ)
            )
        few = [row for row in RECOVERY_ROWS if table.loc[row, "verdict"] == TOO_FEW]
        agreed = int((table["verdict"] == AGREE).sum())
        if not differ:
            if agreed == JUDGED_ROWS:
                lines.append(f"live and simulated agree on all {JUDGED_ROWS} rows")
            elif agreed:
                lines.append(f"live and simulated agree on the {agreed} rows judged")
            else:
                lines.append("no row judged (no simulated run to judge against)")
        if few:
            lines.append(
                f"recovery latency: {TOO_FEW} ({len(self.live_latencies)} live and "
                f"{len(self.simulated_latencies)} simulated; at least {MIN_RECOVERIES} each)"
            )
        basis = (
            f"(each difference at {self.row_confidence:.2%}, {self.confidence:.0%} for the "
            f"{JUDGED_ROWS} rows together; simulated: {self.seeds} seeds, {self.simulated_with})"
        )
        sentence = "; ".join(lines) + " " + basis
        if self.warnings:
            return (
                f"no verdict: the live run is UNSOUND ({'; '.join(self.warnings)}), so its "
                f"figures test nothing; the rows alone would say: {sentence}"
            )
        return sentence

    def __str__(self) -> str:
        lines = [
            _table_text(self.table, self.confidence, self.row_confidence),
            "",
            "recovery parts (mean s):",
            self.parts.to_string(float_format=lambda v: f"{v:.3f}"),
            "",
            self.verdict,
        ]
        lines += [f"warning: the live run is unsound: {w}" for w in self.warnings]
        return "\n".join(lines)

    def save(self, directory: str | Path, *, overwrite: bool = False) -> list[Path]:
        """Write comparison.csv (the table) and comparison.png (figure()) into `directory` (created
        if missing; one that holds files only with `overwrite`). Returns the files written."""
        import matplotlib.pyplot as plt

        out = output_paths.directory(directory, overwrite)
        written = [out / "comparison.csv", out / "comparison.png"]
        self.table.to_csv(written[0])
        figure = self.figure()
        figure.savefig(written[1], dpi=120)
        plt.close(figure)
        return written

    def figure(self, ax=None):
        """Recovery latency distributions (live vs simulated) and the parts of the mean, side by
        side."""
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


def _row_words(row: str, r) -> str:
    """One differing row in words: both figures, the compared quantity and its interval."""
    name = row.removesuffix(" (s)")
    unit = " s" if row in RECOVERY_ROWS else ""
    return (
        f"{name}: live {figure_text(r.live)}{unit}, simulated {figure_text(r.simulated)}{unit}, "
        f"{r.compared} {figure_text(r.estimate)} [{figure_text(r.low)}, {figure_text(r.high)}]"
    )


def figure_text(value) -> str:
    """A figure as the comparison prints it: n/a (nothing to show), inf, or 3 significant digits."""
    value = float(value)
    if np.isnan(value):
        return "n/a"
    if np.isinf(value):
        return "inf" if value > 0 else "-inf"
    return f"{value:.3g}" if abs(value) < 1000 else f"{value:,.0f}"


def _table_text(table: pd.DataFrame, confidence: float, row_confidence: float) -> str:
    """The table as text: each side with its interval, the judged difference with its own."""
    rows = []
    for name, r in table.iterrows():
        rows.append(
            {
                "": name,
                f"live [{confidence:.0%}]": (
                    f"{figure_text(r.live)} [{figure_text(r.live_low)}, {figure_text(r.live_high)}]"
                ),
                f"simulated [{confidence:.0%}]": (
                    f"{figure_text(r.simulated)} [{figure_text(r.sim_low)}, "
                    f"{figure_text(r.sim_high)}]"
                ),
                f"compared [{row_confidence:.2%}]": (
                    f"{r.compared} {figure_text(r.estimate)} [{figure_text(r.low)}, "
                    f"{figure_text(r.high)}]"
                    if r.compared
                    else ""
                ),
                "verdict": r.verdict,
            }
        )
    frame = pd.DataFrame(rows)
    widths = {c: max(len(c), frame[c].str.len().max()) for c in frame.columns}
    lines = ["  ".join(c.ljust(widths[c]) for c in frame.columns).rstrip()]
    for _, row in frame.iterrows():
        lines.append("  ".join(row[c].ljust(widths[c]) for c in frame.columns).rstrip())
    return "\n".join(lines)


def own_statements(scenario, seeds: int) -> list[Run]:
    """`seeds` simulated runs of `scenario` (its seed, seed + 1, ...) with Lease Lab's own
    statements on the memory backend, whatever queue a live run of it played."""
    from sim.runner import run

    base = scenario.replace(backend="memory")
    return [run(base, seed=base.seed + k, progress=False) for k in range(seeds)]


def _simulate(live_run: Run, seeds: int, sql=None, dsn: str | None = None) -> tuple[list[Run], str]:
    """`seeds` simulated runs of the live run's scenario with the live run's statements, and what
    they ran: a queue's SQL (`sql`, else the live run's queue) on PostgreSQL, else Lease Lab's
    statements on the memory backend."""
    from sim.runner import run

    sql = sql if sql is not None else live_run.queue
    if sql is None:
        return own_statements(live_run.scenario, seeds), OWN_STATEMENTS
    base = live_run.scenario.replace(backend="postgres")
    runs = [run(base, seed=base.seed + k, sql=sql, dsn=dsn, progress=False) for k in range(seeds)]
    where = getattr(sql, "path", sql)
    return runs, f"the queue's SQL ({where}) on PostgreSQL"


def _recovery_rows(live: np.ndarray, sim: np.ndarray, confidence: float, row_conf: float):
    """The three recovery rows: each side's figure and interval, the difference and its own."""
    enough = min(len(live), len(sim)) >= MIN_RECOVERIES
    rows = {}
    for row, q in ((MEAN, None), (P50, 0.5), (P90, 0.9)):
        if q is None:
            sides = (
                *_mean_of_nonnegative(live, confidence),
                *_mean_of_nonnegative(sim, confidence),
            )
            judged = two_sample.mean_difference(live, sim, row_conf)
        else:
            sides = (*quantile_ci(live, q, confidence), *quantile_ci(sim, q, confidence))
            judged = two_sample.quantile_difference(live, sim, q, row_conf)
        if not enough:
            verdict = TOO_FEW
        else:
            verdict = DIFFER if two_sample.excludes(judged[1], judged[2], 0.0) else AGREE
        rows[row] = (*sides, "live - simulated", *judged, verdict)
    return rows


def _mean_of_nonnegative(values, confidence: float) -> tuple[float, float, float]:
    """(mean, low, high) of values that cannot be negative (latencies, counts): the t interval,
    cut at zero where a few spread values would take it below."""
    mean, low, high, _ = mean_ci(values, confidence)
    return mean, max(low, 0.0) if np.isfinite(low) else low, high


def _count_row(live_value: float, sim_values: list[float], confidence: float, row_conf: float):
    """A per-run count: the live run's (Poisson interval) and the simulated mean (t interval),
    judged by the rate ratio live / simulated."""
    judged = two_sample.rate_ratio(live_value, sim_values, row_conf)
    if not sim_values:
        verdict = "nothing to judge"
    else:
        verdict = DIFFER if two_sample.excludes(judged[1], judged[2], 1.0) else AGREE
    return (
        live_value,
        *poisson_interval(live_value, confidence),
        *_mean_of_nonnegative(sim_values, confidence),
        "live / simulated",
        *judged,
        verdict,
    )


def poisson_interval(k: float, confidence: float = 0.95) -> tuple[float, float]:
    """The exact (Garwood) interval of a Poisson mean from one count k."""
    alpha = 1 - confidence
    low = 0.0 if k == 0 else float(stats.chi2.ppf(alpha / 2, 2 * k) / 2)
    return low, float(stats.chi2.ppf(1 - alpha / 2, 2 * k + 2) / 2)


def compare(
    live_run,
    simulated: Iterable[Run] | int = 20,
    *,
    confidence: float = 0.95,
    sql=None,
    dsn: str | None = None,
) -> Comparison:
    """Live against simulated: `simulated` is a list of simulated Runs of the same scenario, or how
    many seeds to simulate (scenario seed, seed + 1, ...) with the live run's horizon and its
    statements (the live run's queue directory, or `sql` for one loaded with own rights, on the
    server at `dsn`: the embedded one when None)."""
    if not isinstance(live_run, Run):
        raise ConfigError(
            f"live_run: expected the LiveRun of sim.live(...), got {type(live_run).__name__}"
        )
    if isinstance(simulated, int) and not (
        not isinstance(simulated, bool) and 0 <= simulated <= MAX_COMPARE_SEEDS
    ):
        raise ConfigError(
            f"--compare-seeds: must be a whole number from 0 to {MAX_COMPARE_SEEDS:,}, got "
            f"{simulated!r}"
        )
    if isinstance(simulated, int):
        runs, simulated_with = _simulate(live_run, simulated, sql, dsn)
    else:
        runs = list(simulated)
        simulated_with = "the simulated runs given"
    sim_lat = (
        np.concatenate([r.recoveries["latency"].dropna().to_numpy(dtype=float) for r in runs])
        if runs
        else np.zeros(0)
    )
    live_lat = live_run.recoveries["latency"].dropna().to_numpy(dtype=float)
    row_conf = 1 - (1 - confidence) / JUDGED_ROWS
    rows = _recovery_rows(live_lat, sim_lat, confidence, row_conf)
    rows["recoveries"] = (
        len(live_lat),
        np.nan,
        np.nan,
        len(sim_lat) / max(len(runs), 1),
        np.nan,
        np.nan,
        "",
        np.nan,
        np.nan,
        np.nan,
        "",
    )
    for name, metric in COUNTS.items():
        live_value = float(metric(live_run))
        rows[name] = _count_row(live_value, [float(metric(r)) for r in runs], confidence, row_conf)
    table = pd.DataFrame.from_dict(rows, orient="index", columns=COLUMNS)
    live_parts = recovery_parts(live_run)
    sim_parts = pd.concat([recovery_parts(r) for r in runs]) if runs else live_parts.iloc[0:0]
    parts = pd.DataFrame(
        {"live": live_parts[list(PARTS)].mean(), "simulated": sim_parts[list(PARTS)].mean()}
    )
    warnings = list(getattr(live_run, "unsound", []))
    return Comparison(
        table, parts, live_lat, sim_lat, warnings, len(runs), confidence, simulated_with
    )
