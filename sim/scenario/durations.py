"""Observed job durations, read with suspicion: a user's CSV (or array) becomes seconds only when
its column, unit, delimiter and decimal mark are unambiguous, and what was read is echoed back.

    d = read_durations("export.csv", column="duration_ms", unit="ms")
    print(d.echo())      # read 2000 durations from export.csv, column duration_ms (ms): ...
    d.seconds            # the values in seconds (numpy array)
    d.warnings           # e.g. "median 1256 s: if these are milliseconds, use unit ms"

Rules (each refusal is one ConfigError line naming what to change):
- the column must be named when more than one column holds numbers that could be durations;
- a column of strictly increasing whole numbers (0, 1, 2, ... or 1001, 1002, ...) is an id, refused;
- the delimiter (',' ';' tab '|') and the decimal mark ('.' or ',') are detected from the file;
  a file where they cannot be told apart is refused;
- a UTF-8 byte-order mark is skipped; text that is not UTF-8 is refused;
- units are explicit (s, ms, us; default s); data that looks like another unit (median over
  100 s read as seconds, a column named like milliseconds, ...) gets one warning naming the
  median and the unit it looks like (`suspected_unit` says which).

The same rules read a file of measured stop-the-world pauses (`kind=PAUSES`: the advice's
--pauses), with the messages naming pauses and their own flags.
"""

from __future__ import annotations

import csv
import io
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from sim.errors import ConfigError
from sim.scenario.dists import decode_utf8
from sim.scenario.limits import MAX_CSV_BYTES, MAX_SECONDS
from sim.support.in_words import count
from sim.support.input_files import read_capped

UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6}
UNIT_WORDS = {"s": "seconds", "ms": "milliseconds", "us": "microseconds"}
DELIMITERS = (",", ";", "\t", "|")
DELIMITER_NAMES = {",": "','", ";": "';'", "\t": "tab", "|": "'|'", None: "none (one column)"}
SNIFF_LINES = 200
ID_MIN_ROWS = 5  # shorter columns are not judged id-like
SUSPICIOUS_MEDIAN = (
    100.0  # seconds: a median above this, read as seconds, gets a "milliseconds?" warning
)
TINY_MEDIAN = 0.005  # seconds: a median below this, read as ms or us, gets a "seconds?" warning
_NAME_UNITS = (  # column-name endings that say a unit
    ("us", re.compile(r"(^|[_\- ])(us|usec|micros|microseconds)$|\(us\)$", re.I)),
    ("ms", re.compile(r"(^|[_\- ])(ms|msec|millis|milliseconds)$|\(ms\)$", re.I)),
    ("s", re.compile(r"(^|[_\- ])(s|sec|secs|seconds)$|\(s\)$", re.I)),
)


@dataclass(frozen=True)
class Kind:
    """What a file of durations holds, for its messages: the noun, the flag naming its column,
    and the median above which seconds look like milliseconds."""

    noun: str = "durations"
    one: str = "duration"
    column_flag: str = "--column / column="
    what: str = "processing times"
    suspicious_median: float = SUSPICIOUS_MEDIAN


DURATIONS = Kind()
PAUSES = Kind("pauses", "pause", "--pause-column / pause_column=", "pause durations", 10.0)
_DOT_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")
_COMMA_NUMBER = re.compile(r"[+-]?(\d+,?\d*|,\d+)([eE][+-]?\d+)?")


@dataclass(frozen=True)
class Durations:
    """Durations in seconds and how they were read (for the echo line and the report)."""

    seconds: np.ndarray = field(repr=False)
    source: str  # the file name, or "values" for an array
    column: str | None
    unit: str
    delimiter: str | None = None
    decimal: str | None = None
    warnings: tuple[str, ...] = ()
    kind: Kind = DURATIONS
    suspected_unit: str | None = None  # the unit the data looks like, when not the one read

    @property
    def n(self) -> int:
        return int(len(self.seconds))

    @property
    def median(self) -> float:
        return float(np.median(self.seconds))

    @property
    def p99(self) -> float:
        return float(np.quantile(self.seconds, 0.99))

    @property
    def max(self) -> float:
        return float(self.seconds.max())

    def echo(self) -> str:
        """One line: what was read, from where, in which unit, and its median,
        p99 and max in seconds."""
        where = f"from {self.source}" + (f", column {self.column}" if self.column else "")
        how = f"unit {self.unit}"
        if self.delimiter is not None or self.decimal == ",":
            how += f", delimiter {DELIMITER_NAMES[self.delimiter]}, decimal '{self.decimal or '.'}'"
        return (
            f"read {count(self.n, self.kind.one)} {where} ({how}): median {_s(self.median)}, p99 "
            f"{_s(self.p99)}, max {_s(self.max)}"
        )

    def facts(self) -> dict[str, object]:
        """The echo as a dict (for Advice.inputs and the report)."""
        return {
            "source": self.source,
            "column": self.column,
            "unit": self.unit,
            "delimiter": self.delimiter,
            "decimal": self.decimal,
            "n": self.n,
            "median": self.median,
            "p99": self.p99,
            "max": self.max,
            "warnings": list(self.warnings),
        }


def _s(seconds: float) -> str:
    return f"{seconds:.3g} s" if seconds < 1000 else f"{seconds:,.0f} s"


def check_unit(unit: object) -> str:
    if unit not in UNITS:
        raise ConfigError(
            f"unit: {unit!r} is not one of {', '.join(UNITS)} (seconds, milliseconds, microseconds)"
        )
    return unit


def from_values(
    values: object, unit: str = "s", *, source: str = "values", kind: Kind = DURATIONS
) -> Durations:
    """Durations from an array-like of numbers in `unit`; ConfigError naming the first bad value."""
    unit = check_unit(unit)
    expected = (
        f"{kind.noun}: expected numbers of {UNIT_WORDS[unit]} (an array, list or Series), "
        "or a CSV path"
    )
    if values is None:
        raise ConfigError(expected)
    try:
        array = np.asarray(values, dtype=float).ravel()
    except (TypeError, ValueError):
        raise ConfigError(expected) from None
    if array.size == 0:
        raise ConfigError(f"{kind.noun}: no values")
    bad = ~np.isfinite(array) | (array < 0)
    if bad.any():
        i = int(np.argmax(bad))
        raise ConfigError(
            f"{kind.noun}[{i}]: {float(array[i])!r} must be a finite duration >= 0 "
            f"{UNIT_WORDS[unit]}"
        )
    long = array * UNITS[unit] > MAX_SECONDS
    if long.any():
        i = int(np.argmax(long))
        raise ConfigError(
            f"{kind.noun}[{i}]: {float(array[i]):g} {unit} is too long: {kind.noun} are at most "
            f"{MAX_SECONDS:g} s"
        )
    return _finish(array, source=source, column=None, unit=unit, kind=kind)


def read_durations(
    path: str | Path, column: str | None = None, unit: str = "s", *, kind: Kind = DURATIONS
) -> Durations:
    """Durations from a CSV file (see the module docstring for what is detected and what
    is refused); `kind` names what they are in the messages (DURATIONS or PAUSES)."""
    unit = check_unit(unit)
    path = Path(path)
    name = path.name
    raw = read_capped(path, f"{kind.noun} CSV", MAX_CSV_BYTES)
    text = decode_utf8(raw, path, "CSV")
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        raise ConfigError(f"{path}: empty file, expected a header row with a {kind.one} column")
    delimiter = _sniff_delimiter(path, lines[:SNIFF_LINES])
    reader = csv.reader(io.StringIO("\n".join(lines)), delimiter=delimiter or "\x00")
    try:
        rows = list(reader)
    except csv.Error as exc:
        raise ConfigError(f"{path}:{reader.line_num}: not a readable CSV file ({exc})") from None
    header = [h.strip() for h in rows[0]]
    body = rows[1:]
    if column is not None:
        wanted = column.strip().lstrip("\ufeff")
        if wanted not in header:
            raise ConfigError(f"{path}: no column {column!r}; columns are {', '.join(header)}")
        column = wanted
    else:
        column = _choose_column(path, header, body, kind)
    index = header.index(column)
    cells = [
        (line, (row[index] if index < len(row) else "").strip())
        for line, row in enumerate(body, start=2)
    ]
    if not cells:
        raise ConfigError(f"{path}: column {column!r} has no {kind.noun}")
    decimal = _decimal_mark(path, column, [c for _, c in cells], delimiter)
    values = []
    for line, cell in cells:
        value = _number(cell, decimal)
        shown = cell if len(cell) <= 40 else cell[:37] + "..."
        if value is None:
            raise ConfigError(
                f"{path}:{line}: {column}={shown!r} is not a number of {UNIT_WORDS[unit]}"
            )
        if value * UNITS[unit] > MAX_SECONDS and cell.lower().lstrip("+") not in (
            "inf",
            "infinity",
        ):
            raise ConfigError(
                f"{path}:{line}: {column}={shown} is too long: {kind.noun} are at most "
                f"{MAX_SECONDS:g} s"
            )
        if not math.isfinite(value) or value < 0:
            raise ConfigError(
                f"{path}:{line}: {column}={shown} must be a finite duration >= 0 {UNIT_WORDS[unit]}"
            )
        values.append(value)
    array = np.asarray(values, dtype=float)
    why = _id_like(array)
    if why:
        raise ConfigError(
            f"{path}: column {column!r} holds {why}: that looks like an id, not {kind.noun}; "
            f"name the {kind.noun} column ({kind.column_flag})"
        )
    return _finish(
        array,
        source=name,
        column=column,
        unit=unit,
        delimiter=delimiter,
        decimal=decimal,
        kind=kind,
    )


def _finish(
    array: np.ndarray,
    *,
    source: str,
    column: str | None,
    unit: str,
    delimiter: str | None = None,
    decimal: str | None = None,
    kind: Kind = DURATIONS,
) -> Durations:
    if not (array > 0).any():
        raise ConfigError(
            f"{kind.noun}: every value is 0; expected {kind.what} in {UNIT_WORDS[unit]}"
        )
    seconds = array * UNITS[unit]
    suspected, warnings = unit_suspicion(seconds, unit, column, kind.suspicious_median)
    return Durations(
        seconds,
        source,
        column,
        unit,
        delimiter,
        decimal,
        tuple(warnings),
        kind,
        suspected,
    )


def unit_warnings(seconds: np.ndarray, unit: str, column: str | None = None) -> list[str]:
    """Lines saying the data looks like another unit than `unit` (by its median,
    or its column name): at most one."""
    return unit_suspicion(seconds, unit, column)[1]


def unit_suspicion(
    seconds: np.ndarray,
    unit: str,
    column: str | None = None,
    suspicious: float = SUSPICIOUS_MEDIAN,
) -> tuple[str | None, list[str]]:
    """(the unit the data looks like, or None; its warning, one line): the median's scale and
    the column's name, said once when both point to the same unit."""
    median = float(np.median(seconds))
    by_scale = None
    if unit in ("s", "ms") and median > suspicious:
        by_scale = "ms" if unit == "s" else "us"
    elif unit in ("ms", "us") and median < TINY_MEDIAN:
        by_scale = "s"
    named = next((u for u, pattern in _NAME_UNITS if column and pattern.search(column)), None)
    by_name = named if named is not None and named != unit else None
    suspected = by_name or by_scale
    if suspected is None:
        return None, []
    looks = UNIT_WORDS[suspected]
    if by_name is None:
        because = f"median {_s(median)} read as {UNIT_WORDS[unit]}"
    elif by_scale == by_name:
        because = (
            f"column {column!r} is named like {looks} and its median read as "
            f"{UNIT_WORDS[unit]} is {_s(median)}"
        )
    else:
        because = (
            f"column {column!r} is named like {looks} but was read as {UNIT_WORDS[unit]} "
            f"(median {_s(median)})"
        )
    converted = _s(median * UNITS[suspected] / UNITS[unit])
    return suspected, [
        f"{because}: if these are {looks}, use unit {suspected} (median {converted})"
    ]


# ---- detection -----------------------------------------------------------------------------------


def _sniff_delimiter(path: Path, lines: list[str]) -> str | None:
    """The delimiter that splits every sniffed line into the same number (> 1) of fields; None for a
    one-column file; ConfigError when two delimiters fit equally or none fits."""
    fits = {}
    for d in DELIMITERS:
        reader = csv.reader(io.StringIO("\n".join(lines)), delimiter=d)
        try:
            counts = {len(row) for row in reader}
        except csv.Error as exc:
            raise ConfigError(
                f"{path}:{reader.line_num}: not a readable CSV file ({exc})"
            ) from None
        if len(counts) == 1 and counts.pop() > 1:
            fits[d] = len(next(csv.reader([lines[0]], delimiter=d)))
    if len(fits) == 1:
        return next(iter(fits))
    if len(fits) > 1:
        # ';' files with decimal commas in a one-field-per-value layout: the header has no comma
        header_fits = {d for d in fits if d in lines[0]}
        if len(header_fits) == 1:
            return header_fits.pop()
        names = " and ".join(DELIMITER_NAMES[d] for d in fits)
        raise ConfigError(
            f"{path}: cannot tell the delimiter: {names} both split every line evenly; "
            "save the CSV with one delimiter that appears nowhere else"
        )
    if not any(d in lines[0] for d in DELIMITERS):
        return None  # one column (its values may still carry decimal commas)
    used = [DELIMITER_NAMES[d] for d in DELIMITERS if d in lines[0]]
    raise ConfigError(
        f"{path}: the rows do not all have as many fields as the header (delimiter "
        f"{' or '.join(used)}?); a decimal comma in a comma-separated file must be quoted, or use "
        "';'"
    )


def _choose_column(path: Path, header: list[str], body: list[list[str]], kind: Kind) -> str:
    """The one column that could hold durations (numbers, not an id);
    ConfigError if none or several."""
    if len(header) == 1:
        return header[0]  # the only column: its rows say what is wrong with it
    numeric: list[str] = []
    ids: list[str] = []
    for i, name in enumerate(header):
        cells = [row[i].strip() for row in body if i < len(row) and row[i].strip()]
        if not cells:
            continue
        values = [
            _number(c, "," if "," in c else ".") for c in cells
        ]  # mixed marks: refused when read
        if any(v is None for v in values):
            continue
        (ids if _id_like(np.asarray(values, dtype=float)) else numeric).append(name)
    if len(numeric) == 1:
        return numeric[0]
    if len(numeric) > 1:
        raise ConfigError(
            f"{path}: columns {', '.join(numeric)} could all be {kind.noun}; name one "
            f"({kind.column_flag})"
        )
    if ids:
        raise ConfigError(
            f"{path}: the only numeric column{'s' if len(ids) > 1 else ''} "
            f"({', '.join(ids)}) look{'' if len(ids) > 1 else 's'} like an id, not {kind.noun}; "
            f"columns are {', '.join(header)}"
        )
    if not body:
        raise ConfigError(f"{path}: column {header[0]!r} has no {kind.noun}")
    raise ConfigError(
        f"{path}: no column holds only numbers; columns are {', '.join(header)} "
        f"(name the {kind.noun} column with {kind.column_flag})"
    )


def _decimal_mark(path: Path, column: str, cells: list[str], delimiter: str | None) -> str:
    comma = [c for c in cells if "," in c and _COMMA_NUMBER.fullmatch(c)]
    if not comma:
        return "."
    dotted = [c for c in cells if "." in c]
    if dotted:
        raise ConfigError(
            f"{path}: column {column!r} mixes '.' ({dotted[0]!r}) and ',' ({comma[0]!r}) as "
            "decimal marks; export it with one"
        )
    return ","


def _number(cell: str, decimal: str) -> float | None:
    if decimal == ",":
        if not _COMMA_NUMBER.fullmatch(cell):
            return None
        cell = cell.replace(",", ".")
    elif not _DOT_NUMBER.fullmatch(cell) and cell.lower().lstrip("+-") not in (
        "inf",
        "infinity",
        "nan",
    ):
        return None
    try:
        return float(cell)
    except ValueError:
        return None


def _id_like(values: np.ndarray) -> str | None:
    """'strictly increasing whole numbers 0 ... 1999' when the column looks like an id,
    else None."""
    if len(values) < ID_MIN_ROWS or not np.all(np.isfinite(values)):
        return None
    if not np.all(values == np.round(values)) or not np.all(np.diff(values) > 0):
        return None
    return (
        f"strictly increasing whole numbers ({values[0]:.0f}, {values[1]:.0f}, ... "
        f"{values[-1]:.0f})"
    )
