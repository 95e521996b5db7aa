"""Reading a file the user named: a regular file only (a FIFO would block for ever, /dev/zero never
ends), at most a stated size, and any OSError as one line naming the file."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from sim.errors import ConfigError

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a named pipe (FIFO)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def read_capped(path: str | os.PathLike, what: str, limit: int) -> bytes:
    """The bytes of `path` (a `what`, e.g. 'scenario TOML'); ConfigError in one line if it is not a
    regular file, is larger than `limit` bytes, or cannot be read."""
    path = Path(path)
    try:
        info = os.stat(path)
        kind = next((name for test, name in _KINDS if test(info.st_mode)), None)
        if kind is not None or not stat.S_ISREG(info.st_mode):
            raise ConfigError(
                f"{path}: is {kind or 'not a regular file'}; the {what} must be a regular file"
            )
        if info.st_size > limit:
            raise ConfigError(too_big(path, what, limit))
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):  # swapped since the stat
                raise ConfigError(f"{path}: not a regular file; the {what} must be one")
            data = f.read(limit + 1)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the {what} ({exc.strerror or exc})") from None
    if len(data) > limit:  # grew, or a /proc file whose size says 0
        raise ConfigError(too_big(path, what, limit))
    return data


def too_big(path, what: str, limit: int) -> str:
    return f"{path}: larger than {size_words(limit)}, the limit for a {what} file"


def size_words(n: int) -> str:
    """1048576 -> '1 MiB'."""
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:g} {unit}"
    return f"{n} bytes"
