"""The type of the model's generators: they yield SimPy events to wait on and return a value
(a process returns None; `play`, `execute` and the like return what the protocol gets back)."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any, TypeVar

import simpy

T = TypeVar("T")
Waits = Generator[simpy.Event, Any, T]
