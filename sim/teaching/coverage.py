"""Coverage: which notebook cells show each concept and checklist item of the seed, and each idea
of the sources on clocks and fencing (cell tags)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import pandas as pd

# ---- coverage: the seed's concepts and checklist -> notebook cells -------------------------------

REQUIRED_TAGS = {
    "concept:lease": "Lease: a time-stamped record that a worker owns a job for a limited time",
    "concept:conditional-update": (
        "Conditional UPDATE: one atomic statement that claims only if the expected condition holds"
    ),
    "concept:lease-ttl": "Lease TTL: how long a claim lasts before the job can be taken again",
    "concept:stuck-watcher": (
        "Stuck watcher: a periodic job that makes expired, unfinished work claimable again"
    ),
    "confused:lease-vs-lock": (
        "A lease is not a lock: it expires; a lock can stay forever if its holder dies"
    ),
    "confused:read-then-write-vs-conditional-update": (
        "Read-then-write races; the conditional UPDATE is atomic"
    ),
    "confused:nack-vs-lease": (
        "Nack / visibility timeout manages message visibility; a lease keeps job state and attempts"
    ),
    "checklist:1": "The claim is one atomic UPDATE ... WHERE, not read-then-write",
    "checklist:2": "The TTL really exceeds the longest expected processing",
    "checklist:3": "Long jobs renew their lease by heartbeat",
    "checklist:4": "The stuck watcher runs periodically",
    "checklist:5": "lease_owner is stored for diagnosis",
    "checklist:6": "attempts is incremented on every lease and persisted",
}
DEDUP_TAGS = {
    "dedup:marker-and-effect": (
        "The dedup marker and the DB effect commit (or roll back) in one transaction"
    ),
    "dedup:twice": "An event delivered twice: the stored effect happens once",
    "dedup:concurrent": "Two deliveries at once: the second marker insert waits, then skips",
    "dedup:crash-after-marker": (
        "A failure after the marker insert rolls back and leaves the event eligible"
    ),
    "dedup:payload-mismatch": "Same event id, other payload: rejected by a documented policy",
    "dedup:external-effects": (
        "A PSP charge is not atomic with the DB: idempotency key, outbox or reconciliation"
    ),
    "dedup:retention": "Keep dedup state at least as long as the redelivery window",
}

# Notebook 12's sources: Kleppmann's "How to do distributed locking", DDIA chapter 8, the Chubby
# paper, Fowler/Joshi's Lease, HeartBeat and Idempotent Receiver patterns.
CLOCKS_TAGS = {
    "clocks:efficiency-vs-correctness": (
        "A lock for efficiency may fail now and then; a lock for correctness needs fencing"
    ),
    "clocks:fencing-token": (
        "A fencing token protects only a store that checks it: the database "
        "can, a PSP needs an idempotency key"
    ),
    "clocks:sequencer-and-lock-delay": (
        "Chubby's sequencer is a fencing token; its lock-delay is a timing assumption: fewer late "
        "writes reach a store that cannot check, never none, and every recovery waits for it"
    ),
    "clocks:conservative-client-lease": (
        "A worker's own lease ends early by the round trip and the clock drift bound"
    ),
    "clocks:one-clock": (
        "Clocks drift and step; on one clock (the database's) workers' clocks cannot take a lease "
        "early, but a step of that clock moves every deadline at once"
    ),
}


def _notebooks_dir(directory: str | Path | None) -> Path:
    if directory is not None:
        return Path(directory)
    here = Path.cwd()
    if (here / "00-index.ipynb").exists():
        return here
    return Path(__file__).resolve().parents[2] / "notebooks"


def coverage(
    directory: str | Path | None = None, tags: Mapping[str, str] | None = None
) -> pd.DataFrame:
    """One row per (tag, cell) of the notebooks in `directory`: the notebook, the section (the
    nearest heading above the cell) and the cell's index. Tags missing from every notebook appear
    once with an empty notebook, so a gap is visible. `tags` defaults to REQUIRED_TAGS + DEDUP_TAGS
    + CLOCKS_TAGS."""
    wanted = dict(tags if tags is not None else {**REQUIRED_TAGS, **DEDUP_TAGS, **CLOCKS_TAGS})
    rows = []
    for path in sorted(_notebooks_dir(directory).glob("[0-9][0-9]-*.ipynb")):
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        section = ""
        for i, cell in enumerate(cells):
            source = "".join(cell.get("source", []))
            if cell["cell_type"] == "markdown":
                for line in source.splitlines():
                    if line.startswith("#"):
                        section = line.lstrip("#").strip()
            for tag in cell.get("metadata", {}).get("tags", []):
                if tag in wanted:
                    rows.append(
                        {
                            "tag": tag,
                            "meaning": wanted[tag],
                            "notebook": path.name,
                            "section": section,
                            "cell": i,
                            "cell_type": cell["cell_type"],
                        }
                    )
    frame = pd.DataFrame(
        rows, columns=["tag", "meaning", "notebook", "section", "cell", "cell_type"]
    )
    missing = [
        {"tag": t, "meaning": m, "notebook": "", "section": "", "cell": -1, "cell_type": ""}
        for t, m in wanted.items()
        if t not in set(frame["tag"])
    ]
    if missing:
        frame = pd.concat([frame, pd.DataFrame(missing)], ignore_index=True)
    order = {t: i for i, t in enumerate(wanted)}
    return frame.sort_values(
        ["tag", "notebook", "cell"], key=lambda s: s.map(order) if s.name == "tag" else s
    ).reset_index(drop=True)


def coverage_markdown(frame: pd.DataFrame) -> str:
    """coverage() as a Markdown table with a link to each notebook."""
    lines = ["| tag | what it means | shown in |", "|---|---|---|"]
    for tag, group in frame.groupby("tag", sort=False):
        places = dict.fromkeys((r.notebook, r.section) for r in group.itertuples())
        where = "; ".join(
            f"[{notebook}]({notebook}) ({section})" if notebook else "**not shown anywhere**"
            for notebook, section in places
        )
        lines.append(f"| `{tag}` | {group['meaning'].iloc[0]} | {where} |")
    return "\n".join(lines)
