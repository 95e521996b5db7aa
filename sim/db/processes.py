"""The server processes of PostgresBackend's clients, seen from this machine (Linux /proc): may we
pause one (it is a local postgres process of ours), is it stopped, is it asleep in its lock wait.

PostgresBackend pauses lock waiters with SIGSTOP so that PostgreSQL wakes them in the order the
simulation chose (see sim.db.postgres); these are the checks that make that safe.
"""

from __future__ import annotations

import os
import platform
import signal
import socket
import struct
import sys

import psycopg

_CLIENT_ADDRESS = "SELECT host(inet_client_addr()), inet_client_port()"


def may_signal(conn: psycopg.Connection, pid: int) -> bool:
    """Is `pid`, the server process of `conn`, a process on this machine that we may pause?

    Proven by the socket itself: over a Unix socket the kernel names the peer that accepted the
    connection, the postmaster, which must be the parent of `pid`; over TCP the server must see
    our very address and port, and `pid` must be a postgres process. Set LEASELAB_PAUSE_WAITERS=0
    to never pause.
    """
    if (
        not hasattr(signal, "SIGSTOP")
        or not sys.platform.startswith("linux")
        or not _EPOLL_SYSCALLS
        or os.environ.get("LEASELAB_PAUSE_WAITERS", "1") == "0"
    ):
        return False
    try:
        sock = socket.socket(fileno=os.dup(conn.pgconn.socket))
        try:
            if sock.family == socket.AF_UNIX:
                creds = sock.getsockopt(
                    socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")
                )
                local = struct.unpack("3i", creds)[0] == _parent(pid) and _is_postgres(pid)
            else:
                address, port = sock.getsockname()[:2]
                seen = conn.execute(_CLIENT_ADDRESS).fetchone()
                local = seen == (address, port) and _is_postgres(pid)
        finally:
            sock.close()  # our duplicate of the descriptor
        if local:
            os.kill(pid, 0)
        return local
    except (OSError, psycopg.Error):
        return False


def _proc(pid: int, name: str) -> str:
    with open(f"/proc/{pid}/{name}", encoding="ascii", errors="replace") as f:
        return f.read()


_EPOLL_SYSCALLS = {"x86_64": {"232", "281", "441"}, "aarch64": {"22", "441"}}.get(
    platform.machine(), set()
)


def asleep_in_epoll(pid: int) -> bool:
    """Was the (stopped) process blocked in epoll_wait, i.e. in PostgreSQL's WaitLatch?"""
    try:
        return _proc(pid, "syscall").split(maxsplit=1)[0] in _EPOLL_SYSCALLS
    except (OSError, IndexError):
        return False


def process_state(pid: int) -> str:
    """The process state letter (R, S, T, ...), or '' if it is gone."""
    try:
        return _proc(pid, "stat").rpartition(")")[2].split()[0]
    except (OSError, IndexError):
        return ""


def _is_postgres(pid: int) -> bool:
    return _proc(pid, "comm").strip() == "postgres"


def _parent(pid: int) -> int:
    for line in _proc(pid, "status").splitlines():
        if line.startswith("PPid:"):
            return int(line.split()[1])
    return -1
