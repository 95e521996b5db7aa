"""`python -m sim review` of a queue's own SQL on the embedded server, as README shows it.

Each review below runs in a fresh interpreter, from a cold start (the embedded PostgreSQL, or
$LEASELAB_DSN, started by the command itself as a user's would be), timed to its exit; goal 20 s
each on a quiet 2-core machine. The floor, measured in the same process right after each review:
`python -m sim run` of the same scenario and SQL (a cold start, the queue checked on the server,
one sandbox, one run), so the ratio says how many single runs a review costs. --quick: the first
review only. Prints one JSON object (benchmarks/figures.py).

    python benchmarks/bench_review.py [--quick]
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from figures import emit, figure, quick

ROOT = Path(__file__).resolve().parents[1]
QUEUES = ROOT / "examples" / "queues"
REVIEWS = {  # name: (scenario, queue directory), as in README.md
    "seed_gc_pause_zombie": ("gc-pause-zombie", QUEUES / "seed"),
    "river_like": (str(QUEUES / "river-like" / "scenario.toml"), QUEUES / "river-like"),
}
GOAL_S = 20.0  # issue 37 item 4


def wall(argv: list[str]) -> float:
    """Wall seconds of `python -m sim argv`, run now; its failure ends the benchmark."""
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "sim", *argv],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    seconds = time.perf_counter() - start
    # review exits 1 when a verdict is FAIL: a finding, not a failure of the command
    if done.returncode not in (0, 1):
        raise SystemExit(f"python -m sim {' '.join(argv)} exited {done.returncode}: {done.stderr}")
    return seconds


def main() -> None:
    reviews = list(REVIEWS.items())[:1] if quick() else list(REVIEWS.items())
    wall(["--help"])  # the first start after an install compiles the bytecode
    figures, details = [], {}
    for name, (scenario, queue) in reviews:
        review = wall(["review", scenario, "--sql", str(queue)])
        single = wall(["run", scenario, "--sql", str(queue)])
        figures.append(figure(f"{name}_review_s", review, unit="s", goal=GOAL_S, digits=2))
        figures.append(
            figure(
                f"{name}_review_over_one_run",
                review / single,
                unit="x",
                floor="python -m sim run, same scenario and SQL",
                floor_value=single,
                floor_unit="s",
                digits=1,
            )
        )
        details[name] = {"scenario": scenario, "sql": str(queue.relative_to(ROOT))}
    emit(
        "review",
        figures,
        server="$LEASELAB_DSN" if os.environ.get("LEASELAB_DSN") else "embedded",
        reviews=details,
        load_average=[round(x, 2) for x in os.getloadavg()],
    )


if __name__ == "__main__":
    main()
