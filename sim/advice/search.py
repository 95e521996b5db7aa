"""The advice's search: every candidate of the ladders priced by the advice's model
(sim.advice.candidates.CandidateModel), the feasible ones, and the choice; when the best setting
sits at an end of the default ladders, the search goes on past it (shorter or longer TTLs), and the
advice says so (sim.advice.advisor's docstring states the rules in words)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from sim.advice.candidates import (
    LONG_HEARTBEATS,
    LONG_TTLS,
    SHORT_HEARTBEATS,
    SHORT_TTLS,
    SHORT_WATCHERS,
    CandidateModel,
    choose,
)
from sim.support.in_words import duration


@dataclass
class Found:
    """What the search found: every candidate priced, the chosen row, whether the target was met,
    the ladders searched and, in words, how they were extended."""

    table: pd.DataFrame
    chosen: pd.Series
    met: bool
    searched: dict
    extended: list[str] = field(default_factory=list)


def search(
    model: CandidateModel, ladders: dict, target: float, inputs: dict, candidates: dict
) -> Found:
    """The search over `ladders`, extended past the default ladders' end when the best setting
    sits there (not when the user gave the TTLs: `candidates`)."""
    ttls, min_ttl = ladders["ttl"], inputs["min_ttl"]
    table, chosen, met = _priced_choice(model, ladders, target, inputs)
    searched, extended = ladders, []
    if "ttl" not in candidates:  # the default ladders adapt when the choice sits at their end
        allowed = [t for t in ttls if min_ttl is None or t >= min_ttl]
        if chosen["ttl"] == min(ttls) and (min_ttl is None or min_ttl < min(ttls)):
            searched = {
                "ttl": _merge(ttls, SHORT_TTLS),
                "heartbeat_interval": _merge(ladders["heartbeat_interval"], SHORT_HEARTBEATS),
                "watcher_interval": _merge(ladders["watcher_interval"], SHORT_WATCHERS),
            }
            extended.append(
                f"shorter TTLs ({duration(min(SHORT_TTLS))} to {duration(max(SHORT_TTLS))}) were "
                f"searched because the best setting sat at {duration(min(ttls))}, the end of the "
                "default ladder"
            )
        elif chosen["ttl"] == max(allowed):
            searched = {
                **ladders,
                "ttl": _merge(ttls, LONG_TTLS),
                "heartbeat_interval": _merge(ladders["heartbeat_interval"], LONG_HEARTBEATS),
            }
            extended.append(
                f"longer TTLs (up to {duration(max(LONG_TTLS))}) were searched because the best "
                f"setting sat at {duration(max(ttls))}, the end of the default ladder"
            )
        if extended:
            table, chosen, met = _priced_choice(model, searched, target, inputs)
    return Found(table, chosen, met, {k: list(vs) for k, vs in searched.items()}, extended)


def _priced_choice(
    model: CandidateModel, ladders: dict, target: float, inputs: dict
) -> tuple[pd.DataFrame, pd.Series, bool]:
    """(the candidate table with feasibility and scores, the chosen row, whether the target was
    met)."""
    table, rules = model.priced(
        ladders["ttl"], ladders["heartbeat_interval"], ladders["watcher_interval"], target, inputs
    )
    feasible = table["feasible"]
    chosen = choose(table, feasible, rules["min_ttl"], inputs["recovery_tolerance"])
    return table, chosen, bool(feasible.any())


def _merge(ladder: list, extra) -> list:
    return sorted(set(ladder) | {float(v) for v in extra}, key=lambda v: (v is not None, v or 0.0))
