"""The one output format of every benchmark: one JSON object on one line of stdout.

    {"benchmark": "model", "quick": false, "figures": [FIGURE, ...], ...details}

FIGURE = {"name": "ratio_to_bare_simpy", "value": 6.1, "unit": "x", "goal": 3.0,
          "better": "lower", "met": false, "floor": "bare SimPy loop, same events", ...}

`value` is the measured figure (null when it could not be measured), `goal` the project's target
for it (null: reported, not judged), `better` says which side of the goal passes ("lower": value
<= goal; "higher": value >= goal), `met` is that comparison (null without a goal). A figure that is
a ratio to a floor measured in the same process names that floor in `floor` (what it is) and may
carry `floor_value` and `floor_unit`. `note` says anything a reader of the table must know (an
estimate, a smaller size under --quick). Anything else a benchmark knows goes beside `figures`.
benchmarks/table.py reads these lines (from any benchmark, in any order) and prints the table.
"""

from __future__ import annotations

import json
import math
import sys


def figure(
    name: str,
    value: float | None,
    *,
    unit: str = "",
    goal: float | None = None,
    better: str = "lower",
    floor: str | None = None,
    floor_value: float | None = None,
    floor_unit: str | None = None,
    note: str | None = None,
    digits: int = 3,
) -> dict:
    """One figure against its goal; `met` is computed here, so the rule and the verdict agree."""
    if better not in ("lower", "higher"):
        raise ValueError(f"better must be 'lower' or 'higher', not {better!r}")
    if value is not None and not math.isfinite(value):
        value = None
    met = None
    if goal is not None and value is not None:
        met = value <= goal if better == "lower" else value >= goal
    out: dict = {
        "name": name,
        "value": None if value is None else round(value, digits),
        "unit": unit,
        "goal": goal,
        "better": better,
        "met": met,
    }
    if floor is not None:
        out["floor"] = floor
        if floor_value is not None:
            out["floor_value"] = round(floor_value, 3)
            out["floor_unit"] = floor_unit or unit
    if note:
        out["note"] = note
    return out


def quick() -> bool:
    """--quick on the command line: a smaller run (minutes for the whole of `make bench`)."""
    return "--quick" in sys.argv[1:]


def emit(benchmark: str, figures: list[dict], **details) -> None:
    """Print the benchmark's one JSON line (strict JSON: no NaN)."""
    record = {"benchmark": benchmark, "quick": quick(), "figures": figures, **details}
    print(json.dumps(record, allow_nan=False), flush=True)
