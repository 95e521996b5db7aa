"""What the SQL text of a queue shows for the review checklist, before anything runs: whether the
claim is one statement with RETURNING that re-checks (or locks) the row it takes, whether
completion and heartbeat carry owner and attempt in their WHERE, whether a watcher exists.

A reading of the text, not a proof: the review puts each finding beside the runs, which confirm
or refute it (sim.review).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sim.db.queue_dir import QueueDefinition

_TOKEN = re.compile(
    r"'(?:[^']|'')*'|--[^\n]*|/\*.*?\*/", re.S
)  # literals and comments, left to right
_ID_MATCH = re.compile(r"^\(*\s*(?:\w+\.)?id\s*=\s*(?:%\(id\)s|\w+\.id|\(.*\))\s*\)*$", re.S | re.I)
_ATTEMPTS_CAP = re.compile(
    r"^(\w+\.)?attempts\s*<\s*%\(max_attempts\)s$", re.I
)  # the cap, not the claim's state check
_CLAIMS = {
    "read_then_write": ("select_candidates", "claim_unconditional"),
    "conditional_update": ("select_candidates", "claim_conditional"),
    "skip_locked": ("claim_skip_locked",),
    "select_for_update": ("lock_next_candidate", "claim_unconditional"),
}


@dataclass(frozen=True)
class Finding:
    """One checklist item as the text shows it: safe or not, and why (naming file:line)."""

    item: str  # review check key: claim, fencing, watcher
    safe: bool
    text: str


@dataclass(frozen=True)
class Statement:
    """The shape of one statement's text: its main verb, RETURNING, locking and top-level WHERE."""

    verb: str  # UPDATE, SELECT, INSERT, DELETE (of the main statement, after any WITH)
    returning: bool
    locks: bool  # FOR UPDATE anywhere (a CTE or sub-select included)
    conditions: tuple[str, ...]  # the main statement's WHERE clause, split at its top-level ANDs
    unset: str  # the text without comments and the main UPDATE's SET clause (where fences are looked for)

    def rechecks(self) -> list[str]:
        """The WHERE terms beyond matching the id: conditions on the row's state at write time."""
        return [c for c in self.conditions if not (_ID_MATCH.match(c) or _ATTEMPTS_CAP.match(c))]

    def uses(self, param: str) -> bool:
        """Is %(param)s used outside the SET clause (in a WHERE or a join condition)?"""
        return f"%({param})s" in self.unset


def shape(sql: str) -> Statement:
    """Read a statement's structure; comments are ignored, literals cannot fake keywords."""
    bare = _TOKEN.sub(
        lambda m: m.group() if m.group().startswith("'") else " " * len(m.group()), sql
    )
    text = _TOKEN.sub(_blank, sql)  # same length as `sql`: positions carry over
    flat = _flatten(text)  # parenthesised text blanked too: only the top level is left
    upper = flat.upper()
    verb = re.search(r"\b(UPDATE|SELECT|INSERT|DELETE)\b", upper)
    main = verb.start() if verb else 0
    where = re.search(r"\bWHERE\b", upper[main:])
    conditions: list[str] = []
    if where:
        start = main + where.end()
        stop = re.search(r"\b(RETURNING|ORDER\s+BY|LIMIT|FOR\s+UPDATE|GROUP\s+BY)\b", upper[start:])
        end = start + stop.start() if stop else len(sql)
        cuts = (
            [start]
            + [
                m
                for a in re.finditer(r"\bAND\b", upper[start:end])
                for m in (start + a.start(), start + a.end())
            ]
            + [end]
        )
        conditions = [
            " ".join(bare[a:b].split()) for a, b in zip(cuts[::2], cuts[1::2], strict=True)
        ]
    unset = text
    if verb and verb.group(1) == "UPDATE":
        set_at = re.search(r"\bSET\b", upper[main:])
        if set_at:
            begin = main + set_at.start()
            after = re.search(r"\b(FROM|WHERE|RETURNING)\b", upper[begin:])
            unset = text[:begin] + (text[begin + after.start() :] if after else "")
    return Statement(
        verb.group(1) if verb else "",
        bool(re.search(r"\bRETURNING\b", upper)),
        bool(re.search(r"\bFOR\s+UPDATE\b", text.upper())),
        tuple(c for c in conditions if c),
        unset,
    )


def _blank(m: re.Match) -> str:
    """A comment becomes spaces, a literal keeps its quotes around underscores."""
    token = m.group()
    return "'" + "_" * (len(token) - 2) + "'" if token.startswith("'") else " " * len(token)


def _flatten(text: str) -> str:
    out, depth = [], 0
    for ch in text:
        if ch == "(":
            depth += 1
        out.append(ch if depth == 0 else " ")
        if ch == ")":
            depth = max(0, depth - 1)
    return "".join(out)


def _short(condition: str, width: int = 100) -> str:
    text = " ".join(condition.split())
    return text if len(text) <= width else text[: width - 3] + "..."


def findings(queue: QueueDefinition, policy) -> dict[str, Finding]:
    """The text's findings for the claim, fencing and watcher items under `policy`."""
    return {
        "claim": _claim(queue, policy),
        "fencing": _fencing(queue, policy),
        "watcher": _watcher(queue, policy),
    }


def _claim(queue: QueueDefinition, policy) -> Finding:
    names = _CLAIMS[policy.claim]
    write = names[-1]
    sql = queue.sql_of(write)
    where = queue.where(write)
    if sql is None:
        return Finding("claim", False, f"{write} is missing from the queue")
    st = shape(sql)
    if st.verb != "UPDATE" or not st.returning:
        what = "an UPDATE" if st.verb == "UPDATE" else f"a {st.verb or 'statement'}"
        return Finding(
            "claim",
            False,
            f"{write} ({where}) is {what} without RETURNING: the worker cannot tell "
            "whether it won the job",
        )
    rechecks = st.rechecks()
    if policy.claim == "select_for_update":
        lock = queue.sql_of("lock_next_candidate") or ""
        if shape(lock).locks:
            return Finding(
                "claim",
                True,
                f"lock_next_candidate ({queue.where('lock_next_candidate')}) locks the "
                f"row FOR UPDATE, then {write} ({where}) writes it in the same transaction",
            )
        return Finding(
            "claim",
            False,
            f"lock_next_candidate ({queue.where('lock_next_candidate')}) does not lock "
            "the row (no FOR UPDATE): the read, then the write, is a race",
        )
    if rechecks:
        return Finding(
            "claim",
            True,
            f"{write} ({where}) is one UPDATE ... RETURNING whose WHERE re-checks the row "
            f"as it writes: {_short(' AND '.join(rechecks))}",
        )
    if st.locks:
        return Finding(
            "claim",
            True,
            f"{write} ({where}) is one UPDATE ... RETURNING that locks the row it takes "
            "(FOR UPDATE in the same statement)",
        )
    read = f"{names[0]} ({queue.where(names[0])}), then " if len(names) > 1 else ""
    return Finding(
        "claim",
        False,
        f"{read}{write} ({where}), whose WHERE matches the id alone: the UPDATE takes the "
        "job whatever its state, so two workers that read the same row both win "
        "(read-then-write)",
    )


def fence(queue: QueueDefinition, name: str) -> tuple[bool, str]:
    """(checks owner and attempt, what the WHERE of statement `name` checks)."""
    owner, attempt, text = _fence(queue, name)
    return owner and attempt, text


def _fence(queue: QueueDefinition, name: str) -> tuple[bool, bool, str]:
    """(uses owner, uses attempt, what the WHERE of statement `name` checks)."""
    st = shape(queue.sql_of(name) or "")
    owner, attempt = st.uses("owner"), st.uses("attempt")
    checks = " and ".join(w for w, used in (("owner", owner), ("attempt", attempt)) if used)
    if owner and attempt:
        return owner, attempt, f"{name} ({queue.where(name)}) checks owner and attempt"
    if checks:
        return (
            owner,
            attempt,
            f"{name} ({queue.where(name)}) checks the {checks} but not the "
            f"{'attempt' if owner else 'owner'}",
        )
    return owner, attempt, f"{name} ({queue.where(name)}) checks neither owner nor attempt"


_UNFENCED = {
    (False, False): ": a worker that lost its lease still completes the job",
    (
        True,
        False,
    ): ": a worker's stale attempt still completes once the same worker took the job again",
    (False, True): ": another worker's completion of the same attempt number goes through",
}


def _fencing(queue: QueueDefinition, policy) -> Finding:
    name = "complete_fenced" if policy.fencing else "complete_unfenced"
    owner, attempt, text = _fence(queue, name)
    safe = owner and attempt
    if not safe:
        text += _UNFENCED[owner, attempt]
    if policy.heartbeat and queue.sql_of("heartbeat") is not None:
        beat_safe, beat = fence(queue, "heartbeat")
        text += (
            "; " + beat + ("" if beat_safe else ": a heartbeat can renew a lease its worker lost")
        )
        safe = safe and beat_safe
    return Finding("fencing", safe, text)


def _watcher(queue: QueueDefinition, policy) -> Finding:
    sql = queue.sql_of("requeue_expired")
    if sql is not None and policy.watcher:
        st = shape(sql)
        expiry = "lease_until" in sql
        how = (
            "compares lease_until with now"
            if expiry
            else "does not read lease_until (it rescues by another rule)"
        )
        writes = "UPDATE" in sql.upper()
        return Finding(
            "watcher",
            writes,
            f"requeue_expired ({queue.where('requeue_expired')}) exists and "
            f"{'writes' if writes else 'does not write'} the rows it returns; it {how}"
            + ("" if st.returning or st.verb == "SELECT" else "; it returns no rows"),
        )
    if sql is None:
        head = "this queue has no watcher (requeue_expired is left out)"
    else:
        head = f"requeue_expired exists ({queue.where('requeue_expired')}) but policy.watcher = false does not run it"
    if policy.claim_takes_expired:
        return Finding(
            "watcher",
            True,
            f"{head}; the claim must take expired jobs itself (claim_takes_expired)",
        )
    return Finding(
        "watcher",
        False,
        f"{head}, and the claim skips expired jobs: nothing recovers a crashed worker's job",
    )
