"""Notebook 09's helpers: find the bundled example queues, show a queue definition and its review
side by side with what its SQL text shows, and judge the reader's fenced completion.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pandas as pd

from sim.db.contracts import bound_params
from sim.db.queue_dir import QueueDefinition, QueueDefinitionError, load_queue

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "queues"
_PLACEHOLDER = "%({})s"


def example(name: str) -> Path:
    """The directory of a bundled example queue (examples/queues/NAME, in a source checkout)."""
    path = EXAMPLES / name
    if not (path / "queries.sql").is_file():
        names = sorted(p.name for p in EXAMPLES.iterdir()) if EXAMPLES.is_dir() else []
        raise QueueDefinitionError(
            f"example queue {name!r}: not found in {EXAMPLES} (examples: {', '.join(names) or 'none'})"
        )
    return path


def overrides_frame(queue: QueueDefinition) -> pd.DataFrame:
    """One row per statement the queue defines: where, what it declares, its description."""
    rows = [
        {
            "statement": name,
            "where": queue.where(name),
            "params": ", ".join(f"{p} {t}" for p, t in o.declared) or "-",
            "description": o.description if o.sql else f"(left out) {o.description}",
        }
        for name, o in queue.overrides.items()
    ]
    return pd.DataFrame(rows, columns=["statement", "where", "params", "description"])


def findings_frame(review) -> pd.DataFrame:
    """The items the SQL text speaks to: what the text shows, what the runs measured, the status."""
    from sim.review import ITEMS, trouble

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
            f"-- name: {name}\n-- Written by queue_lab.write_queue.\n-- params: {declared}\n{sql.strip()}\n"
        )
    (root / "queries.sql").write_text("\n".join(blocks), encoding="utf-8")
    if schema is not None:
        (root / "schema.sql").write_text(schema, encoding="utf-8")
    return root


def fenced_completion_verdict(
    answer: str, *, dsn: str | None = None, seed: int = 1
) -> tuple[bool, str]:
    """09's exercise: the reader's complete_fenced, run under gc-pause-zombie on PostgreSQL.
    Right when the text checks owner and attempt and the run has no completion by a non-owner."""
    from sim import runner
    from sim.sql_findings import fence

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
    safe, text = fence(queue, "complete_fenced")
    stolen = run.check().counts().get("non_owner_completion", 0)
    refused = int((run.events["kind"] == "complete_rejected").sum())
    completed = int(run.summary["completed"])
    if stolen:
        return False, (
            f"The zombie's completion went through ({stolen} completion by a worker that had lost the job): "
            "the WHERE must check the owner and the attempt the worker holds."
        )
    if not safe:
        return False, (
            f"No completion went through this time, but your WHERE {text.split(') ', 1)[1]}: a stale "
            "attempt would still complete once the same worker took the job again."
        )
    if completed < run.summary["jobs"]:
        return False, (
            f"Only {completed} of {int(run.summary['jobs'])} jobs completed: does your statement still "
            "complete the job of the worker that holds it?"
        )
    return True, (
        f"The zombie's late completion was refused ({refused} refused), every job completed once, and the "
        "WHERE checks owner and attempt."
    )
