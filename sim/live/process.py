"""Entry point of every live child process: `python -m sim.live.process` (config on stdin).

Protocol with the runner: one JSON line of configuration (on stdin, so that a DSN's password never
appears in a process listing), the child connects and prints `ready`, then one line with the
shared start t0 (time.monotonic()), and it runs until the runner kills it. On Linux the child asks
the kernel to SIGKILL it if the runner dies, so no orphan outlives a run.
"""

from __future__ import annotations

import ctypes
import json
import signal
import sys

PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: the runner's cleanup is the only guard
        pass


def main() -> None:
    _die_with_parent()
    config = json.loads(sys.stdin.readline())
    from sim.live.roles import setup

    role = setup(config)
    print("ready", flush=True)
    t0 = float(sys.stdin.readline())
    role(t0)


if __name__ == "__main__":
    main()
