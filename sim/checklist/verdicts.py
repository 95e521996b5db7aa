"""The four verdicts a checklist item can give, how the report draws them, and the one rule shared
by items whose guard is on (any bad count fails; nothing exercised is untested)."""

from __future__ import annotations

PASS, FAIL, RISK, UNTESTED = "pass", "fail", "risk", "untested"
STATUSES = (PASS, RISK, FAIL, UNTESTED)
# status -> (symbol, face colour, text colour): Okabe-Ito, symbol and word for greyscale
STATUS_STYLE = {
    PASS: ("\u2713", "#009E73", "white"),
    RISK: ("!", "#E69F00", "black"),
    FAIL: ("\u2717", "#D55E00", "white"),
    UNTESTED: ("?", "#FFFFFF", "black"),  # not exercised: neither a pass nor a failure
}

# What an item's check returns: (status, evidence, the numbers behind the evidence).
Verdict = tuple[str, str, dict]


def guarded(text: str, bad: int, exercised: int, unexercised: str) -> tuple[str, str]:
    """An item whose guard is on: FAIL on any bad count, else PASS if exercised, else
    UNTESTED."""
    if bad:
        return FAIL, text + "."
    return (PASS, text + ".") if exercised else (UNTESTED, f"{text}: {unexercised}.")
