"""The fault schedule of a live run played as signals to its children: a crash is SIGKILL (or,
with faults.shutdown = graceful, SIGTERM and a wait), a pause SIGSTOP/SIGCONT, a partition a mark
in the shared slots; a crashed worker's spare takes its place after the restart delay. Between
actions the player watches the children: one that died at a crash point, shut down or died on
its own is logged and restarted; any other death ends the run."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable

from sim.live_mode.children import Children, LiveError, last_line
from sim.live_mode.clock import LiveClock
from sim.live_mode.connection import CRASH_POINT_EXIT, FATAL_EXIT, SHUTDOWN_EXIT
from sim.live_mode.faults import FaultSchedule
from sim.live_mode.recorder import Recorder
from sim.live_mode.slots import Slots
from sim.scenario.settings import Scenario

STOP_GRACE_S = 10.0  # a graceful shutdown that takes longer ends in SIGKILL


class FaultPlayer:
    """Plays one run's schedule on its children; keeps the restarts it planned and the incidents
    (workers that died on their own, not killed by the schedule)."""

    def __init__(
        self,
        scenario: Scenario,
        children: Children,
        schedule: FaultSchedule,
        slots: Slots,
        recorder: Recorder,
        clock: LiveClock,
        located: Callable[[str], str],
    ):
        self.scenario, self.children, self.schedule = scenario, children, schedule
        self.slots, self.recorder, self.clock = slots, recorder, clock
        self.located = located  # a child's sandbox line with where its statement comes from
        self.planned_restarts: list[tuple[str, float]] = []  # (worker, when its restart is due)
        self.incidents: list[str] = []

    def crash(self, i: int) -> None:
        """Kill worker i (SIGKILL), or with faults.shutdown = graceful ask it to stop (SIGTERM):
        it then logs its shutdown, releases its job and exits (see watch_children)."""
        child = self.children.worker(i)
        if not self.children.up(i):
            return
        if self.scenario.faults.shutdown == "graceful":
            child.proc.send_signal(signal.SIGTERM)
            child.stopping = time.monotonic()
            return
        child.proc.send_signal(signal.SIGKILL)
        t = self.clock.now()
        child.proc.wait()
        self.crashed(i, t)

    def crashed(self, i: int, t: float, logged: bool = False) -> None:
        """Log the crash with what the worker held (unless the worker `logged` its own end);
        start its spare, due after the restart delay; a new spare."""
        child, schedule = self.children.worker(i), self.schedule
        held = self.slots.held(i)
        if logged:
            pass
        elif held is None:
            self.recorder.add(t, "crash", child.name)
        else:
            self.recorder.add(t, "crash", child.name, held[0], held[1], held[2])
        self.slots.release(i)
        restart_at = t + schedule.restart_delay[i]()
        self.planned_restarts.append((child.name, restart_at))
        child.incarnation += 1
        if (
            child.spare is None
        ):  # killed again before a new spare was started: start one now (it starts late)
            child.spare = self.children.spawn(child.name, "worker", i)
        child.proc, child.spare = child.spare, None
        self.children.start(child.proc, self.clock.t0, child.incarnation, restart_at)
        child.restarting = True
        schedule.push(restart_at, "restart", worker=i)

    def act(self, action) -> None:
        """Play one action of the schedule."""
        kind, i, schedule = action.kind, action.worker, self.schedule
        if kind == "crash":
            self.crash(i)
        elif kind == "crash_holder":
            holders = [
                j
                for j in range(self.scenario.policy.workers)
                if self.children.up(j) and self.slots.held(j)
            ]
            if holders:
                self.crash(holders[int(schedule.pick.integers(len(holders)))])
        elif kind == "crash_job":
            for j in range(self.scenario.policy.workers):
                held = self.slots.held(j)
                if self.children.up(j) and held and held[0] == action.job:
                    self.crash(j)
        elif kind == "restart":
            self.children.worker(i).restarting = False
        elif kind == "pause":
            child = self.children.worker(i)
            if child.proc.poll() is None:
                child.proc.send_signal(signal.SIGSTOP)
            self.recorder.add(
                action.t, "pause_start", child.name, None, None, action.until - action.t
            )
        elif kind == "unpause":
            child = self.children.worker(i)
            if child.proc.poll() is None:
                child.proc.send_signal(signal.SIGCONT)
            self.recorder.add(action.t, "pause_end", child.name)
        elif kind == "partition":
            self.slots.partition(i, action.until)
            self.recorder.add(
                action.t, "partition_start", f"w{i}", None, None, action.until - action.t
            )
        elif kind == "heal":
            self.recorder.add(action.t, "partition_end", f"w{i}")

    def watch_children(self) -> None:
        """A worker that died at a crash point or shut down gracefully is restarted (it logged
        that itself); one that died on its own is logged as crashed and restarted; a graceful
        shutdown that takes too long ends in a kill; any other child's death ends the run."""
        for child in self.children.values():
            code = child.proc.poll()
            if code is None:
                if child.stopping is not None and time.monotonic() > child.stopping + STOP_GRACE_S:
                    child.proc.send_signal(signal.SIGKILL)
                    child.proc.wait()
                    child.stopping = None
                    t = self.clock.now()
                    self.incidents.append(
                        f"{child.name} did not shut down within {STOP_GRACE_S:g} s: killed at "
                        f"{t:.3f}s"
                    )
                    self.crashed(child.worker, t)
                continue
            if child.role == "producer" and code == 0:
                continue
            if code == FATAL_EXIT:
                raise LiveError(self.located(last_line(child.proc.stderr_path)))
            if child.role == "worker" and code in (CRASH_POINT_EXIT, SHUTDOWN_EXIT):
                child.stopping = None
                self.crashed(child.worker, self.clock.now(), logged=True)
            elif child.role == "worker" and not child.restarting:
                t = self.clock.now()
                self.incidents.append(
                    f"{child.name} exited on its own at {t:.3f}s with code {code}: "
                    f"{last_line(child.proc.stderr_path)}"
                )
                self.crashed(child.worker, t)
            elif child.role != "worker" or code != -signal.SIGKILL:
                raise LiveError(
                    f"live {child.name} process exited with code {code}: "
                    f"{last_line(child.proc.stderr_path)}"
                )
