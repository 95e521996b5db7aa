"""`python -m sim advise` from a cold start: when the answer is on screen, when the evidence is.

Runs README's first advise command (`advise sample --arrival-rate 1`) in a fresh interpreter, with
stdout unbuffered, and times its first line of output (the answer; goal 1.5 s) and its exit (the
evidence, the verification simulations included; goal 4 s); then the same with --no-verify. The
floor, measured in the same process between them: a bare interpreter start (`python -c pass`);
the figures are also given as ratios to it, so that a busy machine is told apart from a slow
command. Each figure is the median of REPEATS runs (1 with --quick). Prints one JSON object
(benchmarks/figures.py).

    python benchmarks/bench_advise.py [--quick]
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from figures import emit, figure, quick

ROOT = Path(__file__).resolve().parents[1]
COMMAND = ["advise", "sample", "--arrival-rate", "1"]
ANSWER_GOAL_S, EVIDENCE_GOAL_S = 1.5, 4.0  # issue 37 item 3, on a quiet 2-core machine
REPEATS = 3


def timed(argv: list[str]) -> tuple[float, float]:
    """(seconds to the first line on stdout, seconds to exit) of `python argv` started now."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    start = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, *argv],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout is not None
    first = None
    for line in proc.stdout:
        if first is None and line.strip():
            first = time.perf_counter() - start
    if proc.wait() != 0:
        raise SystemExit(f"python {' '.join(argv)} exited {proc.returncode}")
    end = time.perf_counter() - start
    return (end if first is None else first), end


def median_of(argv: list[str], repeats: int) -> tuple[float, float]:
    runs = [timed(argv) for _ in range(repeats)]
    return statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs)


def main() -> None:
    repeats = 1 if quick() else REPEATS
    timed(["-m", "sim", "--help"])  # the first start after an install compiles the bytecode
    answer, evidence = median_of(["-m", "sim", *COMMAND], repeats)
    start, _ = median_of(["-c", "pass"], max(repeats, 3))
    bare_answer, bare_end = median_of(["-m", "sim", *COMMAND, "--no-verify"], repeats)
    floor = {"floor": "python -c pass", "floor_value": start, "floor_unit": "s"}
    figures = [
        figure("answer_s", answer, unit="s", goal=ANSWER_GOAL_S, note="first line on stdout"),
        figure("evidence_s", evidence, unit="s", goal=EVIDENCE_GOAL_S, note="exit"),
        figure("answer_over_interpreter_start", answer / start, unit="x", **floor, digits=1),
        figure("evidence_over_interpreter_start", evidence / start, unit="x", **floor, digits=1),
        figure("no_verify_s", bare_end, unit="s", note="--no-verify, exit"),
    ]
    emit(
        "advise",
        figures,
        command="python -m sim " + " ".join(COMMAND),
        repeats=repeats,
        no_verify_answer_s=round(bare_answer, 3),
        interpreter_start_s=round(start, 3),
        load_average=[round(x, 2) for x in os.getloadavg()],
    )


if __name__ == "__main__":
    main()
