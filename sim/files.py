"""Where results are written, checked before anything runs: a save() never writes into a directory
that already holds files, nor over a report, unless asked to (what the user had is never lost).

The command line names the option and its flag (`--out DIR: ... pass --force`); the API the path
and the argument (`DIR: ... pass overwrite=True`).
"""

from __future__ import annotations

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
    return path


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
    return path
