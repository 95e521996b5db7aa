"""A live run's child processes (`python -m sim.live_mode.process`): the producer, the watcher and
each worker with a spare started and waiting, so that a restart does not wait for an import. The
runner spawns them here, hands them one start instant, replaces a worker's process by its spare
and kills them all at the end."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import IO, TYPE_CHECKING

import sim as sim_package
from sim.live_mode.process import command
from sim.scenario.settings import Scenario, dumps

if TYPE_CHECKING:
    from sim.db.postgres import PostgresBackend


class LiveError(RuntimeError):
    """A live run could not go on (a child process failed); the message says which and why."""


class ChildProcess(subprocess.Popen[bytes]):
    """A live child: its stdin and stdout are pipes to the runner, its stderr goes to a file."""

    stdin: IO[bytes]
    stdout: IO[bytes]

    def __init__(self, argv: list[str], stderr_path: Path):
        with open(stderr_path, "wb") as stderr:
            super().__init__(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr)
        self.stderr_path = stderr_path


class Child:
    """One role's process (for a worker: the one running now, and its spare, started and
    waiting)."""

    def __init__(self, name: str, role: str, proc: ChildProcess, index: int | None = None):
        self.name, self.role, self.proc, self.index = name, role, proc, index
        self.spare: ChildProcess | None = None
        self.incarnation = 0
        self.restarting = False  # killed; its next process waits for the restart time
        self.stopping: float | None = None  # asked to shut down gracefully at this monotonic()

    @property
    def worker(self) -> int:
        """A worker's index (the other roles have none)."""
        assert self.index is not None, f"{self.name} is not a worker"
        return self.index


class Children:
    """Every child of one live run by name (producer, w0, w1, ..., watcher)."""

    def __init__(
        self,
        scenario: Scenario,
        backend: PostgresBackend,
        folder: Path,
        scale: float,
        sql_dir: str | None,
    ):
        self.scenario, self.backend, self.folder = scenario, backend, folder
        self.scale, self.sql_dir = scale, sql_dir
        self.by_name: dict[str, Child] = {}
        self._spawned = 0

    def values(self) -> list[Child]:
        return list(self.by_name.values())

    def spawn(self, name: str, role: str, index: int | None = None) -> ChildProcess:
        """Start a child: it imports, connects, says `ready` and waits for its start line."""
        self._spawned += 1
        config = {
            "name": name,
            "role": role,
            "index": index,
            "spare": self._spawned,
            "dsn": self.backend.client_dsn,  # the run's role for a queue's SQL (db/queue/sandbox)
            "schema": self.backend.schema,
            "folder": str(self.folder / "records"),
            "slots": str(self.folder / "slots"),
            "scale": self.scale,
            "scenario": dumps(self.scenario),
            "sql_dir": self.sql_dir,
        }
        proc = ChildProcess(
            command(sys.executable, str(Path(sim_package.__file__).parent)),
            self.folder / f"{name}-{self._spawned}.stderr",
        )
        proc.stdin.write((json.dumps(config) + "\n").encode())
        proc.stdin.flush()
        return proc

    def add(self, name: str, role: str, index: int | None = None) -> Child:
        self.by_name[name] = Child(name, role, self.spawn(name, role, index), index)
        return self.by_name[name]

    @staticmethod
    def start(proc: ChildProcess, t0: float, incarnation: int = 0, start_at: float = 0.0) -> None:
        try:
            proc.stdin.write(
                (
                    json.dumps({"t0": t0, "incarnation": incarnation, "start_at": start_at}) + "\n"
                ).encode()
            )
            proc.stdin.close()
        except BrokenPipeError:
            pass  # it died while starting: the fault player's watch reports it

    @staticmethod
    def await_ready(name: str, proc: ChildProcess) -> None:
        line = proc.stdout.readline()
        proc.stdout.close()
        if line.strip() != b"ready":
            proc.wait()
            raise LiveError(f"live {name} process failed to start: {last_line(proc.stderr_path)}")

    def worker(self, i: int) -> Child:
        return self.by_name[f"w{i}"]

    def up(self, i: int) -> bool:
        child = self.worker(i)
        return child.proc.poll() is None and not child.restarting and child.stopping is None

    def replenish(self) -> None:
        """A spare for each worker whose spare went into service (started outside the fault
        actions)."""
        for child in self.by_name.values():
            if child.role == "worker" and child.spare is None:
                child.spare = self.spawn(child.name, "worker", child.index)

    def kill_all(self) -> None:
        procs = [c.proc for c in self.by_name.values()] + [
            c.spare for c in self.by_name.values() if c.spare
        ]
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
        for proc in procs:
            proc.wait()
            for stream in (proc.stdin, proc.stdout):
                if stream is not None and not stream.closed:
                    try:
                        stream.close()
                    except BrokenPipeError:
                        pass


def last_line(path: Path) -> str:
    """The last line a child wrote to its stderr file (its one-line account of why it ended)."""
    text = path.read_text(errors="replace").strip() if path.exists() else ""
    return text.splitlines()[-1] if text else "no message"
