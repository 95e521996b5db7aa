"""The protocol's step vocabulary: one small class per kind of step (as SimPy's events are types),
so that a type checker sees each step's shape and a driver dispatches on the step's class.

  Statement(name, params, job, ttl)  run a named statement -> its rows; the driver binds `now` when
                                     it executes, and lease_until = now + ttl (bind_clock); a ttl
                                     given as (seconds, cap) caps lease_until at cap
  BEGIN, COMMIT, ROLLBACK            transaction control (BEGIN travels with the first statement;
                                     ROLLBACK never fails: a dead connection has nothing open)
  Work(seconds)                      the process computes: a stop-the-world pause stretches it
  Wait(seconds)                      the process sleeps; it goes on once no pause holds it
  Delay(seconds)                     time passes outside the process (the network holds a message)
  Charge(key)                        the PSP charges the card -> "new", or "replay" for a key seen
  Record(kind, worker, job, attempt, detail)  one event record, stamped with the driver's time
                                     (the arguments of EventLog.add and the live Recorder.add)
  NOW                                -> the client's clock (a worker's own, skew included)
  CrashAt(point)                     a scripted fault may kill the process here

A blocking driver plays a protocol generator with `play` and a table {step class: handler}; the
model's driver dispatches on the class inline, its hot path (sim.model.driver).
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Mapping
from typing import Any, TypeVar

Ttl = float | tuple[float, float] | None
Rows = list[tuple[Any, ...]]
T = TypeVar("T")


class Statement:
    """Run the named statement with `params` (the driver binds the clock into them); `job` is the
    job it concerns (for a lock wait's record), `ttl` the lease it writes."""

    __slots__ = ("name", "params", "job", "ttl")

    def __init__(self, name: str, params: dict[str, Any], job: int | None = None, ttl: Ttl = None):
        self.name = name
        self.params = params
        self.job = job
        self.ttl = ttl


class Record:
    """One event record: kind, worker, job, attempt, detail (the time is the driver's)."""

    __slots__ = ("kind", "worker", "job", "attempt", "detail")

    def __init__(self, kind: str, worker: str, job: int | None, attempt: int | None, detail: Any):
        self.kind = kind
        self.worker = worker
        self.job = job
        self.attempt = attempt
        self.detail = detail


class _Seconds:
    """A step that lets `seconds` pass."""

    __slots__ = ("seconds",)

    def __init__(self, seconds: float):
        self.seconds = seconds


class Work(_Seconds):
    """The process computes for `seconds` (a stop-the-world pause stretches it)."""

    __slots__ = ()


class Wait(_Seconds):
    """The process sleeps `seconds`; it goes on once no pause holds it."""

    __slots__ = ()


class Delay(_Seconds):
    """`seconds` pass outside the process (the network holds a message)."""

    __slots__ = ()


class Charge:
    """The PSP charges the card under idempotency `key` (None: no key) -> "new" or "replay"."""

    __slots__ = ("key",)

    def __init__(self, key: str | None):
        self.key = key


class CrashAt:
    """A scripted fault may kill the process at `point` (after_psp, after_marker)."""

    __slots__ = ("point",)

    def __init__(self, point: str):
        self.point = point


class Begin:
    """BEGIN: it travels with the transaction's first statement."""

    __slots__ = ()


class Commit:
    """COMMIT (one round trip)."""

    __slots__ = ()


class Rollback:
    """ROLLBACK; never fails (a dead connection has nothing open)."""

    __slots__ = ()


class Now:
    """-> the client's clock (a worker's own, skew included)."""

    __slots__ = ()


BEGIN, COMMIT, ROLLBACK, NOW = Begin(), Commit(), Rollback(), Now()
Step = Statement | Record | Work | Wait | Delay | Charge | CrashAt | Begin | Commit | Rollback | Now
Steps = Generator[Step, Any, T]  # a protocol generator that returns a T
Handlers = Mapping[type, Callable[[Any], Any]]


def play(steps: Steps[T], handlers: Handlers) -> T:
    """Play `steps` by `handlers[type(step)](step)`, which returns the value sent back; an error a
    handler raises is thrown into the protocol at that step, as `yield from` would. Returns what
    the steps return (the blocking drivers' trampoline: live, probes, the protocol's tests)."""
    send, throw = steps.send, steps.throw
    resume: Callable[[Any], Step] = send
    value: Any = None
    while True:
        try:
            step = resume(value)
        except StopIteration as done:
            result: T = done.value
            return result
        try:
            value, resume = handlers[step.__class__](step), send
        except Exception as exc:  # a lost connection, a server error, the handler's own
            value, resume = exc, throw


def bind_clock(params: dict[str, Any], now: float, ttl: Ttl = None) -> None:
    """The time binding of every time-dependent statement: `now` is the client's clock when the
    statement executes (never the server's now()), and a lease it writes ends at now + ttl, or at
    min(now + ttl, cap) for a ttl given as (ttl, cap): a lease under an execution timeout."""
    params["now"] = now
    if ttl is not None:
        if isinstance(ttl, tuple):
            params["lease_until"] = min(now + ttl[0], ttl[1])
        else:
            params["lease_until"] = now + ttl
