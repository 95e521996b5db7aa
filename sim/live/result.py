"""LiveRun: a Run (same event log, metrics, plots and checks) plus what only a live run knows."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from sim.results import Run

LATENCY_TAIL_WARN = 0.05  # p99 statement latency above this share of the shortest interval
LAG_WARN = 0.02  # wall seconds: the runner woke this late (p99) for its fault actions


@dataclass(repr=False)
class LiveRun(Run):
    time_scale: float = 1.0
    statement_seconds: pd.DataFrame = field(
        default_factory=lambda: pd.DataFrame(columns=["name", "seconds"])
    )
    runner_lag: np.ndarray = field(
        default_factory=lambda: np.zeros(0)
    )  # wall seconds late, per fault action
    repaired: list[str] = field(
        default_factory=list
    )  # records rebuilt from the tables (kills racing commits)
    incidents: list[str] = field(default_factory=list)  # worker processes that died on their own
    folder: str = ""

    def __repr__(self) -> str:
        return (
            f"LiveRun({self.scenario.name!r}, horizon={self.scenario.horizon:g}s, scale={self.time_scale:g}, "
            f"events={len(self.log)})"
        )

    def overload(self) -> list[str]:
        """Warnings that the machine was too busy for the comparison to mean much (empty if fine)."""
        from sim.live.budget import shortest_interval

        warnings = []
        if len(self.statement_seconds):
            p99 = float(np.percentile(self.statement_seconds["seconds"], 99))
            key, interval = shortest_interval(self.scenario)
            share = p99 / self.time_scale / interval
            if share > LATENCY_TAIL_WARN:
                warnings.append(
                    f"statement latency p99 {p99 * 1000:.1f} ms is {share:.0%} of {key} "
                    f"{interval:g} s (over {LATENCY_TAIL_WARN:.0%}): the database was slow"
                )
        if len(self.runner_lag):
            lag = float(np.percentile(self.runner_lag, 99))
            if lag > LAG_WARN:
                warnings.append(
                    f"scheduler lag p99 {lag * 1000:.0f} ms (over {LAG_WARN * 1000:.0f} ms): "
                    "faults fired late; the machine is overloaded"
                )
        return warnings
