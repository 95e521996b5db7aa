"""Where results are written, checked before anything runs: a save() never writes into a directory
that already holds files, nor over a report, unless asked to (what the user had is never lost).

The command line names the option and its flag (`--out DIR: ... pass --force`); the API the path
and the argument (`DIR: ... pass overwrite=True`).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from sim.errors import ConfigError


def check_directory(
    path: str | Path, overwrite: bool = False, *, option: str = "", force: str = "overwrite=True"
) -> Path:
    """`path` as a Path if a save() may write there: missing, empty, or holding files and
    `overwrite`; else ConfigError, naming it as `option` (e.g. "--out") and the way out as
    `force`."""
    path = Path(path)
    name = f"{option} {path}" if option else str(path)
    if path.exists() and not path.is_dir():
        raise ConfigError(f"{name}: exists and is not a directory")
    if path.is_dir() and any(path.iterdir()) and not overwrite:
        raise ConfigError(
            f"{name}: directory is not empty; choose another or pass {force} to overwrite"
        )
    _writable(path, name)
    return path


def _writable(path: Path, name: str) -> None:
    """ConfigError unless a file can be made in `path` (or, missing, in its nearest existing
    parent, which must be a directory): asked of the file system itself, by making and removing
    an empty file, since permissions do not tell (a read-only mount, root, a full /proc)."""
    place = path
    while not place.exists():
        if place.parent == place:
            break
        place = place.parent
    if not place.is_dir():
        raise ConfigError(f"{name}: cannot be made: {place} is not a directory")
    try:
        fd, probe = tempfile.mkstemp(prefix=".leaselab-write-", dir=place)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise ConfigError(f"{name}: cannot write in {place} ({exc.strerror or exc})") from None


def directory(path: str | Path, overwrite: bool = False) -> Path:
    """The directory a save() writes into: checked (check_directory), then made if missing."""
    path = check_directory(path, overwrite)
    path.mkdir(parents=True, exist_ok=True)
    return path


def check_report(
    path: str | Path, overwrite: bool = False, *, option: str = "", force: str = "overwrite=True"
) -> Path:
    """`path` as a Path if an HTML report may be written there: a new .html file in a directory
    that exists, or an existing one and `overwrite`; else ConfigError (named as in
    check_directory)."""
    path = Path(path)
    name = f"{option} {path}" if option else str(path)
    if path.suffix.lower() not in (".html", ".htm"):
        raise ConfigError(f"{name}: expected a file name ending in .html")
    if path.is_dir():
        raise ConfigError(f"{name}: is a directory; give a file name ending in .html")
    if path.exists() and not overwrite:
        raise ConfigError(f"{name}: exists; choose another name or pass {force} to overwrite")
    if not path.parent.is_dir():
        raise ConfigError(f"{name}: directory {path.parent} does not exist")
    _writable(path.parent, name)
    return path
