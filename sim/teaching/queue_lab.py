"""Notebook 09's helpers: find the bundled example queues, show a queue definition and its review
side by side with what its SQL text shows, and judge the reader's fenced completion.
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

import pandas as pd

from sim.db.queue.contracts import bound_params
from sim.db.queue.directory import QueueDefinition, QueueDefinitionError, load_queue

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "queues"
_PLACEHOLDER = "%({})s"


def example(name: str) -> Path:
    """The directory of a bundled example queue (examples/queues/NAME, in a source checkout)."""
    path = EXAMPLES / name
    if not (path / "queries.sql").is_file():
        names = sorted(p.name for p in EXAMPLES.iterdir()) if EXAMPLES.is_dir() else []
        raise QueueDefinitionError(
            f"example queue {name!r}: not found in {EXAMPLES} (examples: "
            f"{', '.join(names) or 'none'})"
        )
    return path


def shareable(text: str, folder: str | Path) -> str:
    """`text` (a review, a file:line) with the queue folder's local path said as its name only, so
    that a page made of the notebook (make html) publishes no local path."""
    folder = Path(folder)
    for spelled in {str(folder), str(folder.resolve())}:
        # a wrapped text (a review) may break the path after a hyphen, onto an indented line
        path = "".join(re.escape(c) + (r"(?:\n[ \t]*)?" if c == "-" else "") for c in spelled)
        text = re.sub(path + re.escape(os.sep), "", text)
        text = re.sub(path, folder.name, text)
    return text


def overrides_frame(queue: QueueDefinition) -> pd.DataFrame:
    """One row per statement the queue defines: where, what it declares, its description."""
    rows = [
        {
            "statement": name,
            "where": shareable(queue.where(name), queue.path),
            "params": ", ".join(f"{p} {t}" for p, t in o.declared) or "-",
            "description": o.description if o.sql else f"(left out) {o.description}",
        }
        for name, o in queue.overrides.items()
    ]
    return pd.DataFrame(rows, columns=["statement", "where", "params", "description"])


def findings_frame(review) -> pd.DataFrame:
    """The items the SQL text speaks to: what the text shows, what the runs measured, the status."""
    from sim.checklist.design_review import ITEMS, trouble

    rows = []
    for key, finding in review.findings.items():
        rows.append(
            {
                "item": ITEMS[key],
                "the SQL text shows": "safe" if finding.safe else "a flaw",
                "trouble in the runs": trouble(key, review.measured[key]),
                "status": review.table.loc[key, "status"],
            }
        )
    return pd.DataFrame(rows)


def write_queue(
    directory: str | Path, statements: dict[str, str], schema: str | None = None
) -> Path:
    """Write a queue directory: each statement's text becomes a block declaring the parameters it
    uses (with the types Lease Lab binds them as). Refuses a directory that already has files."""
    root = Path(directory)
    root.mkdir(parents=True, exist_ok=True)
    if any(root.iterdir()):
        raise QueueDefinitionError(f"{root}: not empty; write_queue never overwrites a queue")
    blocks = []
    for name, sql in statements.items():
        try:
            params = [(p, t) for p, t in bound_params(name) if _PLACEHOLDER.format(p) in sql]
        except KeyError:
            params = []  # an unknown name: the loader says so, with the line
        declared = ", ".join(f"{p} {t}" for p, t in params)
        blocks.append(
            f"-- name: {name}\n-- Written by queue_lab.write_queue.\n-- params: "
            f"{declared}\n{sql.strip()}\n"
        )
    (root / "queries.sql").write_text("\n".join(blocks), encoding="utf-8")
    if schema is not None:
        (root / "schema.sql").write_text(schema, encoding="utf-8")
    return root


_PROBES = (  # (name, owner, attempt) on a job w1 claimed twice: attempt 2 is w1's and current
    ("holder", "w1", 2),
    ("stale_attempt", "w1", 1),
    ("other_owner", "w0", 2),
)


def completion_probes(queue: QueueDefinition, *, dsn: str | None = None) -> dict[str, bool]:
    """What a queue's complete_fenced does, asked of PostgreSQL in transactions rolled back: on one
    job that worker w1 claimed, lost (its lease ran out) and claimed again (attempt 2), does the
    statement complete it for its holder (w1, attempt 2), for w1's stale attempt 1, and for another
    worker w0 naming the current attempt 2?"""
    from sim import runner
    from sim.teaching.by_hand import Script

    db = runner.make_backend("postgres", dsn=dsn, sql=queue)
    try:
        script = Script(db)
        script.at(0.0).sql("setup", "insert_job", id=1, event_id="evt-1", payload="{}")
        script.sql("setup", "claim_conditional", id=1, owner="w1", ttl=10)
        script.at(20.0).sql("setup", "claim_conditional", id=1, owner="w1", ttl=10)
        done = {}
        for name, owner, attempt in _PROBES:
            script.at(21.0).begin("probe")
            rows = script.sql("probe", "complete_fenced", id=1, owner=owner, attempt=attempt)
            script.rollback("probe")
            done[name] = bool(rows)
        return done
    finally:
        db.close()


def fenced_completion_verdict(
    answer: str, *, dsn: str | None = None, seed: int = 1
) -> tuple[bool, str]:
    """09's exercise: the reader's complete_fenced, run under gc-pause-zombie on PostgreSQL, then
    probed (completion_probes). Right when the run has no completion by a non-owner and the
    statement completes the job for its holder only: not for a stale attempt, not for another
    owner naming the current attempt."""
    from sim import runner

    with tempfile.TemporaryDirectory(prefix="leaselab-09-") as tmp:
        path = write_queue(Path(tmp) / "fenced", {"complete_fenced": answer})
        try:
            queue = load_queue(path)
            run = runner.run("gc-pause-zombie", seed=seed, sql=queue, dsn=dsn)
        except QueueDefinitionError as exc:
            return (
                False,
                f"Lease Lab refused the definition: {str(exc).replace(str(path) + '/', '')}",
            )
    stolen = run.check().counts().get("non_owner_completion", 0)
    refused = int((run.events["kind"] == "complete_rejected").sum())
    completed, jobs = int(run.summary["completed"]), int(run.summary["jobs"])
    if stolen:
        return False, (
            f"The zombie's completion went through ({stolen} completion by a worker that had lost "
            "the job): the WHERE must check the owner and the attempt the worker holds."
        )
    probes = completion_probes(queue, dsn=dsn)
    here = (
        f"No completion by a worker that had lost the job went through in this run ({refused} "
        "refused)"
    )
    if not probes["holder"]:
        return False, (
            f"Only {completed} of {jobs} jobs completed, and a probe (rolled back) shows why: "
            "your statement refused w1's completion of the attempt it holds. Does it still "
            "complete the job of the worker that holds it?"
        )
    if probes["stale_attempt"] and probes["other_owner"]:
        return False, (
            f"{here}, but probes (rolled back) show your WHERE completes a job for w1's stale "
            "attempt and for another worker naming the current one: it checks neither, and a "
            "zombie whose timing differs from this run's would complete."
        )
    if probes["stale_attempt"]:
        return False, (
            f"{here}, but a probe (rolled back) completed the job for w1's stale attempt 1 while "
            "w1's attempt 2 holds it: a worker that lost its lease and took the job again (a "
            "second handler, a retry) would complete it twice. Check the attempt too."
        )
    if probes["other_owner"]:
        return False, (
            f"{here}: the attempt alone refused the zombie, since every claim increments "
            "attempts. But a probe (rolled back) completed the job for w0 naming attempt 2 while "
            "w1 holds it: a worker that re-reads attempts from the row before completing (a "
            "retry path does) passes the holder's attempt and completes a job it does not hold. "
            "Check the owner too."
        )
    if completed < jobs:
        return False, (
            f"Only {completed} of {jobs} jobs completed: does your statement still complete the "
            "job of the worker that holds it?"
        )
    return True, (
        f"{here}, every job completed, and probes (rolled back) show your WHERE completes a "
        "job for the worker that holds the attempt and refuses a stale attempt and another owner."
    )
