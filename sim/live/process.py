"""Entry point of every live child process: `python -m sim.live.process` (config on stdin).

The runner starts it as `python -c BOOTSTRAP`: the `sim` package is registered without running
sim/__init__.py (which imports the whole library: pandas, scipy, matplotlib), so that a child,
and above all a worker's replacement after a kill, starts in a fraction of the time.

Protocol with the runner: one JSON line of configuration (on stdin, so that a DSN's password never
appears in a process listing); the child imports, connects and prints `ready`; then one JSON line
with the shared start t0 (time.monotonic()), its incarnation and when to start, and it runs until
the runner kills it. Importing takes a second or more on a busy machine, so the runner keeps a
spare worker process ready for each worker and starts it when the worker is killed. On Linux the child asks
the kernel to SIGKILL it if the runner dies, so no orphan outlives a run.
"""

from __future__ import annotations

import ctypes
import json
import signal
import sys

PR_SET_PDEATHSIG = 1
BOOTSTRAP = """
import importlib.util, sys
spec = importlib.util.spec_from_file_location("sim", {init!r}, submodule_search_locations=[{root!r}])
sys.modules["sim"] = importlib.util.module_from_spec(spec)
from sim.live.process import main
main()
"""


def command(python: str, package_dir: str) -> list[str]:
    """The argv that starts a live child from the sim package in `package_dir`."""
    init = f"{package_dir}/__init__.py"
    return [python, "-c", BOOTSTRAP.format(init=init, root=package_dir)]


def _die_with_parent() -> None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: the runner's cleanup is the only guard
        pass


def main() -> None:
    _die_with_parent()
    config = json.loads(sys.stdin.readline())
    from sim.live import connection
    from sim.live.roles import setup

    connection.IN_CHILD = True  # a statement that hits the sandbox ends this process (FATAL_EXIT)

    role = setup(config)
    print("ready", flush=True)
    start = json.loads(sys.stdin.readline())
    role(start["t0"], start.get("incarnation", 0), start.get("start_at", 0.0))


if __name__ == "__main__":
    main()
