"""A live worker process's life cycle; what it sends and records is sim.protocol's, as the model's.

It claims and handles jobs on one connection and renews its lease on a thread of its own with
another, with real sleeps on the shared clock (its own clock offset bound into its statements,
policy.clock = worker). Faults come from outside: the runner SIGKILLs it (crash), SIGSTOPs and
SIGCONTs it (a stop-the-world pause: every thread stops), SIGTERMs it (a graceful shutdown:
it records the shutdown, ends its connections' transactions and releases its job on a fresh
connection before it exits), and writes a partition's end into its slot (its connections
drop). Heartbeat loss and delay, and whether a crash point fires, it draws itself.

With a worker-side deadline (pg-boss's expireIn) the job's handler runs on a thread of its own:
at the deadline the worker fails the job for a retry on a fresh connection and takes the next,
the handler running on with its own connection to its end (a pause holds the deadline too), its
late result dropped or completed, or cancelled first (policy.deadline_action).
"""

from __future__ import annotations

import os
import signal
import threading

import psycopg

from sim.db.errors import StatementError
from sim.live_mode.connection import CRASH_POINT_EXIT, SHUTDOWN_EXIT, LiveConnection
from sim.live_mode.driver import HandlerCancelled, LiveDriver
from sim.live_mode.plan import job_plan, stream_name
from sim.model.faults import CrashPoints, clock_offset
from sim.protocol import Lease, WorkerProtocol
from sim.protocol.streams import worker_phase, worker_streams
from sim.support.rng import Streams


class LiveLease(Lease):
    """A lease whose holder the runner sees in the shared slots, and whose end wakes the
    heartbeat thread at once."""

    __slots__ = ("finished", "slots", "index")

    def __init__(self, job: int, attempt: int, until: float, slots, index: int):
        super().__init__(job, attempt, until)
        self.finished = threading.Event()
        self.slots, self.index = slots, index

    def finish(self) -> None:
        super().finish()
        self.finished.set()

    def extend(self, until: float) -> None:
        super().extend(until)
        self.slots.renew(self.index, self.job, until)


class SharedCrashPoints(CrashPoints):
    """Crash points whose run-wide limit every worker process shares: each crash takes one of
    the point's `limit` tokens, a file created exclusively in the run's folder. The probability
    is drawn from the worker's own stream (the simulation draws from one run-wide stream)."""

    def __init__(self, configs, rng, folder: str):
        super().__init__(configs, rng)
        self.folder = folder

    def spent(self, point: str) -> int:
        return sum(os.path.exists(self._token(point, k)) for k in range(self.configs[point].limit))

    def spend(self, point: str, limit: int) -> bool:
        os.makedirs(self.folder, exist_ok=True)
        for k in range(limit):
            try:
                os.close(os.open(self._token(point, k), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            except FileExistsError:
                continue
            return True
        return False  # another process took the last one meanwhile

    def _token(self, point: str, k: int) -> str:
        return os.path.join(self.folder, f"{point}-{k}")


class LiveWorker:
    def __init__(self, scenario, index: int, *, slots, dsn, schema, queries, clock, recorder):
        self.scenario, self.policy = scenario, scenario.policy
        self.index = index
        self.name = f"w{index}"
        self.clock, self.recorder, self.slots = clock, recorder, slots
        self.dsn, self.schema, self.queries = dsn, schema, queries
        _, self.catalog = job_plan(scenario)
        self.connection = {
            "slots": slots,
            "index": index,
            "partition_mode": scenario.faults.partition_mode,
            "skew": clock_offset(scenario, index, Streams(scenario.seed)),
        }
        self.connections: list[LiveConnection] = []  # every one it opened (a shutdown ends them)
        self.db = self._connect(self.name)
        self.hb_db = self._connect(f"{self.name}/hb")
        folder = os.path.dirname(recorder.path)
        self.psp_dir = os.path.join(folder, "psp-keys")
        self.crash_points_dir = os.path.join(folder, "crash-points")
        self.lease: LiveLease | None = None  # the job it holds (not one past its deadline)

    def _connect(self, client: str) -> LiveConnection:
        db = LiveConnection(
            self.dsn,
            self.schema,
            client,
            self.queries,
            self.clock,
            self.recorder,
            **self.connection,
        )
        self.connections.append(db)
        return db

    def _streams(self, incarnation: int) -> None:
        """This process's random sources: the model's streams for the first process, fresh ones
        after a restart."""
        streams = Streams(self.scenario.seed)

        def stream(base: str):
            return streams.generator(stream_name(base, incarnation))

        i, faults = self.index, self.scenario.faults
        self.phase = worker_phase(self.policy, i, stream) if incarnation == 0 else 0.0
        self.steps = WorkerProtocol(
            self.name,
            self.scenario,
            self.catalog,
            **worker_streams(self.scenario, i, stream),
            lease=lambda job, attempt, until: LiveLease(job, attempt, until, self.slots, i),
        )
        points = None
        if faults.crash_points:
            shared = SharedCrashPoints(
                faults.crash_points, stream(f"worker/{i}/crash-points"), self.crash_points_dir
            )
            points = self._crash_point_of(shared)
        self.driver = LiveDriver(self.clock, self.recorder, self.psp_dir, points)

    def prepare(self) -> None:
        self.db.open()
        self.hb_db.open()

    # ---- life cycle ---------------------------------------------------------------------------

    def lifecycle(self, incarnation: int = 0, start_at: float = 0.0) -> None:
        """Poll, claim and handle jobs until the runner stops this process; a restarted
        incarnation first waits for its restart time and logs it."""
        self._streams(incarnation)
        if self.scenario.faults.shutdown == "graceful":
            signal.signal(signal.SIGTERM, self._shutdown)
        clock, steps = self.clock, self.steps
        if incarnation:
            clock.sleep_until(start_at)
            self.recorder.add(clock.now(), "restart", self.name)
        clock.sleep(self.phase)
        while True:
            lease = self.driver.play(steps.poll(), self.db)
            if lease is None:
                continue
            # recorded by the protocol first, then told to the runner: a worker the runner sees
            # holding a job has its claim on record
            self.lease = lease
            self.slots.hold(self.index, lease.job, lease.attempt, lease.until)
            if self.policy.heartbeat:
                threading.Thread(target=self._heartbeat, args=(lease,), daemon=True).start()
            if self.policy.deadline:
                self._handle_within_deadline(lease)
            else:
                self.driver.play(steps.handle(lease), self.db)
                lease.finish()
            self.lease = None
            self.slots.release(self.index)

    def _heartbeat(self, lease: LiveLease) -> None:
        """Thread: renew the lease every heartbeat_interval until the job is done or the lease
        lost."""
        wait = self.clock.wall(self.policy.heartbeat_interval)
        while not lease.finished.wait(wait):
            try:
                if not self.driver.play(self.steps.renew(lease), self.hb_db):
                    return
            except StatementError:
                continue  # the server refused this beat: try again at the next

    # ---- worker-side deadline -----------------------------------------------------------------

    def _handle_within_deadline(self, lease: LiveLease) -> None:
        """Run the handler on a thread; at the deadline fail the job for a retry on a fresh
        connection and move on, the handler keeping its own connection until it ends (its late
        result dropped or completed), or cancelled first (deadline_action = cancel: its steps stop
        and its server backend is ended, so its open transaction rolls back)."""
        db, done, orphaned = self.db, threading.Event(), threading.Event()
        cancelled = threading.Event() if self.policy.deadline_action == "cancel" else None

        def handler() -> None:
            try:
                self.driver.play(self.steps.handle(lease), db, cancelled)
            except HandlerCancelled:
                pass
            finally:
                lease.finish()
                done.set()
                if orphaned.is_set():  # past its deadline: nobody else uses its connection
                    db.close()
                    self.connections.remove(db)

        threading.Thread(target=handler, daemon=True).start()
        if done.wait(self.clock.wall(self.policy.deadline)):
            return
        lease.past_deadline = True
        orphaned.set()
        if done.is_set():  # it ended in the same instant (and may not have seen `orphaned`)
            return
        self.lease = None
        self.slots.release(self.index)
        self.db = self._connect(f"{self.name}/{len(self.connections)}")
        if cancelled is not None:
            cancelled.set()
            if db.pid is not None:
                self.db.terminate([db.pid])
        self.driver.play(self.steps.fail_at_deadline(lease), self.db)

    # ---- deaths of its own --------------------------------------------------------------------

    def _crash_point_of(self, points: SharedCrashPoints):
        """The driver's crash-point callback: when the point fires, log the crash with the job
        the worker holds (as the runner logs a kill) and end the process at once."""

        def reached(point: str) -> None:
            if points.fires(point):
                held = self.slots.held(self.index)
                self.recorder.add(self.clock.now(), "crash", self.name, *(held or ()))
                os._exit(CRASH_POINT_EXIT)

        return reached

    def _shutdown(self, _signum, _frame) -> None:
        """SIGTERM with faults.shutdown = graceful: log the shutdown with the job held, end this
        process's transactions (its server backends end: they roll back), release the job on a
        fresh connection (fenced), and exit. Other threads' records are dropped from now on."""
        lease = self.lease
        recorder = self.recorder
        if lease is None:
            recorder.add(self.clock.now(), "shutdown", self.name)
        else:
            lease.finish()
            recorder.add(
                self.clock.now(), "shutdown", self.name, lease.job, lease.attempt, lease.until
            )
        recorder.muted = True
        try:
            pids = [db.pid for db in self.connections if db.pid is not None]
            releasing = LiveConnection(
                self.dsn,
                self.schema,
                f"{self.name}/release",
                self.queries,
                self.clock,
                type(recorder)(recorder.path, self.clock),
                **self.connection,
            )
            if pids:
                try:
                    releasing.terminate(pids)
                except psycopg.Error:
                    pass  # no server to reach: it ends them when their connections drop
            if lease is not None:
                LiveDriver(self.clock, releasing.recorder).play(
                    self.steps.release(lease), releasing
                )
        finally:
            os._exit(SHUTDOWN_EXIT)
