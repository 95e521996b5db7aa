"""How the exercise checkers read a reader's answer and say what they think of it: the `Verdict`,
numbers (a bool is not one; '56 s' is 56), names typed in any case and spacing, sets, and the rule
every numeric checker follows: an answer is right only when it is closer to the right value than
to every common mistake (and within the checker's own tolerance)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np

SETS = (set, frozenset, list, tuple)
_SECONDS = re.compile(r"^\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:e[-+]?\d+)?)\s*(s|sec|secs|seconds?)?\s*$")


@dataclass
class Verdict:
    """The answer to a "try it" exercise: right or not, and why. Shows as Markdown in a notebook."""

    ok: bool | None  # None: not answered yet
    message: str

    def __bool__(self) -> bool:
        return bool(self.ok)

    def _repr_markdown_(self) -> str:
        mark = {True: "**Right.**", False: "**Not quite.**", None: "**Not answered yet.**"}[self.ok]
        return f"{mark} {self.message}"

    def __repr__(self) -> str:
        mark = {True: "Right.", False: "Not quite.", None: "Not answered yet."}[self.ok]
        return f"{mark} {self.message}"


def unanswered(hint: str) -> Verdict:
    return Verdict(None, f"Replace `None` with your answer and run the cell again. Hint: {hint}")


def number(answer) -> float | None:
    """A number of seconds as a reader may type it: 56, 56.0, numpy's 56, '56', '56 s',
    '56 seconds', inf. None for anything else: a bool (True is not 1 s), NaN, '56 ms', a list."""
    if isinstance(answer, bool | np.bool_):
        return None
    if isinstance(answer, str):
        match = _SECONDS.match(answer.lower())
        if match is None:
            return None if answer.strip().lower() not in ("inf", "infinity") else math.inf
        answer = match.group(1)
    try:
        value = float(answer)
    except (TypeError, ValueError, OverflowError):
        return None
    return None if math.isnan(value) else value


def typed_name(answer) -> str:
    """A name as a reader may type it: ' Skip-Locked ' -> 'skip_locked'."""
    return "_".join(str(answer).strip().lower().replace("-", " ").split())


def as_set(answer) -> set | None:
    """A set answer: a set, list or tuple of items, or a single string as a set of one; None for
    anything else (a number, a bool)."""
    if isinstance(answer, str):
        return {answer}
    if isinstance(answer, SETS):
        return set(answer)
    return None


def set_mismatch(*parts: tuple[set, str]) -> str:
    """'a, b let two workers win; c is safe too': each non-empty set, sorted, with its remark."""
    return "; ".join(
        f"{', '.join(f'{x:g}' if isinstance(x, float) else str(x) for x in sorted(items))} {remark}"
        for items, remark in parts
        if items
    )


def tolerance(truth: float, mistakes: dict[str, float], cap: float) -> float:
    """How far from `truth` an answer may be: at most `cap`, and at most half the gap to the
    nearest common mistake (accepts() then asks for strictly closer to the truth)."""
    gaps = [abs(x - truth) for x in mistakes.values() if abs(x - truth) > 1e-9]
    return min([cap] + [gap / 2 for gap in gaps])


def accepts(value: float | None, truth: float, mistakes: dict[str, float], within: float) -> bool:
    """Is `value` within `within` of the truth and closer to it than to every common mistake? An
    answer exactly halfway to a mistake is not: it could be either."""
    if value is None or not math.isfinite(value):
        return False
    off = abs(value - truth)
    return off <= within and all(off < abs(value - x) for x in mistakes.values())


def named_mistake(value: float | None, mistakes: dict[str, float], within: float) -> str:
    """The common mistakes `value` matches (within `within`, halfway included), as a sentence;
    '' when none does."""
    if value is None:
        return ""
    exact = [why for why, x in mistakes.items() if abs(value - x) <= 1e-9 * max(1.0, abs(x))]
    if exact:
        return f" {value:g} s is {'; or '.join(exact)}."
    near = [f"{x:g} s, {why}" for why, x in mistakes.items() if abs(value - x) <= within]
    if near:
        return f" {value:g} s is no closer to the right answer than to {'; or to '.join(near)}."
    return ""
