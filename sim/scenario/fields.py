"""A scenario dataclass's fields typed and coerced as it is built (numpy scalars, ints for floats,
lists for tuples, a number or a table or a CSV for a distribution), so that a wrong type fails
with one line naming the field."""

from __future__ import annotations

import dataclasses
import difflib
import functools
import math
import os
import types
import typing
import warnings
from dataclasses import fields
from typing import Any, TypeVar

import numpy as np

from sim.errors import ConfigError
from sim.scenario.dists import Dist
from sim.scenario.durations import read_durations


class LeaseWarning(UserWarning):
    """A setting that works but is probably not what the user wants."""


T = TypeVar("T")


def build(cls: type[T], data: object, path: str) -> T:
    """A `cls` (a scenario dataclass) from a table, every key known and every value coerced to its
    field's type; ConfigError naming the field (with a did-you-mean for an unknown key)."""
    shape: Any = cls  # a dataclass
    if not isinstance(data, dict):
        raise ConfigError(
            f"{path.rstrip('.') or 'scenario'}: expected a table, got {describe(data)}"
        )
    hints = hints_of(shape)
    names = [f.name for f in fields(shape)]
    kwargs: dict[str, Any] = {}
    for key, value in data.items():
        if not isinstance(key, str):
            raise ConfigError(
                f"{path.rstrip('.') or 'scenario'}: keys must be strings, got {describe(key)}"
            )
        where = f"{path}{key}" if key.isidentifier() else f"{path}{key!r}"
        if key not in names:
            close = difflib.get_close_matches(key, names, n=1)
            hint = (
                f"; did you mean {path}{close[0]}?" if close else f"; allowed: {', '.join(names)}"
            )
            raise ConfigError(f"{where}: unknown key{hint}")
        kwargs[key] = convert(hints[key], value, where)
    missing = [
        f.name
        for f in fields(shape)
        if f.name not in kwargs
        and f.default is dataclasses.MISSING
        and f.default_factory is dataclasses.MISSING
    ]
    if missing:
        raise ConfigError(f"{path}{missing[0]}: missing; give {', '.join(missing)}")
    return cls(**kwargs)


def check_types(obj: Any, prefix: str) -> None:
    """Check (and normalise: numpy scalars, ints for floats, lists for tuples) every field of a
    scenario dataclass as it is built, so that a wrong type fails here, naming the field."""
    hints = hints_of(obj.__class__)
    for f in fields(obj):
        hint = hints[f.name]
        if not (
            hint in (bool, int, float, str, Dist)
            or dataclasses.is_dataclass(hint)
            or typing.get_origin(hint) in (tuple, types.UnionType)
        ):
            continue  # a kind of field convert does not know: left to its own code
        value = getattr(obj, f.name)
        converted = convert(hint, value, f"{prefix}{f.name}")
        if converted is not value:
            object.__setattr__(obj, f.name, converted)


@functools.cache
def hints_of(cls: type) -> dict[str, object]:
    return typing.get_type_hints(cls)


def convert(hint: Any, value: Any, where: str) -> Any:
    origin = typing.get_origin(hint)
    if hint is Dist:
        return value if isinstance(value, Dist) else dist_from(value, where)
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return value if isinstance(value, hint) else build(hint, value, where + ".")
    if origin is tuple:
        item = typing.get_args(hint)[0]
        if isinstance(value, np.ndarray):
            value = value.tolist()
        if not isinstance(value, list | tuple):
            raise ConfigError(f"{where}: expected a list, got {describe(value)}")
        return tuple(convert(item, v, f"{where}[{i}]") for i, v in enumerate(value))
    if origin is types.UnionType:
        if value is None:
            return None
        inner = next(a for a in typing.get_args(hint) if a is not type(None))
        return convert(inner, value, where)  # an optional number, list or section alike
    if isinstance(value, np.generic):
        value = value.item()  # numpy scalars are accepted wherever Python's are
    if hint is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{where}: expected true or false, got {describe(value)}")
        return value
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{where}: expected a whole number, got {describe(value)}")
        return int(value)
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(f"{where}: expected a number, got {describe(value)}")
        try:
            number = float(value)
        except OverflowError:
            raise ConfigError(f"{where}: {short(value)} is too large for a number") from None
        if not math.isfinite(number):
            raise ConfigError(f"{where}: must be a finite number, got {short(value)}")
        return number
    if hint is str:
        if not isinstance(value, str):
            raise ConfigError(f"{where}: expected a string, got {describe(value)}")
        return str(value)
    raise ConfigError(f"{where}: unsupported value {describe(value)}")


def dist_from(value: object, where: str) -> Dist:
    """A number means a constant; a table names its kind and parameters; csv= reads samples."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, int | float) and not isinstance(value, bool):
        return Dist.constant(convert(float, value, where))
    if not isinstance(value, dict):
        raise ConfigError(
            f"{where}: expected a number of seconds or a table like "
            '{kind = "lognormal", median = 2, p99 = 20}, '
            f"got {describe(value)}"
        )
    data = dict(value)
    if not data:
        raise ConfigError(
            f"{where}: an empty table; give a number of seconds or a table like "
            '{kind = "lognormal", median = 2, p99 = 20}'
        )
    if (
        "csv" in data
    ):  # sim.scenario.durations: column named when ambiguous, ids refused, unit s | ms | us
        path, column, unit = data.pop("csv"), data.pop("column", None), data.pop("unit", "s")
        if not isinstance(path, str | os.PathLike):
            raise ConfigError(f"{where}.csv: expected a file path, got {describe(path)}")
        if column is not None and not isinstance(column, str):
            raise ConfigError(f"{where}.column: expected a column name, got {describe(column)}")
        try:
            read = read_durations(os.fspath(path), column, unit)
        except ConfigError as exc:
            raise ConfigError(f"{where}.csv: {exc}") from None
        for warning in read.warnings:
            warnings.warn(f"{where}: {warning}", LeaseWarning, stacklevel=2)
        data = {
            "kind": "empirical",
            "samples": read.seconds.tolist(),
            **{k: v for k, v in data.items() if k != "kind"},
        }
    return build(Dist, data, where + ".")


def describe(value: object) -> str:
    return f"{type(value).__name__} {short(value)}"


def short(value: object) -> str:
    """repr of a value, cut short: a 10**400 or a megabyte string stays one readable line."""
    if isinstance(value, int) and abs(value) >= 10**30:
        return f"{'-' if value < 0 else ''}an integer of {abs(value).bit_length()} bits"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
