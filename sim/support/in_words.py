"""Numbers in words for titles, reports and exercise feedback: '1 crash', 'twice', '12.3 s', '1.2%'.

One home for every such rule, so that a figure, the review, the advisor and a notebook write the
same value the same way; a missing value (None, NaN, inf) reads NO_VALUE everywhere. `claim` is the
one check that a sentence's words follow its numbers (the advice's sentences, a notebook's prose).
"""

from __future__ import annotations

import math

NO_VALUE = "n/a"


def plural(n, one: str, many: str | None = None) -> str:
    """The noun alone, singular for exactly one: plural(2, 'job') -> 'jobs'."""
    return one if n == 1 else (many or one + "s")


def count(n, one: str, many: str | None = None) -> str:
    """'1 crash', '2 crashes', '0.5 crashes', '3000 jobs': the noun is singular for exactly one."""
    number = f"{int(n)}" if float(n).is_integer() else f"{n:g}"
    return f"{number} {plural(n, one, many)}"


def times(n) -> str:
    """How often, in words: 'once', 'twice', '3 times', '0.5 times' (e.g. 'was charged twice')."""
    n = float(n)
    return {1.0: "once", 2.0: "twice"}.get(n, f"{n:g} times")


def _missing(x) -> bool:
    return x is None or not math.isfinite(float(x))


def duration(seconds, digits: int = 3, *, none: str = NO_VALUE, ms: bool = False) -> str:
    """'12.3 s', '10 min', '1 h', '2.5 h': seconds up to 2 min, minutes up to 2 h, then hours
    (whole hours from 1 h on read as hours); with ms=True, under a second in milliseconds
    ('500 ms', '0 ms'); `none` for a missing value."""
    if _missing(seconds):
        return none
    x = float(seconds)
    if (
        ms and abs(x) < 1 and "e" not in (text := f"{x * 1000:.{digits}g}")
    ):  # 0.9999 s: '1 s', not '1e+03 ms'
        return f"{text} ms"
    if abs(x) >= 3600 and x % 3600 == 0:
        return f"{x / 3600:g} h"
    if abs(x) >= 7200:
        return f"{x / 3600:.{digits}g} h"
    if abs(x) >= 120:
        return f"{x / 60:.{digits}g} min"
    return f"{x:.{digits}g} s"


def percent(share, digits: int = 2, *, none: str = NO_VALUE) -> str:
    """A share as a percentage with `digits` significant digits: '1.2%', '0%', '< 0.0001%' (a
    non-zero share below one in a million); `none` for a missing value."""
    if _missing(share):
        return none
    x = float(share)
    if x == 0:
        return "0%"
    if abs(x) < 1e-6:
        return "< 0.0001%"
    text = f"{100 * x:.{digits}g}"
    return f"{100 * x:.0f}%" if "e+" in text else f"{text}%"  # 99.9% and up: '100%', never '1e+02%'


def amount(n) -> str:
    """An expected count or a rate: '0', '< 0.001', '0.42', '1.7', '230', '1,200'."""
    if _missing(n):
        return NO_VALUE
    x = float(n)
    if x == 0:
        return "0"
    if abs(x) < 0.001:
        return "< 0.001"
    return f"{x:.2g}" if abs(x) < 100 else f"{x:,.0f}"


def apart(a, b, show=None, digits: int = 2) -> tuple[str, str]:
    """`a` and `b` written by `show` (percent by default; duration works too) with the fewest
    significant digits, from `digits`, at which two different numbers read differently: '0.1%'
    and '0.1%' for 0.10004 and 0.1 would say nothing; '0.10004%' and '0.1%' do."""
    show = show or percent
    for n in range(digits, 10):
        texts = show(a, n), show(b, n)
        if a == b or texts[0] != texts[1]:
            return texts
    return texts


CONTRADICTION = "a sentence contradicts its own figures"


def claim(condition, text: str, *, who: str = CONTRADICTION) -> str:
    """`text` when `condition` (computed from the numbers the text shows) holds; else
    AssertionError naming the text: a sentence is built beside its figures and cannot drift from
    them (a Lease Lab fault, never the user's)."""
    if not bool(condition):
        raise AssertionError(f"{who}: {text}")
    return text
