"""The figures' shared look and labels: colours, line styles, hatches, axis labels and units.

Colours come from the Okabe-Ito palette (colour-blind safe); every distinction that matters is
also made by hatching, line style or marker, so the figures read in greyscale. Red is reserved for
overlapping leases (two holders of one job at once).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from sim.support.in_words import NO_VALUE, percent, plural

# Okabe-Ito without vermillion (red means "overlap") and black (markers are black).
JOB_COLOURS = ("#E69F00", "#56B4E9", "#009E73", "#F0E442", "#0072B2", "#CC79A7")
OVERLAP = "#D00000"
INK = "#222222"
# How a lease ended -> hatch (plain = completed), and its legend text.
END_STYLES = {
    "completed": ("", "completed"),
    "expired": ("////", "expired (TTL ran out)"),
    "revoked": ("xxxx", "revoked (another worker claimed it)"),
    "crashed": ("\\\\\\\\", "owner crashed"),
    "released": ("----", "released (refused / abandoned / error)"),
    "open": ("....", "still held at the horizon"),
}
BAR_HEIGHT = 0.56

PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#000000")
MARKERS = ("o", "s", "^", "D", "v", "P", "X")
LINESTYLES = ("-", "--", "-.", ":", (0, (5, 1, 1, 1)), (0, (1, 1)), (0, (8, 2)))
HATCHES = ("", "////", "....", "xxxx", "\\\\\\\\", "oo", "++")
KEY_LABELS = {  # dotted key -> (axis label, unit, short label for point annotations)
    "policy.lease_ttl": ("lease TTL", "s", "TTL"),
    "policy.heartbeat_interval": ("heartbeat interval", "s", "hb"),
    "policy.watcher_interval": ("watcher interval", "s", "watcher"),
    "policy.poll_interval": ("poll interval", "s", "poll"),
    "policy.workers": ("workers", "", "workers"),
    "policy.select_to_update_gap": ("select-to-update gap", "s", "gap"),
    "policy.candidates": ("candidates read per claim", "", "candidates"),
    "policy.claim": ("claim strategy", "", ""),
    "faults.crash_rate": ("crash rate", "per worker-hour", "crashes/h"),
    "faults.pause_rate": ("pause rate", "per worker-hour", "pauses/h"),
}
METRIC_LABELS = {  # metric -> (label, unit)
    "recovery_latency_mean": ("mean recovery latency", "s"),
    "recovery_latency_p50": ("median recovery latency", "s"),
    "recovery_latency_p95": ("recovery latency p95", "s"),
    "recovery_latency_p99": ("recovery latency p99", "s"),
    "job_latency_mean": ("mean job latency", "s"),
    "job_latency_p99": ("job latency p99", "s"),
    "false_expiry_rate": ("false-expiry rate", "% of leases"),
    "race_probability": ("race probability", "% of leases double-claimed"),
    "duplicate_charge_rate": ("duplicate PSP charges", "% of jobs"),
    "duplicate_effect_rate": ("duplicate ledger rows", "% of jobs"),
    "recovered_share": ("crashed jobs recovered", "%"),
    "statements_per_s": ("DB load", "statements/s"),
    "throughput_per_s": ("throughput", "jobs/s"),
    "false_expiries": ("false expiries", "per run"),
    "double_claims": ("double claims", "per run"),
    "duplicate_external_effects": ("duplicate PSP charges", "per run"),
    "duplicate_db_effects": ("duplicate ledger rows", "per run"),
    # the advisor's predictions (sim.plots.advice_frame), not measurements
    "predicted_false_expiry": ("predicted false-expiry probability", "% of jobs"),
    "predicted_recovery_mean": ("predicted mean recovery latency", "s"),
    "predicted_db_load": ("predicted heartbeat + watcher load", "statements/s"),
}
MULTIPLICITY = {  # double_processing's bars: (label, colour, hatch)
    "leases_per_job": ("leases (claims) per job", "#0072B2", ""),
    "charges_per_payment": ("PSP charges per payment", "#E69F00", "////"),
    "ledger_rows_per_payment": ("ledger rows per payment", "#009E73", "...."),
}


def is_percent(metric: str) -> bool:
    return "%" in METRIC_LABELS.get(metric, ("", ""))[1]


def metric_label(metric: str) -> str:
    """An axis label with its unit, e.g. 'mean recovery latency (s)'."""
    name, unit = METRIC_LABELS.get(metric, (metric.replace("_", " "), ""))
    return f"{name} ({unit})" if unit else name


def key_label(key: str) -> str:
    name, unit, _ = KEY_LABELS.get(key, (key.rsplit(".", 1)[-1].replace("_", " "), "", ""))
    return f"{name} ({unit})" if unit else name


def setting_text(key: str, value) -> str:
    """'TTL 30 s', 'gap 5 ms', 'workers 8': one setting, short, with its unit."""
    _, unit, short = KEY_LABELS.get(key, ("", "", key.rsplit(".", 1)[-1]))
    if isinstance(value, int | float | np.integer | np.floating) and not isinstance(value, bool):
        value = float(value)
        if unit == "s" and 0 < abs(value) < 1:
            text = f"{value * 1000:g} ms"
        else:
            text = f"{value:g} {unit}".strip()
    else:
        text = str(value)
    return f"{short} {text}".strip()


def format_value(metric: str, value: float) -> str:
    """A metric value for an annotation: percentages for rates, 3 significant digits otherwise."""
    if value is None or not np.isfinite(value):
        return NO_VALUE
    if is_percent(metric):
        return percent(value, 2 if abs(value) < 0.001 else 3)
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


# ---- axes every analysis figure shares -------------------------------------------------------

ANNOTATION_PT = 9  # the smallest text on a figure: annotations, legends, cell labels


def label_log_axis(axis, values) -> None:
    """Tick a log axis at `values` with plain numbers ('5', '20', '120'),
    not 6x10^0-style minor labels."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter, NullLocator

    values = sorted({float(v) for v in values})
    axis.set_major_locator(FixedLocator(values))
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    axis.set_minor_locator(NullLocator())
    axis.set_minor_formatter(NullFormatter())


def new_axes(ax, size):
    if ax is not None:
        return ax
    import matplotlib.pyplot as plt

    _, ax = plt.subplots(figsize=size, layout="constrained")
    return ax


def finish(ax, title: str, subtitle: str | None = None) -> None:
    ax.set_title(title + (f"\n{subtitle}" if subtitle else ""), loc="left", fontsize=10)
    ax.grid(color="#e6e6e6", lw=0.6)
    ax.set_axisbelow(True)


def n_text(table: pd.DataFrame, what: str = "point") -> str:
    """'3 runs per point' from metric_table's `n` column."""
    n = table["n"].dropna() if "n" in table.columns else pd.Series(dtype=float)
    if n.empty:
        return f"runs per {what}: not given"
    low, high = int(n.min()), int(n.max())
    runs = f"{low}" if low == high else f"{low}-{high}"
    return f"{runs} {plural(high, 'run')} per {what}"
