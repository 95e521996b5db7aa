"""An advice's candidates as the trade-off chart draws them, and the chart itself (notebook 06 and
the advice report draw the same one): predicted risk against predicted recovery at the recommended
watcher interval, for no heartbeat and the recommended heartbeat, over TTLs that reach a feasible
setting on each line, and the advice's named settings (A the recommendation, starred; B, C ...
wherever they are) labelled by their letter; infeasible settings faded.

from sim.plots import advice_chart
advice_chart(advice)                   # or tradeoff(advice_frame(advice), **ADVICE_AXES)
"""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd

from sim.errors import ConfigError

ADVICE_AXES = {
    "x": "predicted_false_expiry",
    "y": "predicted_recovery_mean",
    "size": "predicted_db_load",
    "whiskers": "grey whiskers: from each predicted risk to its 95% upper bound",
    "logx": True,
}


def advice_frame(
    advice,
    *,
    watcher_interval: float | None = None,
    heartbeats: Iterable | None = None,
    ttls: Iterable[float] | None = None,
) -> pd.DataFrame:
    """advice.candidates shaped like a sweep aggregate, for sim.plots.tradeoff.

    Keeps one watcher interval (the recommended one by default) and, if given, some heartbeat
    intervals (None: no heartbeat) and TTLs. The heartbeat column holds labels ("2 s", "none")
    so that points read "TTL 10 s, hb none"; the predictions become <metric>_mean columns named
    for what they are (ADVICE_AXES: predicted_false_expiry, the probability per job;
    predicted_recovery_mean; predicted_db_load, heartbeat + watcher statements/s), so that
    `tradeoff(frame, **ADVICE_AXES)` labels its axes with them, not with simulated rates, and
    draws the risk on a log axis. Every risk is kept as predicted (none is rounded to 0), with its
    95% upper bound (the advice's durations are a sample) as `predicted_false_expiry_ci_high`
    and the prediction itself as `_ci_low`: the whisker runs from the prediction to the bound.
    """
    table = advice.candidates
    watcher = advice.watcher_interval if watcher_interval is None else float(watcher_interval)
    rows = table[table["watcher_interval"] == watcher].copy()
    if rows.empty:
        raise ConfigError(f"watcher_interval: {watcher:g} s is not among the candidates")
    if heartbeats is not None:
        wanted = [h for h in heartbeats]
        keep = rows["heartbeat_interval"].isin([float(h) for h in wanted if h is not None])
        if any(h is None for h in wanted):
            keep |= rows["heartbeat_interval"].isna()
        rows = rows[keep]
    if ttls is not None:
        rows = rows[rows["ttl"].isin([float(t) for t in ttls])]
    return _shaped(rows)


def _shaped(rows: pd.DataFrame) -> pd.DataFrame:
    """Rows of a candidate table shaped as advice_frame describes."""
    labels = ["none" if pd.isna(h) else f"{h:g} s" for h in rows["heartbeat_interval"]]
    risk = rows["predicted_false_expiry"].to_numpy(float)
    return pd.DataFrame(
        {
            "policy.lease_ttl": rows["ttl"].to_numpy(float),
            "policy.heartbeat_interval": labels,
            "predicted_false_expiry_mean": risk,
            "predicted_false_expiry_ci_low": risk,
            "predicted_false_expiry_ci_high": rows["predicted_false_expiry_high"].to_numpy(float),
            "predicted_recovery_mean_mean": rows["predicted_recovery_mean"].to_numpy(float),
            "predicted_db_load_mean": rows["db_load"].to_numpy(float),
            "feasible": rows["feasible"].to_numpy(bool),
            "policy.watcher_interval": rows["watcher_interval"].to_numpy(float),
        }
    ).reset_index(drop=True)


def named_frame(advice) -> pd.DataFrame:
    """advice_frame's rows for the advice's named settings (advice.shortlist, which may hold a
    setting the candidate table does not: a queue's timeout searched second by second), with
    their letter in a `name` column."""
    frame = _shaped(advice.shortlist)
    frame["name"] = list(advice.shortlist["name"])
    return frame


def chart_heartbeats(advice) -> list[float | None]:
    """The heartbeat lines of the advice's chart: none, and the recommended one
    (5 s without one)."""
    h = advice.heartbeat_interval
    return [None, h if h is not None else 5.0]


def chart_ttls(advice, heartbeats: Iterable | None = None) -> list[float]:
    """The TTLs the advice's chart shows: the searched ones up to the longest of 120 s, 4 x the
    recommended TTL, and, for every heartbeat line shown, its first feasible TTL one step on (so
    that the chart reaches a feasible setting on every line that has one)."""
    ttls = advice.inputs["searched"]["ttl"]
    table = advice.candidates
    at_watcher = table[(table["watcher_interval"] == advice.watcher_interval) & table["feasible"]]
    reach = max(120.0, 4 * advice.ttl)
    for h in chart_heartbeats(advice) if heartbeats is None else heartbeats:
        line = at_watcher[
            at_watcher["heartbeat_interval"].isna()
            if h is None
            else at_watcher["heartbeat_interval"] == h
        ]
        if len(line):
            first = ttls.index(float(line["ttl"].min()))
            reach = max(reach, ttls[min(first + 1, len(ttls) - 1)])
    return [t for t in ttls if t <= reach]


CHART_KEYS = ["policy.lease_ttl", "policy.heartbeat_interval", "policy.watcher_interval"]


def chart_frame(advice) -> pd.DataFrame:
    """The points advice_chart draws: advice_frame at A's watcher interval for no heartbeat and
    A's heartbeat (chart_heartbeats, chart_ttls), and the named settings (named_frame) wherever
    they are, each once, with its letter in `name` ("" for the unnamed)."""
    beats = chart_heartbeats(advice)
    frame = advice_frame(advice, heartbeats=beats, ttls=chart_ttls(advice, beats))
    named = named_frame(advice) if advice.shortlist is not None else frame.iloc[:0]
    frame = pd.concat([frame.assign(name=""), named], ignore_index=True)
    return frame.drop_duplicates(CHART_KEYS, keep="last").reset_index(drop=True)


def advice_chart(advice, ax=None):
    """Draw the advice's trade-off chart on `ax` (a new figure if None); returns the Axes."""
    from sim.plots.tradeoff import tradeoff

    frame = chart_frame(advice)
    keys = CHART_KEYS
    h = advice.heartbeat_interval
    beat = "none" if h is None else f"{h:g} s"
    mark = {"policy.lease_ttl": advice.ttl, "policy.heartbeat_interval": beat}
    mark["policy.watcher_interval"] = advice.watcher_interval
    return tradeoff(
        frame,
        ax,
        **ADVICE_AXES,
        keys=keys,
        mark=mark,
        mark_label=f"A (recommended): TTL {advice.ttl:g} s, hb {beat}",
        feasible="feasible",
        named_by="name",
        label_keys=keys[:2],
    )
