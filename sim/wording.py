"""Counts in words for titles, reports and exercise feedback: '1 crash', '3 leases', 'twice'."""

from __future__ import annotations


def count(n, one: str, many: str | None = None) -> str:
    """'1 crash', '2 crashes', '0.5 crashes', '3000 jobs': the noun is singular for exactly one."""
    number = f"{int(n)}" if float(n).is_integer() else f"{n:g}"
    return f"{number} {one if n == 1 else (many or one + 's')}"


def times(n) -> str:
    """How often, in words: 'once', 'twice', '3 times', '0.5 times' (e.g. 'was charged twice')."""
    n = float(n)
    return {1.0: "once", 2.0: "twice"}.get(n, f"{n:g} times")
