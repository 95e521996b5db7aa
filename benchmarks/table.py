"""Every benchmark figure against its goal, as one table: the end of `make bench`.

Reads the JSON lines the benchmarks printed (benchmarks/figures.py describes the format) from the
files given, or stdin; other lines are skipped. One row per figure: benchmark, figure, value,
goal, verdict (met, MISSED, or - when the figure has no goal or no value), and the floor or note.

    python benchmarks/table.py out/bench/*.json
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from pathlib import Path

HEADER = ("benchmark", "figure", "value", "goal", "verdict", "floor / note")


def records(lines: Iterable[str]) -> list[dict]:
    """The benchmark objects among `lines` (a line that is not one is skipped)."""
    found = []
    for line in lines:
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and isinstance(record.get("figures"), list):
            found.append(record)
    return found


def _number(value, unit: str) -> str:
    if value is None:
        return "n/a"
    text = f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.4g}"
    return f"{text} {unit}".strip()


def rows(found: list[dict]) -> list[tuple[str, ...]]:
    table = []
    for record in found:
        name = record["benchmark"] + (" (quick)" if record.get("quick") else "")
        for fig in record["figures"]:
            unit = fig.get("unit", "")
            goal = fig.get("goal")
            side = "<=" if fig.get("better", "lower") == "lower" else ">="
            verdict = {True: "met", False: "MISSED"}.get(fig.get("met"), "-")
            notes = []
            if fig.get("floor"):
                floor = fig["floor"]
                if fig.get("floor_value") is not None:
                    floor += f" = {_number(fig['floor_value'], fig.get('floor_unit', unit))}"
                notes.append(f"floor: {floor}")
            if fig.get("note"):
                notes.append(fig["note"])
            table.append(
                (
                    name,
                    fig["name"],
                    _number(fig.get("value"), unit),
                    "-" if goal is None else f"{side} {_number(goal, unit)}",
                    verdict,
                    "; ".join(notes),
                )
            )
    return table


def render(table: list[tuple[str, ...]]) -> str:
    widths = [max(len(r[i]) for r in [HEADER, *table]) for i in range(len(HEADER))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in table]
    head = "  ".join(c.ljust(w) for c, w in zip(HEADER, widths, strict=True)).rstrip()
    return "\n".join([head, "  ".join("-" * w for w in widths), *lines])


def main(argv: list[str]) -> int:
    if argv:
        lines = [line for path in argv for line in Path(path).read_text().splitlines()]
    else:
        lines = sys.stdin.read().splitlines()
    found = records(lines)
    if not found:
        print("no benchmark figures found", file=sys.stderr)
        return 1
    table = rows(found)
    print(render(table))
    missed = sum(r[4] == "MISSED" for r in table)
    met = sum(r[4] == "met" for r in table)
    print(f"\n{len(table)} figures from {len(found)} benchmarks: {met} met, {missed} missed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
