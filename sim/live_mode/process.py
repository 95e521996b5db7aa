"""Entry point of every live child process: `python -m sim.live_mode.process` (config on stdin).

`import sim` loads nothing until a name is used, so a child, and above all a worker's replacement
after a kill, imports only the modules of its role.

Protocol with the runner: one JSON line of configuration (on stdin, so that a DSN's password never
appears in a process listing); the child imports, connects and prints `ready`; then one JSON line
with the shared start t0 (time.monotonic()), its incarnation and when to start, and it runs until
the runner kills it. Importing takes a second or more on a busy machine, so the runner keeps a spare
worker process ready for each worker and starts it when the worker is killed. On Linux the child
asks the kernel to SIGKILL it if the runner dies, so no orphan outlives a run.
"""

from __future__ import annotations

import ctypes
import json
import signal
import sys
from pathlib import Path

PR_SET_PDEATHSIG = 1


def command(python: str, package_dir: str) -> list[str]:
    """The argv that starts a live child from the sim package in `package_dir` (the runner's own:
    its folder goes first on the child's path, whatever the child's working directory)."""
    root = str(Path(package_dir).parent)
    start = (
        f"import sys; sys.path.insert(0, {root!r}); from sim.live_mode.process import main; main()"
    )
    return [python, "-c", start]


def _die_with_parent() -> None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: the runner's cleanup is the only guard
        pass


def main() -> None:
    _die_with_parent()
    config = json.loads(sys.stdin.readline())
    from sim.live_mode import connection
    from sim.live_mode.roles import setup

    connection.IN_CHILD = True  # a statement that hits the sandbox ends this process (FATAL_EXIT)

    role = setup(config)
    print("ready", flush=True)
    start = json.loads(sys.stdin.readline())
    role(start["t0"], start.get("incarnation", 0), start.get("start_at", 0.0))


if __name__ == "__main__":
    main()
