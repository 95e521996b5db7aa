"""The advice's named settings: one table, one letter per setting, used by the text, the tables,
the chart and the evidence, so that a figure quoted for "B" is B's everywhere.

in this order, each a letter from A on as it comes:
- the recommendation (the choice rule among all the feasible settings): always A;
- one TTL step shorter: the same rule among the settings with that TTL (the lowest risk there when
  none is feasible), and one TTL step longer, likewise (none past the end of the range searched);
- the lowest score among the feasible;
- the best without a heartbeat (sim.advice.queue_terms.no_renewal: what a queue that cannot renew a
  lease needs).
A setting that plays two parts gets one letter and both roles ("recommended; also the lowest
score"). Each row is the candidate table's row for that setting (CANDIDATE_COLUMNS), with its
`step` ("chosen", "shorter", "longer" or None).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from sim.advice.candidates import CANDIDATE_COLUMNS, choose
from sim.support.in_words import duration

SHORTLIST_COLUMNS = ["name", "role", "step", *CANDIDATE_COLUMNS]


def setting_words(ttl: float, heartbeat, watcher: float) -> str:
    """'TTL 2 s, heartbeat every 0.5 s, watcher every 1 s' (NaN or None: no heartbeat)."""
    none = heartbeat is None or (isinstance(heartbeat, float) and np.isnan(heartbeat))
    beat = "no heartbeat" if none else f"heartbeat every {duration(heartbeat)}"
    return f"TTL {duration(ttl)}, {beat}, watcher every {duration(watcher)}"


def heartbeat_of(row) -> float | None:
    """The row's heartbeat interval, None for none."""
    h = row["heartbeat_interval"] if isinstance(row, pd.Series | dict) else row.heartbeat_interval
    return None if pd.isna(h) else float(h)


def same_setting(table: pd.DataFrame, ttl: float, heartbeat, watcher: float) -> pd.Series:
    """Mask of the rows of a candidate-like table that are this setting."""
    hb = table["heartbeat_interval"]
    none = heartbeat is None or pd.isna(heartbeat)
    return (
        (table["ttl"] == ttl)
        & (hb.isna() if none else hb == heartbeat)
        & (table["watcher_interval"] == watcher)
    )


def build(advice, ttls: list[float]) -> pd.DataFrame:
    """The named settings of `advice` (SHORTLIST_COLUMNS), A first; `ttls`: the TTLs searched."""
    from sim.advice.queue_terms import no_renewal

    table = advice.candidates
    tolerance = advice.inputs["recovery_tolerance"]
    chosen = table[
        same_setting(table, advice.ttl, advice.heartbeat_interval, advice.watcher_interval)
    ].iloc[0]
    rule = f"the cheapest in DB load within {tolerance:.0%} of the lowest score"
    parts: list[tuple[str | None, pd.Series, str]] = [
        (
            "chosen",
            chosen,
            f"recommended: {rule} among the feasible" if advice.met else _unmet(advice),
        )
    ]
    i = ttls.index(advice.ttl)
    for at, step in ((i - 1, "shorter"), (i + 1, "longer")):
        if not 0 <= at < len(ttls):
            continue
        here = table[table["ttl"] == ttls[at]]
        if here.empty:
            continue
        row = choose(here, here["feasible"], pd.Series(True, index=here.index), tolerance)
        how = (
            f"{rule} among the feasible with that TTL"
            if here["feasible"].any()
            else "none with that TTL is feasible: its lowest risk"
        )
        parts.append((step, row, f"one TTL step {step} (TTL {duration(ttls[at])}): {how}"))
    if advice.met:
        feasible = table[table["feasible"]]
        parts.append((None, feasible.loc[feasible["score"].idxmin()], "the lowest score"))
    if table["heartbeat_interval"].isna().any():  # no_renewal searches without a heartbeat
        bare = no_renewal(advice)
        why = (
            "the shortest feasible TTL without one"
            if bare.feasible
            else "none without one is feasible: the shortest at the lowest upper bound any reaches"
        )
        parts.append(
            (
                None,
                setting_row(advice, bare.ttl, None, bare.watcher_interval),
                f"no heartbeat (for a queue that cannot renew): {why}",
            )
        )
    return _merge(parts)


def setting_row(advice, ttl: float, heartbeat: float | None, watcher: float) -> pd.Series:
    """The candidate row of a setting: the candidate table's, or, for one it does not hold (a
    queue's timeout searched second by second, a queue's own watcher), the same model's
    prediction under the same rules."""
    table = advice.candidates
    at = same_setting(table, ttl, heartbeat, watcher)
    if at.any():
        return table[at].iloc[0]
    h = None if heartbeat is None else float(heartbeat)
    row, _ = advice.model.priced(
        [float(ttl)], [h], [float(watcher)], advice.target_false_expiry, advice.inputs
    )
    return row.iloc[0]


def _unmet(advice) -> str:
    floor = advice.inputs.get("min_ttl")
    above = " at or above the TTL floor" if floor is not None else ""
    return f"recommended, though none is feasible: the lowest risk found{above}"


def _merge(parts: list[tuple[str | None, pd.Series, str]]) -> pd.DataFrame:
    """One row per distinct setting, lettered in order, with every role it plays."""
    rows: list[dict] = []
    for step, row, role in parts:
        h = heartbeat_of(row)
        for kept in rows:
            if (kept["ttl"], heartbeat_of(kept), kept["watcher_interval"]) == (
                row["ttl"],
                h,
                row["watcher_interval"],
            ):
                kept["role"] += f"; also {role}"
                break
        else:
            name = chr(ord("A") + len(rows))
            rows.append({"name": name, "role": role, "step": step, **row[CANDIDATE_COLUMNS]})
    return pd.DataFrame(rows, columns=SHORTLIST_COLUMNS)


def row(advice, name: str) -> pd.Series:
    """The named setting's row (KeyError for a name the advice does not have)."""
    table = advice.shortlist
    hit = table[table["name"] == name]
    if hit.empty:
        raise KeyError(name)
    return hit.iloc[0]


def name_of(advice, ttl: float, heartbeat, watcher: float) -> str | None:
    """The letter of a setting, or None when it is not one of the named ones."""
    table = advice.shortlist
    hit = table[same_setting(table, ttl, heartbeat, watcher)]
    return None if hit.empty else str(hit["name"].iloc[0])


def label(row) -> str:
    """'B (TTL 2 s, heartbeat every 0.5 s, watcher every 1 s)'."""
    return (
        f"{row['name']} ({setting_words(row['ttl'], heartbeat_of(row), row['watcher_interval'])})"
    )


# Which named setting a queue's translation (sim.advice.queue_terms) carries, for translations that
# do not say it in Lease Lab's words (QueueAdvice.overrides): "advised", A itself; "no renewal", the
# best without a heartbeat (the queue cannot renew a lease); a queue not listed runs a mechanism of
# its own that Lease Lab prices only in the queue's own lines (tests pin what carried() finds
# against the translations' values).
CARRIES = {
    "bullmq": "advised",
    "sqs": "advised",
    "procrastinate": "advised",
    "solid-queue": "advised",
    "celery-redis": "no renewal",
    "celery-sqs": "no renewal",
    "river": "no renewal",
    "oban": "no renewal",
}


def carried(advice, settings) -> pd.Series | None:
    """The setting that `settings` (sim.advice.queue_terms.in_queue_terms) run, as a row like
    advice.shortlist's: a named one when it is one (A when no queue is given), else that lease
    priced by the same model and named for the queue; None when the queue's lease is a mechanism
    of its own (process heartbeats, an execution timeout only), which only its own lines price."""
    table = advice.shortlist
    if settings is None:
        return table.iloc[0]
    lease = queue_lease(settings)
    if lease is None and not hasattr(settings, "overrides"):
        lease = _carries(advice, settings)
    if lease is None:
        return None
    ttl, h, w = lease
    hit = table[same_setting(table, ttl, h, w)]
    if len(hit):
        return hit.iloc[0]
    row = setting_row(advice, ttl, h, w).copy()
    row["name"], row["step"] = f"{settings.label}'s", None
    row["role"] = f"the lease {settings.label}'s settings run"
    return row


def queue_lease(settings) -> tuple[float, float | None, float] | None:
    """(TTL, heartbeat or None, watcher) of a translation that says its settings in Lease Lab's
    words (QueueAdvice.preset and .overrides, over the queue's preset); None when it does not, or
    sets no lease TTL."""
    overrides = getattr(settings, "overrides", None) or {}
    name = getattr(settings, "preset", None)
    if "policy.lease_ttl" not in overrides or name is None:
        return None
    from sim.scenario.settings import preset

    policy = preset(name).with_overrides(overrides).policy
    h = float(policy.heartbeat_interval) if policy.heartbeat else None
    return float(policy.lease_ttl), h, float(policy.watcher_interval)


def _carries(advice, settings) -> tuple[float, float | None, float] | None:
    kind = CARRIES.get(settings.queue)
    table = advice.shortlist
    if kind == "advised" or (kind is not None and advice.heartbeat_interval is None):
        return advice.ttl, advice.heartbeat_interval, advice.watcher_interval
    bare = table[table["heartbeat_interval"].isna() & table["role"].str.contains("cannot renew")]
    if kind is None or bare.empty:
        return None
    return float(bare["ttl"].iloc[0]), None, float(bare["watcher_interval"].iloc[0])
