"""Matplotlib figures of a finished Run, of sweeps and of the peer comparison; every function takes
ax= and returns the Axes.

    import sim
    from sim.plots import lease_timeline
    lease_timeline(sim.run("gc-pause-zombie"))

- timeline: `lease_timeline` (who held which job when), `auto_window`, `busy_window`, `lease_clock`;
- analysis: sweep figures (`double_processing`, `race_probability`, `recovery_vs_interval`,
  `heatmap`, `tradeoff`) and `plot_durations`;
- peers: `peer_comparison`;
- style: the palette, line styles, hatches and axis labels they share.
"""

from sim.plots.analysis import (
    LOG_DECADES,
    double_processing,
    duration_summary,
    heatmap,
    metric_table,
    multiplicity,
    pareto_front,
    plot_durations,
    race_probability,
    recovery_vs_interval,
    tradeoff,
)
from sim.plots.peers import PEER_COLUMNS, RECOVERY_STYLES, peer_comparison, peer_settings
from sim.plots.style import (
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
    metric_label,
    setting_text,
)
from sim.plots.timeline import auto_window, busy_window, lease_clock, lease_timeline

__all__ = ["BAR_HEIGHT", "END_STYLES", "HATCHES", "INK", "JOB_COLOURS", "KEY_LABELS", "LINESTYLES", "LOG_DECADES", "MARKERS", "METRIC_LABELS",
           "MULTIPLICITY", "OVERLAP", "PALETTE", "PEER_COLUMNS", "RECOVERY_STYLES", "auto_window", "busy_window",
           "double_processing", "duration_summary", "format_value", "heatmap", "key_label", "lease_clock",
           "lease_timeline", "metric_label", "metric_table", "multiplicity", "pareto_front", "peer_comparison",
           "peer_settings", "plot_durations", "race_probability", "recovery_vs_interval", "setting_text", "tradeoff"]
