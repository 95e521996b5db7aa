"""Progress bars for long runs and sweeps, and whether anyone can see them.

A bar is worth drawing on a screen; in batch output it is noise that stays: a notebook executed by
nbconvert, papermill or pytest saves the bar's last frame ("94%|...") in its outputs, and
`make html` would publish it. So an automatic bar (progress=None) is drawn only where it can be
watched: never when $LEASELAB_HEADLESS is on, nor in a kernel a batch runner started, nor outside
a kernel when standard error is not a terminal (a pipe, a CI log).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from sim.errors import ConfigError

HEADLESS_ENV = "LEASELAB_HEADLESS"
# Processes that execute notebooks without a widget frontend (the kernel's parent).
HEADLESS_RUNNERS = ("nbconvert", "nbclient", "papermill", "pytest", "nbmake")
ANCESTORS = 3  # the kernel's parent, and up to two of its ancestors, may name the runner
SHOW_AFTER = 2.0  # progress=None: a bar appears once the work has taken this many wall seconds
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("", "0", "false", "no", "off")


def env_flag(name: str) -> bool | None:
    """An environment flag: True, False, or None when unset."""
    value = os.environ.get(name)
    if value is None:
        return None
    value = value.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ConfigError(f"${name}: expected 1 or 0 (true/false, yes/no, on/off), got {value!r}")


def _parent_cmdline() -> str:
    """The command line of the process that launched this kernel and those of its ancestors, up
    to three (Linux), or '': a pytest-xdist worker that starts kernels runs under pytest."""
    pid = os.environ.get("JPY_PARENT_PID")
    lines = []
    try:
        process = int(pid or 0)
        for _ in range(ANCESTORS):
            if process <= 1:
                break
            proc = Path(f"/proc/{process}")
            lines.append(
                (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
            )
            process = int((proc / "stat").read_text().rpartition(")")[2].split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return " ".join(lines)


def in_kernel() -> bool:
    """Running inside an IPython kernel (a notebook), not plain Python or a terminal IPython."""
    if "IPython" not in sys.modules:  # a kernel has imported it; importing it costs ~0.1 s
        return False
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and hasattr(shell, "kernel")


def batch_kernel() -> bool:
    """A kernel started by a batch runner (nbconvert, nbclient, papermill, pytest): its outputs
    are saved, nobody watches them."""
    if not in_kernel():
        return False
    parent = _parent_cmdline().lower()
    return any(runner in parent for runner in HEADLESS_RUNNERS)


def headless(override: bool | None = None) -> bool:
    """True when no widget frontend can show sliders or bars: $LEASELAB_HEADLESS, no IPython
    kernel, or a kernel started by a batch runner. `override` wins."""
    if override is not None:
        return bool(override)
    flag = env_flag(HEADLESS_ENV)
    if flag is not None:
        return flag
    return not in_kernel() or batch_kernel()


def bars_allowed() -> bool:
    """May an automatic bar (progress=None) be drawn? Not when $LEASELAB_HEADLESS is on, nor in a
    kernel a batch runner started, nor in plain Python writing to a pipe or a log; a terminal keeps
    its bars."""
    flag = env_flag(HEADLESS_ENV)
    if flag is not None:
        return not flag
    if in_kernel():
        return not batch_kernel()
    return sys.stderr.isatty()


class Progress:
    """A tqdm.auto bar over `total` steps: from the start (mode True), never (False), or once the
    work has taken SHOW_AFTER wall seconds (None) where bars_allowed()."""

    def __init__(self, total: int, mode: bool | None, desc: str, unit: str):
        if mode is None and not bars_allowed():
            mode = False
        self.total, self.mode, self.desc, self.unit = total, mode, desc, unit
        self.done = 0
        self.start = time.perf_counter()
        self.bar = None
        if mode is True:
            self._open()

    def _open(self) -> None:
        from tqdm.auto import tqdm

        self.bar = tqdm(
            total=self.total, initial=self.done, desc=self.desc, unit=self.unit, leave=False
        )

    def tick(self, steps: int = 0) -> None:
        """`steps` more done (0: only look at the clock)."""
        self.done += steps
        if (
            self.bar is None
            and self.mode is None
            and self.done < self.total
            and time.perf_counter() - self.start > SHOW_AFTER
        ):
            self._open()
        elif self.bar is not None and steps:
            self.bar.update(steps)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None
