"""How long the notebooks take in fast mode, against a kernel that runs an empty notebook.

Each notebook is executed once with nbclient on this interpreter's kernel (LEASELAB_FAST=1,
LEASELAB_HEADLESS=1), as tests/teaching/test_notebooks.py does; the floor is the same execution of
a one-cell notebook, measured in the same run (kernel start-up dominates it). The project's goal is
a fast-mode total under 300 s on a quiet 2-core machine. --quick: the notebooks that need no
PostgreSQL, and the goal scaled by their share of the notebooks. Prints one JSON object
(benchmarks/figures.py).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import nbformat
from figures import emit, figure, quick
from nbclient import NotebookClient

FOLDER = Path(__file__).resolve().parents[1] / "notebooks"
GOAL_TOTAL_S = 300.0
NEEDS_POSTGRES = ("08", "09", "10")  # as tests/teaching/test_notebooks.py marks them


def _execute(nb) -> float:
    start = time.perf_counter()
    NotebookClient(
        nb, kernel_name="python3", timeout=900, resources={"metadata": {"path": str(FOLDER)}}
    ).execute()
    return time.perf_counter() - start


def main() -> None:
    os.environ["LEASELAB_FAST"] = "1"
    os.environ["LEASELAB_HEADLESS"] = "1"
    os.environ["MPLBACKEND"] = "module://matplotlib_inline.backend_inline"
    os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    empty = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("import sim")])
    floor = min(_execute(empty) for _ in range(2))
    paths = sorted(FOLDER.glob("[0-9][0-9]-*.ipynb"))
    chosen = [p for p in paths if p.stem[:2] not in NEEDS_POSTGRES] if quick() else paths
    seconds = {
        path.stem[:2]: round(_execute(nbformat.read(path, as_version=4)), 1) for path in chosen
    }
    total = sum(seconds.values())
    goal = GOAL_TOTAL_S * len(chosen) / len(paths)
    note = f"{len(chosen)} of {len(paths)} notebooks, goal scaled" if quick() else None
    figures = [
        figure("fast_mode_total_s", total, unit="s", goal=round(goal, 1), note=note, digits=1),
        figure(
            "ratio_to_empty_notebooks",
            total / (floor * len(seconds)),
            unit="x",
            floor="a one-cell notebook (import sim)",
            floor_value=floor,
            floor_unit="s",
            digits=2,
        ),
    ]
    emit("notebooks", figures, notebooks=len(seconds), seconds=seconds)


if __name__ == "__main__":
    main()
