"""The time-scale guard's measurement, taken once the table is loaded and before the run starts.

One probe client per worker plays a worker's cycle of sim.protocol (claim, one heartbeat, the
completion transaction) on a connection of its own, and one more client plays the watcher's tick,
all at once: the run's concurrency on its loaded table, with the statements its queue runs, at the
rate the run sends them (a worker's cycle every poll interval or job, whichever is shorter, the
watcher's every watcher interval, at the time scale; at least every MAX_PACE_S). Each cycle is one
transaction, rolled back, so nothing stays (a sequence may advance). A statement that would wait for
another probe client's row lock is cut off (lock_timeout) and not timed: who waits for whom is the
protocol's business, which the simulation plays; the guard asks how fast the database answers.
Meanwhile the runner starts replacement worker processes and times them (the load of a running pool,
as a replacement meets it).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import psycopg

from sim.db.errors import DbUnavailable, StatementError
from sim.live_mode.connection import LiveConnection
from sim.live_mode.driver import LiveDriver
from sim.payload import payload_json
from sim.protocol import WatcherProtocol, WorkerProtocol

WARM_UP = 3  # cycles per client not timed: connection warm-up, plans cached
MIN_CYCLES = 10  # timed cycles per client before the probe may stop
MAX_SECONDS = 30.0  # the probe stops by then whatever it has
MAX_PACE_S = 0.25  # a client starts a cycle at least this often (wall seconds)
LOCK_TIMEOUT = "2ms"  # a wait for another probe client's lock longer than this is cut off
STUCK_S = 1.0  # a client still in a statement this long after the stop: timed so far, cancelled


class _Still:
    """The probe's clock: scenario time 0 (the start of the run), sleeps and work take no time."""

    scale = 1.0

    def now(self) -> float:
        return 0.0

    def sleep(self, _seconds: float) -> None:
        pass

    def sleep_until(self, _t: float) -> None:
        pass


class _Timings:
    """A recorder that keeps each statement's wall latency while `on`, and no event."""

    def __init__(self):
        self.on = False
        self.samples: list[tuple[str, float]] = []
        self.warm: list[tuple[str, float]] = []  # the warm-up's, for a statement never timed
        self.current: tuple[str, float] | None = None  # the statement in flight, since when

    def began(self, name: str, start: float) -> None:
        self.current = (name, start)

    def add(self, *_record) -> None:
        pass

    def statement(self, name: str, seconds: float) -> None:
        self.current = None
        (self.samples if self.on else self.warm).append((name, seconds))

    def in_flight(self) -> tuple[str, float] | None:
        """(statement, seconds so far) of the statement still running, if any: at least that
        long is what it takes (a claim that hangs would otherwise never be timed)."""
        if self.current is None:
            return None
        name, start = self.current
        return name, time.monotonic() - start


class _ProbeConnection(LiveConnection):
    """A connection whose cycle is one transaction the probe opens and rolls back: the protocol's
    own BEGIN, COMMIT and ROLLBACK are played inside it as nothing."""

    def control(self, command: str) -> None:
        pass

    def abort(self) -> None:
        pass

    def begin_cycle(self) -> None:
        super().control("BEGIN")
        self.open().execute("SELECT set_config('lock_timeout', %s, true)", (LOCK_TIMEOUT,))

    def cancel(self) -> None:
        """End the statement in flight, from another thread: its server process is terminated,
        so the probe's thread sees a lost connection (not the sandbox's time limit)."""
        if self.pid is None:
            return
        with (
            contextlib.suppress(psycopg.Error),
            psycopg.connect(self.dsn, autocommit=True, connect_timeout=10) as other,
        ):
            other.execute("SELECT pg_terminate_backend(%s)", (self.pid,))

    def end_cycle(self) -> None:
        try:
            super().control("ROLLBACK")
        except (StatementError, DbUnavailable):
            self.drop()


class LoadedTableProbe:
    """Probe clients in threads of the runner: start(), then stop() -> statement -> latencies."""

    def __init__(
        self,
        scenario,
        catalog,
        *,
        dsn: str,
        schema: str,
        queries: dict,
        scale: float,
        spare_jobs: tuple[int, ...] = (),
    ):
        self.scenario, self.catalog = scenario, catalog
        # jobs not loaded before the run: worker i inserts spare_jobs[i] in each of its cycles
        # (rolled back), so that the claim path is timed even on a table that starts empty
        self.spare_jobs = spare_jobs
        policy, work = scenario.policy, scenario.workload
        job = work.processing.mean_value() + work.psp_call.mean_value()
        self.pace = {  # wall seconds from the start of one cycle to the next
            "worker": min(scale * min(policy.poll_interval, job), MAX_PACE_S),
            "watcher": min(scale * policy.watcher_interval, MAX_PACE_S),
        }
        self.connection: dict[str, Any] = dict(
            dsn=dsn, schema=schema, queries=queries, clock=_Still()
        )
        self.clients = scenario.policy.workers + (1 if scenario.policy.watcher else 0)
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._timings: list[_Timings] = []
        self._cycles: list[int] = []
        self._dbs: list[_ProbeConnection] = []
        self.errors: list[Exception] = []

    def start(self) -> None:
        self._deadline = time.monotonic() + MAX_SECONDS
        policy = self.scenario.policy
        roles = [("worker", i) for i in range(policy.workers)]
        if policy.watcher:
            roles.append(("watcher", 0))
        for k, (role, i) in enumerate(roles):
            timings = _Timings()
            self._timings.append(timings)
            self._cycles.append(0)
            db = _ProbeConnection(client=f"probe/{role}{i}", recorder=timings, **self.connection)
            db.open()  # in the runner's thread: a server that refuses says so here
            self._dbs.append(db)
            thread = threading.Thread(target=self._loop, args=(k, role, i, db, timings))
            thread.daemon = True
            self._threads.append(thread)
        for thread in self._threads:
            thread.start()

    def stop(self) -> dict[str, np.ndarray]:
        """Stop once every client has played MIN_CYCLES timed cycles (or MAX_SECONDS passed);
        each statement's timed wall latencies."""
        while min(self._cycles) < MIN_CYCLES and time.monotonic() < self._deadline:
            if not any(t.is_alive() for t in self._threads):
                break
            time.sleep(0.01)
        self._stop.set()
        stuck: list[tuple[str, float]] = []
        for thread, timings, db in zip(self._threads, self._timings, self._dbs, strict=True):
            thread.join(STUCK_S)
            if thread.is_alive() and (flight := timings.in_flight()) is not None:
                stuck.append(flight)  # timed as far as it got, then cancelled
                db.cancel()
            thread.join()
        if self.errors:
            raise self.errors[0]
        by_name: dict[str, list[float]] = {}
        for timings in self._timings:
            for name, seconds in timings.samples:
                by_name.setdefault(name, []).append(seconds)
        for timings in self._timings:  # a statement only the warm-up timed: its warm-up figures
            for name, seconds in timings.warm:
                if name not in by_name or not by_name[name]:
                    by_name.setdefault(f"{name}\0warm", []).append(seconds)
        for name, seconds in stuck:
            by_name.setdefault(name, []).append(seconds)
        for key in [k for k in by_name if k.endswith("\0warm")]:
            name = key.removesuffix("\0warm")
            by_name.setdefault(name, []).extend(by_name.pop(key))
        return {name: np.asarray(values) for name, values in by_name.items()}

    def _loop(self, k: int, role: str, i: int, db: _ProbeConnection, timings: _Timings) -> None:
        driver = LiveDriver(_Still(), timings)
        cycle: Callable[[], None]
        if role == "watcher":
            watcher = WatcherProtocol(self.scenario.policy)

            def cycle():
                driver.play(watcher.tick(), db)

        else:
            steps = WorkerProtocol(
                f"probe-{i}",
                self.scenario,
                self.catalog,
                psp_call=lambda: 0.0,
                hb_delay=lambda: 0.0,
                hb_loss=np.random.default_rng(i),
            )

            spare = self.spare_jobs[i] if i < len(self.spare_jobs) else None

            def cycle():
                if spare is not None:
                    spec = self.catalog[spare]
                    payload = payload_json(spec.event_id, spec.amount_cents)
                    db.execute(
                        "insert_job", {"id": spare, "event_id": spec.event_id, "payload": payload}
                    )
                lease = driver.play(steps.claim(), db)
                if lease is not None:
                    driver.play(steps.renew(lease), db)
                    driver.play(steps.complete(lease, self.catalog[lease.job]), db)

        played, began = 0, 0.0
        try:
            pace = self.pace[role]
            while not self._stop.is_set() and time.monotonic() < self._deadline:
                if played > WARM_UP:
                    self._stop.wait(max(0.0, began + pace - time.monotonic()))
                began = time.monotonic()
                timings.on = played >= WARM_UP
                db.begin_cycle()
                try:
                    cycle()
                except (StatementError, DbUnavailable, KeyError):
                    pass  # a lock wait cut off, a refusal, a queue's own id: the rollback ends it
                finally:
                    db.end_cycle()
                played += 1
                self._cycles[k] = max(0, played - WARM_UP)
        except Exception as exc:  # noqa: BLE001 - handed to the runner's thread by stop()
            self.errors.append(exc)
        finally:
            db.close()


def medians(latencies: dict[str, np.ndarray]) -> tuple[dict[str, float], dict[str, int]]:
    """Each statement's median wall latency and how many runs of it were timed."""
    timed = {name: values for name, values in latencies.items() if len(values)}
    return (
        {name: float(np.median(values)) for name, values in timed.items()},
        {name: len(values) for name, values in timed.items()},
    )
