"""The advice's trade-off chart (notebook 06 and the advice report draw the same one): predicted
risk against predicted recovery at the recommended watcher interval, for no heartbeat and the
recommended heartbeat, over TTLs that reach a feasible setting on each line; infeasible settings
faded, the recommendation starred."""

from __future__ import annotations

from sim.advisor import ADVICE_AXES, advice_frame, chart_heartbeats, chart_ttls
from sim.plots.analysis import tradeoff


def advice_chart(advice, ax=None):
    """Draw the advice's trade-off chart on `ax` (a new figure if None); returns the Axes."""
    beats = chart_heartbeats(advice)
    frame = advice_frame(advice, heartbeats=beats, ttls=chart_ttls(advice, beats))
    h = advice.heartbeat_interval
    mark = {
        "policy.lease_ttl": advice.ttl,
        "policy.heartbeat_interval": "none" if h is None else f"{h:g} s",
    }
    return tradeoff(
        frame,
        ax,
        **ADVICE_AXES,
        keys=["policy.lease_ttl", "policy.heartbeat_interval"],
        mark=mark,
        mark_label=f"recommended: TTL {advice.ttl:g} s, hb {mark['policy.heartbeat_interval']}",
        feasible="feasible",
    )
