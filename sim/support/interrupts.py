"""SIGTERM ends a run the way Ctrl-C does: as an exception in the main thread, so that every
cleanup (the children killed, the run's schema and role dropped, the temporary folder removed,
the embedded server released) runs before the process exits. Python's default for SIGTERM is to
die at once, leaving all of it behind."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator


class Terminated(KeyboardInterrupt):
    """The process received SIGTERM."""


def _raise(signum, frame) -> None:
    raise Terminated("terminated")


@contextlib.contextmanager
def terminate_like_interrupt() -> Iterator[None]:
    """Within the block, SIGTERM raises Terminated (a KeyboardInterrupt) in the main thread; the
    previous handler comes back after. Does nothing outside the main thread."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
