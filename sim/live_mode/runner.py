"""sim.live(): run a scenario with real worker processes, a watcher and a producer on real
PostgreSQL.

The runner creates the run's schema (through PostgresBackend: embedded server or a DSN), checks the
time scale against the measured statement latency, starts every child (sim.live_mode.children),
hands them one start instant t0, then plays the fault schedule as signals until the horizon
(sim.live_mode.fault_play). It then kills every child, waits until their server backends are gone
(PostgreSQL rolled back whatever they left open), reads the final tables and the per-process record
files, and returns a LiveRun: the same event log, metrics, plots and invariant checks as a simulated
run.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from sim.db import leftovers
from sim.db.inspect import final_tables
from sim.db.processes import process_state
from sim.errors import ConfigError
from sim.live_mode.budget import Measured, check_scale, watch
from sim.live_mode.children import Children, LiveError
from sim.live_mode.clock import LiveClock
from sim.live_mode.connection import APP_PREFIX, SandboxHit
from sim.live_mode.fault_play import FaultPlayer
from sim.live_mode.faults import FaultSchedule
from sim.live_mode.plan import job_plan
from sim.live_mode.probe import LoadedTableProbe, medians
from sim.live_mode.recorder import Recorder, event_log, read_records
from sim.live_mode.repair import repair
from sim.live_mode.result import LiveRun
from sim.live_mode.roles import queries_for
from sim.live_mode.slots import Slots
from sim.model.faults import clock_offset
from sim.runner import checked_queue
from sim.scenario.limits import (
    CONNECTIONS_PER_WORKER,
    MAX_LIVE_SECONDS,
    MAX_SECONDS,
    MAX_TIME_SCALE,
    MIN_TIME_SCALE,
    statement_timeout,
    statement_timeout_words,
)
from sim.scenario.settings import Scenario, prepared
from sim.support.interrupts import terminate_like_interrupt
from sim.support.rng import Streams

TICK_S = 0.02  # wall seconds between two looks at the children
BACKENDS_GONE_S = 10.0
IN_FLIGHT_S = 1.0  # a statement still running this long at the end leaves the run inconclusive
REPLACEMENT_SAMPLES = 2  # replacement worker starts timed before the run (one after the other)


class LiveRunner:
    """One live run: its schema, its children (sim.live_mode.children), the time-scale guard, the
    fault schedule played on them (sim.live_mode.fault_play) and the LiveRun read back."""

    def __init__(
        self,
        scenario: Scenario,
        *,
        duration: float,
        time_scale: float = 1.0,
        dsn: str | None = None,
        folder: str | Path | None = None,
        sql_dir: str | None = None,
    ):
        check_timing(duration, time_scale)
        self.scenario = scenario.replace(horizon=duration / time_scale, backend="postgres")
        check_played(self.scenario)
        self.scale = time_scale
        self.dsn = dsn
        self.queue = None
        if sql_dir is not None:  # checked on the server before anything runs, as sim.run does
            self.queue, self.dsn = checked_queue(sql_dir, dsn, [self.scenario])
        self.sql_dir = None if self.queue is None else str(self.queue.path.resolve())
        self._own_folder = folder is None
        if folder is None:
            self.folder = Path(tempfile.mkdtemp(prefix=leftovers.LIVE_FOLDER_PREFIX))
            leftovers.mark_folder(self.folder)  # a runner killed with SIGKILL: the next removes it
        else:
            self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.lag: list[float] = []  # wall seconds late, per fault action
        self.measured: Measured | None = None
        self._next_watch = 0.0  # monotonic() of the next look at the user's statements

    # ---- children -----------------------------------------------------------------------------

    def _start_all(self) -> float:
        """Start every child; measure the loaded table and a replacement's start (refusing a
        scale they make unsound) before the spares are all started; the shared start t0."""
        policy, children = self.scenario.policy, self.children
        children.add("producer", "producer")
        for i in range(policy.workers):
            children.add(f"w{i}", "worker", i)
        if policy.watcher:
            children.add("watcher", "watcher")
        for child in children.values():  # the producer has loaded the t = 0 jobs then
            children.await_ready(child.name, child.proc)
        self.measured = self._measure()
        waiting = []
        for child in children.values():
            if child.role == "worker" and child.spare is None:
                child.spare = children.spawn(child.name, "worker", child.index)
                waiting.append((child.name, child.spare))
        for name, spare in waiting:
            children.await_ready(name, spare)
        t0 = time.monotonic() + 0.05
        for child in children.values():
            children.start(child.proc, t0)
        return t0

    def _measure(self) -> Measured:
        """The time-scale guard's figures (sim.live_mode.budget): the statements on the loaded table
        at the run's concurrency, with replacement workers started and timed one after the other
        meanwhile. ConfigError when they make the scale unsound."""
        arrivals, catalog = job_plan(self.scenario)
        probe = LoadedTableProbe(
            self.scenario,
            catalog,
            dsn=self.backend.client_dsn,
            schema=self.backend.schema,
            queries=queries_for({"sql_dir": self.sql_dir}),
            scale=self.scale,
            spare_jobs=tuple(job for t, job, _ in arrivals if t > 0.0),
        )
        workers = [c for c in self.children.values() if c.role == "worker"]
        starts = []
        probe.start()
        try:
            for child in workers[:REPLACEMENT_SAMPLES]:
                began = time.monotonic()
                child.spare = self.children.spawn(child.name, "worker", child.index)
                self.children.await_ready(child.name, child.spare)
                starts.append(time.monotonic() - began)
        finally:
            try:
                latencies = probe.stop()
            except SandboxHit as exc:  # a probe statement hit the sandbox: where it comes from
                raise SandboxHit(self._located(str(exc))) from None
        statements, samples = medians(latencies)
        measured = Measured(
            statements,
            samples,
            clients=probe.clients,
            jobs=sum(1 for t, _, _ in arrivals if t <= 0.0),
            replacement_start=float(np.median(starts)) if starts else float("nan"),
            replacements=len(starts),
        )
        check_scale(self.scenario, self.scale, measured)
        return measured

    # ---- while it runs ------------------------------------------------------------------------

    def _located(self, line: str) -> str:
        """A child's one-line account of a statement that hit the sandbox, with where the
        statement comes from (file:line of the queue)."""
        name = line.partition(":")[0]
        if self.queue is not None and name in self.queue.queries:
            return f"{self.queue.where(name)}: {line}"
        return line

    def _watch_statements(self) -> None:
        """A statement of the user's SQL running past the time limit (its own timeout turned off
        with set_config, which the server then cannot enforce): end it and stop the run."""
        now = time.monotonic()
        if self.queue is None or now < self._next_watch:
            return
        self._next_watch = now + 1.0
        limit = statement_timeout()
        rows = self.backend.admin(
            "SELECT pid, application_name, query FROM pg_stat_activity WHERE application_name "
            "LIKE %s AND state = 'active' AND now() - query_start > %s * interval '1 second'",
            (f"{APP_PREFIX}{self.backend.schema}:%", limit + 2.0),
        )
        if rows:
            self.backend.admin(
                "SELECT pg_terminate_backend(pid) FROM unnest(%s::int[]) AS t(pid)",
                ([pid for pid, _, _ in rows],),
            )
            pid, app, query = rows[0]
            raise LiveError(
                f"live {app.rpartition(':')[2]}: a statement ran past "
                f"{statement_timeout_words()} and was ended: {' '.join(query.split())[:120]}"
            )

    def _play(self, schedule: FaultSchedule) -> None:
        horizon = self.scenario.horizon
        end = self.clock.monotonic_at(horizon)
        while True:
            t_next = min(schedule.next_time(), horizon)
            due = self.clock.monotonic_at(t_next)
            while (now := time.monotonic()) < due:
                self.player.watch_children()
                self._watch_statements()
                if due - now > TICK_S:
                    self.children.replenish()
                time.sleep(min(TICK_S, max(due - time.monotonic(), 0.0)))
            if t_next >= horizon:
                return
            self.lag.append(time.monotonic() - due)
            self.player.act(schedule.pop())
            if time.monotonic() >= end:
                return

    # ---- the run ------------------------------------------------------------------------------

    def run(self) -> LiveRun:
        """Play the run; a failed run leaves no temporary folder behind (a folder given is kept).
        SIGTERM stops it like Ctrl-C, cleaning up all the same."""
        try:
            with terminate_like_interrupt():
                return self._run()
        except BaseException:
            if self._own_folder:
                shutil.rmtree(self.folder, ignore_errors=True)
            raise

    def _run(self) -> LiveRun:
        from sim.db.postgres import PostgresBackend

        (self.folder / "records").mkdir(exist_ok=True)
        self.backend = PostgresBackend(self.dsn, queue=self.queue)
        if self.backend.guard is not None:  # the producer, another process, inserts the jobs
            self.backend.guard.expected = self.scenario.workload.jobs
        # run.json: what a crashed runner leaves to clean up (the next start does: sim.db.leftovers)
        (self.folder / "run.json").write_text(
            json.dumps(
                {
                    "schema": self.backend.schema,
                    "scenario": self.scenario.name,
                    "horizon": self.scenario.horizon,
                    "time_scale": self.scale,
                }
            ),
            encoding="utf-8",
        )
        wall_start = time.monotonic()
        self._next_watch = 0.0
        try:
            check_connections(self.backend, self.scenario)
            self.children = Children(
                self.scenario, self.backend, self.folder, self.scale, self.sql_dir
            )
            self.slots = Slots(self.folder / "slots", self.scenario.policy.workers, create=True)
            schedule = FaultSchedule(self.scenario)
            try:
                t0 = self._start_all()
                self.clock = LiveClock(t0, self.scale)
                # made once every child is ready: a killed runner's folder shows how far it got
                self.recorder = Recorder(self.folder / "records" / "runner.jsonl", self.clock)
                self.player = FaultPlayer(
                    self.scenario,
                    self.children,
                    schedule,
                    self.slots,
                    self.recorder,
                    self.clock,
                    self._located,
                )
                time.sleep(max(0.0, t0 - time.monotonic()))
                self._play(schedule)
                self.in_flight = in_flight(self.backend, self.queue)
            finally:
                self.children.kill_all()
                self.slots.close()
            self.recorder.close()
            self._await_backends_gone()
            tables = final_tables(self.backend)
        finally:
            self.backend.close()
        return self._result(tables, time.monotonic() - wall_start)

    def _await_backends_gone(self) -> None:
        """Every killed child's server backend has ended (and rolled back what it left open)."""
        deadline = time.monotonic() + BACKENDS_GONE_S
        while time.monotonic() < deadline:
            if not server_backends(self.backend, self.backend.schema):
                return
            time.sleep(0.02)
        raise LiveError(f"server backends of the live run still alive after {BACKENDS_GONE_S:g} s")

    def _result(self, tables: dict, wall: float) -> LiveRun:
        records, statements = read_records(self.folder / "records")
        records, repaired = repair(records, tables)
        horizon = self.scenario.horizon
        during = [s for s in statements if 0.0 <= s[0] <= horizon]  # not the producer's loading
        counts = pd.Series([name for _, name, _ in statements], dtype=object).value_counts()
        lags = restart_lags(self.player.planned_restarts, records)
        workers, streams = self.scenario.policy.workers, Streams(self.scenario.seed)
        run = LiveRun(
            self.scenario,
            event_log(records),
            {str(k): int(v) for k, v in counts.to_dict().items()},
            tables,
            {f"w{i}": clock_offset(self.scenario, i, streams) for i in range(workers)},
            wall,
            "live",
            queue=None if self.queue is None else str(self.queue.path),
            time_scale=self.scale,
            statement_seconds=pd.DataFrame(during, columns=["t", "name", "seconds"]),
            runner_lag=np.asarray(self.lag),
            restart_lags=lags,
            guard=self.measured,
            unsound=watch(self.scenario, self.scale, during, lags, self.lag),
            repaired=repaired,
            incidents=list(self.player.incidents),
            folder=str(self.folder),
            inconclusive=list(getattr(self, "in_flight", [])),
        )
        if self._own_folder:
            shutil.rmtree(self.folder, ignore_errors=True)
            run.folder = ""
        return run


def restart_lags(planned: list[tuple[str, float]], records: list[list]) -> np.ndarray:
    """Scenario seconds each worker's restart came after its planned time (the k-th restart
    record of a worker answers its k-th planned restart; one the run ended first has none)."""
    due: dict[str, list[float]] = {}
    for worker, t in planned:
        due.setdefault(worker, []).append(t)
    came: dict[str, list[float]] = {}
    for t, kind, worker, *_ in records:
        if kind == "restart":
            came.setdefault(worker, []).append(t)
    return np.asarray(
        [
            actual - plan
            for worker, plans in due.items()
            for plan, actual in zip(plans, came.get(worker, []), strict=False)
        ],
        dtype=float,
    )


def check_timing(duration, time_scale) -> None:
    """ConfigError naming --duration or --time-scale outside what live mode can play."""

    def number(value) -> bool:
        return isinstance(value, int | float) and not isinstance(value, bool) and np.isfinite(value)

    if not (number(duration) and 0 < duration <= MAX_LIVE_SECONDS):
        raise ConfigError(
            f"--duration: must be a number of wall seconds > 0 and at most {MAX_LIVE_SECONDS:g} "
            f"(a week), got {duration!r}"
        )
    if not (number(time_scale) and MIN_TIME_SCALE <= time_scale <= MAX_TIME_SCALE):
        raise ConfigError(
            f"--time-scale: must be a number of wall seconds per scenario second from "
            f"{MIN_TIME_SCALE:g} to {MAX_TIME_SCALE:g}, got {time_scale!r}"
        )
    if duration / time_scale > MAX_SECONDS:
        raise ConfigError(
            f"--duration {duration:g} / --time-scale {time_scale:g} = {duration / time_scale:.3g} "
            f"scenario seconds; a horizon is at most {MAX_SECONDS:g} s"
        )


# settings of issue #25 that only the simulation plays yet: (key, is it set?, what to set)
_MODEL_ONLY = (
    ("policy.prefetch", lambda p, f: p.prefetch != 1, "1"),
    ("policy.rescue", lambda p, f: p.rescue != "watcher", "watcher"),
    ("policy.process_heartbeat_interval", lambda p, f: p.process_heartbeat_interval, "0"),
    ("faults.release_loss", lambda p, f: f.release_loss, "0"),
    ("faults.clock_drift_ppm", lambda p, f: f.clock_drift_ppm, "0"),
    ("faults.clock_steps", lambda p, f: f.clock_steps, "[]"),
    ("faults.db_clock_steps", lambda p, f: f.db_clock_steps, "[]"),
    ("faults.db_stalls", lambda p, f: f.db_stalls, "[]"),  # issue 33's explicit schedules
    ("faults.heartbeat_faults", lambda p, f: f.heartbeat_faults, "[]"),
)


def check_played(scenario) -> None:
    """ConfigError naming the first setting live mode does not play yet (the simulation does)."""
    p, f = scenario.policy, scenario.faults
    if scenario.pinned is not None:
        raise ConfigError("pinned: not played in live mode (the simulation's draws); remove it")
    for key, is_set, off in _MODEL_ONLY:
        if is_set(p, f):
            raise ConfigError(
                f"{key}: not played in live mode yet (the simulation models it); set it to {off}"
            )


def check_connections(backend, scenario) -> None:
    """ConfigError naming policy.workers when the server cannot take the connections live mode
    opens (each worker and its spare hold a statement and a heartbeat connection; with a
    deadline, a handler past it keeps one more; before the run one probe client per worker)."""
    workers = scenario.policy.workers
    per_worker = CONNECTIONS_PER_WORKER + (1 if scenario.policy.deadline else 0)
    probing = 2 * workers + workers + 1 + 2 * min(REPLACEMENT_SAMPLES, workers)
    needed = max(workers * per_worker, probing) + 4  # producer, watcher, runner, inspector
    [(total, reserved, used)] = backend.admin(
        "SELECT current_setting('max_connections')::int, "
        "current_setting('superuser_reserved_connections')::int, "
        "(SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend')"
    )
    free = total - reserved - used
    if needed > free:
        raise ConfigError(
            f"policy.workers = {workers}: live mode opens about {needed} connections "
            f"({per_worker} per worker with its spare, and 4 more), but the server at "
            f"{backend_place(backend)} has {max(free, 0)} free (max_connections {total}, "
            f"{reserved} reserved, {used} in use); use at most "
            f"{max(0, (free - 4) // per_worker)} workers or raise max_connections"
        )


def backend_place(backend) -> str:
    from sim.db.server import describe_dsn

    return describe_dsn(backend.dsn)


def server_backends(backend, schema: str) -> list[tuple[int, str]]:
    """(pid, state letter when local, '' otherwise) of the server backends of a live run's clients
    still connected."""
    rows = backend.admin(
        "SELECT pid FROM pg_stat_activity WHERE application_name LIKE %s AND pid <> "
        "pg_backend_pid()",
        (f"{APP_PREFIX}{schema}:%",),
    )
    return [(pid, process_state(pid)) for (pid,) in rows]


def in_flight(backend, queue) -> list[str]:
    """The statements of the run's clients still running, each for IN_FLIGHT_S or more, as the
    run ends: what they would have done is unknown, so the run is inconclusive. One phrase each
    (client, how long, the statement's file:line for a queue's own)."""
    rows = backend.admin(
        "SELECT application_name, extract(epoch FROM now() - query_start), query "
        "FROM pg_stat_activity WHERE application_name LIKE %s AND state = 'active' "
        "AND now() - query_start > %s * interval '1 second' ORDER BY query_start",
        (f"{APP_PREFIX}{backend.schema}:%", IN_FLIGHT_S),
    )
    found = []
    for app, seconds, query in rows:
        text = " ".join((query or "").split())[:80]
        found.append(
            f"{app.rpartition(':')[2]}'s statement had run {float(seconds):.1f} s and was still "
            f"running at the end ({text}{'' if queue is None else ', ' + str(queue.path)})"
        )
    return found


def live(
    scenario: Scenario | str,
    *,
    duration: float,
    time_scale: float = 1.0,
    dsn: str | None = None,
    seed: int | None = None,
    folder: str | Path | None = None,
    sql=None,
    **overrides,
) -> LiveRun:
    """Run `scenario` live for `duration` wall seconds (the horizon is duration / time_scale
    scenario seconds). `sql`: a queue directory whose statements replace Lease Lab's (as
    sim.run(sql=...)). Returns a LiveRun: r.summary, r.recoveries, sim.check(r), plots, as for
    sim.run."""
    if folder is not None and not isinstance(folder, str | os.PathLike):
        raise ConfigError(
            f"folder: expected a directory path for the run's records, got "
            f"{type(folder).__name__} {folder!r:.60}"
        )
    if sql is not None:
        from sim.db.queue.directory import loaded

        sql = loaded(sql)
    scenario, sql = prepared(scenario, overrides, seed, queue=sql)
    return LiveRunner(
        scenario, duration=duration, time_scale=time_scale, dsn=dsn, folder=folder, sql_dir=sql
    ).run()
