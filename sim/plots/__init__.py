"""Matplotlib figures of a finished Run, of sweeps and of the peer comparison; every function takes
ax= and returns the Axes.

    import sim
    from sim.plots import lease_timeline
    lease_timeline(sim.run("gc-pause-zombie"))

- timeline: `lease_timeline` (who held which job when), `auto_window`, `busy_window`; clock:
  `lease_clock` (the seconds left on each lease of a job);
- advice: `advice_frame` and `ADVICE_AXES`, an advice's candidates as `tradeoff` draws them, and
  `advice_chart`, the advisor's trade-off chart (notebook 06 and the advice report);
- analysis: sweep figures (`double_processing`, `race_probability`, `recovery_vs_interval`,
  `heatmap`) and `plot_durations`; tradeoff: the Pareto chart of settings (`tradeoff`,
  `pareto_front`), a sweep's or an advice's;
- peers: `peer_comparison`;
- recovery: notebook 04's `claim_takes_expired` overlay and `watcher_cost`;
- rules: the cheat sheet's measured rules of thumb, `repeat_recovery_excess` and
  `load_recovery_figure`;
- style: the palette, line styles, hatches and axis labels they share.
"""

from sim.plots.advice import ADVICE_AXES, advice_chart, advice_frame
from sim.plots.analysis import (
    double_processing,
    duration_summary,
    heatmap,
    metric_table,
    multiplicity,
    plot_durations,
    race_probability,
    recovery_vs_interval,
)
from sim.plots.clock import lease_clock
from sim.plots.peers import PEER_COLUMNS, RECOVERY_STYLES, peer_comparison, peer_settings
from sim.plots.recovery import claim_takes_expired, watcher_cost
from sim.plots.rules import load_recovery_figure, repeat_recovery_excess
from sim.plots.style import (
    ANNOTATION_PT,
    BAR_HEIGHT,
    END_STYLES,
    HATCHES,
    INK,
    JOB_COLOURS,
    KEY_LABELS,
    LINESTYLES,
    MARKERS,
    METRIC_LABELS,
    MULTIPLICITY,
    OVERLAP,
    PALETTE,
    format_value,
    key_label,
    label_log_axis,
    metric_label,
    setting_text,
)
from sim.plots.timeline import auto_window, busy_window, lease_timeline
from sim.plots.tradeoff import LOG_DECADES, pareto_front, tradeoff

__all__ = [
    "ADVICE_AXES",
    "ANNOTATION_PT",
    "BAR_HEIGHT",
    "END_STYLES",
    "HATCHES",
    "INK",
    "JOB_COLOURS",
    "KEY_LABELS",
    "LINESTYLES",
    "LOG_DECADES",
    "MARKERS",
    "METRIC_LABELS",
    "MULTIPLICITY",
    "OVERLAP",
    "PALETTE",
    "PEER_COLUMNS",
    "RECOVERY_STYLES",
    "advice_chart",
    "advice_frame",
    "auto_window",
    "busy_window",
    "claim_takes_expired",
    "double_processing",
    "duration_summary",
    "format_value",
    "heatmap",
    "key_label",
    "label_log_axis",
    "lease_clock",
    "lease_timeline",
    "load_recovery_figure",
    "metric_label",
    "metric_table",
    "multiplicity",
    "pareto_front",
    "peer_comparison",
    "peer_settings",
    "plot_durations",
    "race_probability",
    "recovery_vs_interval",
    "repeat_recovery_excess",
    "setting_text",
    "tradeoff",
    "watcher_cost",
]
