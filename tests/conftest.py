"""Shared fixtures: the PostgreSQL server of the session and a fresh backend of each kind.

Postgres tests never skip: without LEASELAB_DSN the embedded server is started, and if that
fails the tests fail with its error.

Under pytest-xdist (`make test`) every worker process has an embedded server of its own, in
$LEASELAB_PGDATA (or the default data directory) with "-gw0", "-gw1", ... appended; the worker's
subprocesses and notebook kernels inherit it. With LEASELAB_DSN all workers share that server:
each test works in schemas and roles of its own, and a test that looks at the whole server (every
schema, role or session on it) is marked `server_wide` and runs while no other postgres test does
(a file lock per server, shared by the postgres tests, exclusive for those). Live runs (`live`)
run one at a time, beside the other workers' tests: they are timed on the wall clock.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from sim.db.memory import MemoryBackend
from sim.db.postgres import PostgresBackend
from sim.db.server import embedded_pgdata, embedded_server

WORKER = os.environ.get("PYTEST_XDIST_WORKER")  # gw0, gw1, ... in a pytest-xdist worker


def pytest_configure(config):
    if WORKER and not os.environ.get("LEASELAB_DSN"):
        os.environ["LEASELAB_PGDATA"] = f"{embedded_pgdata()}-{WORKER}"


def pytest_unconfigure(config):
    if not WORKER:  # the live lock (pytest_runtest_protocol), named after this process; a server's
        _lock_path(f"live-{os.getpid()}").unlink(missing_ok=True)  # stays: other runs may hold it


@pytest.hookimpl(tryfirst=True)
def pytest_xdist_auto_num_workers(config):
    """`-n auto`: a worker per core and one more. A worker often waits (on PostgreSQL, a notebook
    kernel, a live run's wall clock): on 2 cores, 3 workers ran `make test` in 6:42 where 2 took
    8:00. PYTEST_XDIST_AUTO_NUM_WORKERS, when set, is the number as it stands."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    from xdist.plugin import pytest_xdist_auto_num_workers as cores

    return cores(config) + 1


def _server_lock_name(dsn: str) -> str:
    return f"server-{hashlib.sha256(dsn.encode()).hexdigest()[:16]}"


def _lock_path(name: str) -> Path:
    return Path(tempfile.gettempdir()) / f"leaselab-tests-{name}.lock"


def pytest_collection_modifyitems(config, items):
    """Under pytest-xdist the modules of the longest tests come first, each kept whole (a module's
    fixtures are set up once): notebook kernels and live runs in real time, then the modules with
    a test marked slow or a property test (hypothesis: hundreds of examples). The tests of
    milliseconds come last, so that no worker ends the run alone on a long one while the other
    has nothing left to take (worksteal takes from the end of a worker's queue)."""
    if not WORKER:
        return
    rank: dict[str, int] = {}
    for item in items:
        module = item.nodeid.partition("::")[0]
        if item.get_closest_marker("notebooks") or item.get_closest_marker("live"):
            rank[module] = 0
        elif item.get_closest_marker("slow") or _is_property_test(item):
            rank[module] = min(rank.get(module, 1), 1)
    items.sort(key=lambda item: rank.get(item.nodeid.partition("::")[0], 2))  # stable


def _is_property_test(item) -> bool:
    return getattr(getattr(item, "obj", None), "is_hypothesis_test", False)


def pytest_terminal_summary(terminalreporter):
    """The sum of every test's durations (setup, call, teardown), after --durations' list: less
    noisy than the wall time on a busy machine, and the same whatever the number of workers."""
    reports = [
        report
        for reports in terminalreporter.stats.values()
        for report in reports
        if hasattr(report, "duration") and getattr(report, "when", None)
    ]
    if reports:
        tests = len({report.nodeid for report in reports})
        total = sum(report.duration for report in reports)
        terminalreporter.write_line(f"sum of test durations: {total:.1f} s over {tests} tests")


@pytest.fixture(scope="session", autouse=True)
def hypothesis_draws_no_local_constants():
    """Derandomized examples that depend on the test alone. Hypothesis also draws, now and then, a
    literal from the local modules already imported; `sim` imports lazily, so the examples (and
    what the fidelity tally counts) would depend on the tests that ran before in the process.
    Hypothesis's own pool is replaced by an empty one (a private name: this fails loudly if it
    moves)."""
    from hypothesis.internal.conjecture import providers
    from hypothesis.internal.constants_ast import Constants

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(providers, "_get_local_constants", Constants)
        providers.CONSTANTS_CACHE.cache.clear()  # values allowed so far, with the old pool's
        yield
    providers.CONSTANTS_CACHE.cache.clear()


@pytest.fixture(scope="session")
def pg_dsn() -> str:
    """LEASELAB_DSN if set, else the embedded server (started once per session and worker)."""
    return os.environ.get("LEASELAB_DSN") or embedded_server().get_uri()


@contextlib.contextmanager
def _flock(name: str, exclusive: bool):
    """A shared (or exclusive) hold on lock `name` among this machine's test processes."""
    with open(_lock_path(name), "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _locks(item) -> tuple[tuple[str, bool], ...]:
    """The (lock name, exclusive) holds `item` needs, in the order they are taken (none: no item).
    The run's live lock is named after the xdist controller."""
    if item is None:
        return ()
    locks = [(f"live-{os.getppid()}", True)] if item.get_closest_marker("live") else []
    dsn = os.environ.get("LEASELAB_DSN")
    if dsn and item.get_closest_marker("postgres"):
        locks.append((_server_lock_name(dsn), item.get_closest_marker("server_wide") is not None))
    return tuple(locks)


_kept: dict[tuple[tuple[str, bool], ...], contextlib.ExitStack] = {}  # holds kept for the next test


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Under pytest-xdist: a `live` test (real worker processes timed on the wall clock; the time
    scale guard refuses to run when replacements start late) runs while no other live test of this
    run does; tests of other kinds go on beside it, one per other worker (every live test passed,
    9% slower, with the other core busy with notebook kernels and PostgreSQL tests; two live runs
    at once load each other's guard). On a server shared by the workers (LEASELAB_DSN) a
    `server_wide` test runs while no other postgres test does. Locks are taken in that order,
    before the test's setup: a wait is not counted in its durations. An exclusive hold is kept when
    the next test needs the same holds, so that a series of such tests waits once for the other
    workers' tests to end, not before each."""
    if not WORKER:
        return (yield)
    needs = _locks(item)
    held = _kept.pop(needs, None)
    for other in _kept.values():  # the test planned next went to another worker
        other.close()
    _kept.clear()
    if held is None:
        held = contextlib.ExitStack()
        for name, exclusive in needs:
            held.enter_context(_flock(name, exclusive))
    try:
        return (yield)
    finally:
        if any(exclusive for _, exclusive in needs) and _locks(nextitem) == needs:
            _kept[needs] = held
        else:
            held.close()


@pytest.fixture(params=["memory", pytest.param("postgres", marks=pytest.mark.postgres)])
def backend(request):
    """A fresh backend: a new MemoryBackend, or a PostgresBackend in a new schema."""
    if request.param == "memory":
        db = MemoryBackend()
    else:
        db = PostgresBackend(request.getfixturevalue("pg_dsn"))
    yield db
    db.close()


# ---- issue 22's files, as a new user brings them (the advice's and the pool's tests) -----------


# milliseconds (90% of jobs around 2 s, 10% around 40 s), our own variant of the file
def bimodal_ms(n: int = 2000, seed: int = 22) -> pd.DataFrame:
    """n durations in ms: 90% lognormal around 2 s, 10% around 40 s (sigma 0.3 each), with an id."""
    rng = np.random.default_rng(seed)
    slow = rng.random(n) < 0.1
    seconds = rng.lognormal(np.where(slow, np.log(40.0), np.log(2.0)), 0.3)
    return pd.DataFrame(
        {"job_id": np.arange(1, n + 1), "duration_ms": np.round(seconds * 1000).astype(int)}
    )


@pytest.fixture(scope="session")
def bimodal_csv(tmp_path_factory):
    path = tmp_path_factory.mktemp("issue22") / "bimodal.csv"
    bimodal_ms().to_csv(path, index=False)
    return path
