"""How long the notebooks take in fast mode, against a kernel that runs an empty notebook.

Each notebook is executed once with nbclient on this interpreter's kernel (LEASELAB_FAST=1,
LEASELAB_HEADLESS=1), as tests/teaching/test_notebooks.py does; the floor is the same execution of
a one-cell notebook, measured in the same run (kernel start-up dominates it). The project's goal is
a fast-mode total under 300 s on a quiet 2-core machine. Prints one JSON object.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

FOLDER = Path(__file__).resolve().parents[1] / "notebooks"


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
    seconds = {
        path.stem[:2]: round(_execute(nbformat.read(path, as_version=4)), 1)
        for path in sorted(FOLDER.glob("[0-9][0-9]-*.ipynb"))
    }
    total = sum(seconds.values())
    print(
        json.dumps(
            {
                "notebooks": len(seconds),
                "seconds": seconds,
                "total_s": round(total, 1),
                "empty_notebook_s": round(floor, 2),
                "ratio_to_empty_notebooks": round(total / (floor * len(seconds)), 2),
                "goal_total_s": 300,
            }
        )
    )


if __name__ == "__main__":
    main()
