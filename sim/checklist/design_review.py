"""Design review: the seed's lease checklist, plus fencing and idempotency, with measured evidence.

    from sim.checklist.design_review import review
    r = review("baseline")          # or a Scenario, with dotted overrides:
                                    # review("x", **{"policy.lease_ttl": 20})
    print(r)                        # item, status (pass / risk / fail / untested), evidence
    r.table                         # the same as a DataFrame, indexed by check key
    r.figure().savefig("review.png")

Every number in the evidence is measured on runs of the scenario (several seeds) and, where the
scenario alone cannot show a property, on a variant of it (named in the evidence):
- contention: 8+ workers on a 200-job batch, to exercise the claim;
- crashes: the owners of a few jobs crash mid-work (scripted by job), to exercise the watcher,
  attempts and recovery;
- zombie: the owners of a few jobs are paused long enough to lose their lease and then carry on
  (abandon_on_lost_lease off, random crashes off), to exercise completion fencing;
- duplicates: 20% of events delivered twice and a few crashes right after the PSP call, to
  exercise the dedup marker and the PSP idempotency key;
- no-heartbeat: the same runs without heartbeats, to show what the heartbeat prevents.
`Review.measured[key]` holds the numbers behind each evidence line; `Review.runs` and
`Review.variants` hold the runs themselves.

review(..., sql="myqueue/") reviews a user's own queue (sim.db.queue.directory) on PostgreSQL: the
same items and variants, and for the claim, fencing and watcher what its statements do, asked of the
server before the runs (sim.db.queue.sql_findings), put beside the runs that confirm or refute it
(`Review.findings`); a last item counts every invariant any run broke.

The items themselves, one module each with what it measures, are in sim.checklist.items; the runs
they share and the variants, in sim.checklist.evidence and sim.checklist.variants.
"""

from __future__ import annotations

import itertools
import textwrap
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from sim.checklist.evidence import Evidence
from sim.checklist.items import CHECKS, ITEMS
from sim.checklist.verdicts import FAIL, PASS, RISK, STATUS_STYLE, STATUSES, UNTESTED
from sim.db.queue.settings import describe
from sim.errors import ConfigError, expect_text
from sim.scenario import limits
from sim.scenario.settings import Scenario, prepared
from sim.support import output_paths
from sim.support.in_words import count, plural


@dataclass
class Review:
    scenario: Scenario
    seeds: tuple[int, ...]
    table: pd.DataFrame  # index: check key; columns: item, status, evidence
    measured: dict[str, dict[str, float]]
    runs: list = field(repr=False)
    variants: dict[str, list] = field(repr=False)  # variant name -> its runs (one per seed)
    queue: str | None = None  # the user's queue directory whose SQL was reviewed (on PostgreSQL)
    queue_settings: str = ""  # what its queue.toml sets, as it writes them
    findings: dict = field(default_factory=dict, repr=False)  # check key -> sql_findings.Finding

    @property
    def ok(self) -> bool:
        """No item failed (risks allowed)."""
        return not (self.table["status"] == FAIL).any()

    def counts(self) -> dict[str, int]:
        return {s: int((self.table["status"] == s).sum()) for s in STATUSES}

    def tally(self) -> str:
        """'6 pass, 1 risk, 0 fail, 2 untested'."""
        counts = self.counts()
        return ", ".join(f"{counts[s]} {s}" for s in STATUSES)

    def save_report(self, path, *, advice=None, hunt=None):
        """One self-contained HTML file: settings, verdicts with their evidence, the lease timeline
        (and the advice, and a hunt's shortest bad timelines (sim.hunt), if given);
        sim.checklist.report writes it."""
        from sim.checklist.report import review_report

        return review_report(self, path, advice=advice, hunt=hunt)

    def html_sections(self) -> str:
        """The review's part of an HTML page (verdicts, timeline, settings): the advice's page
        embeds it."""
        from sim.checklist.report import review_sections

        return review_sections(self)

    def save(self, directory: str | Path, *, overwrite: bool = False) -> list[Path]:
        """Write review.csv (the table), review.txt (as printed) and review.png (figure()) into
        `directory` (created if missing; one that holds files only with `overwrite`)."""
        out = output_paths.directory(directory, overwrite)
        written = [out / "review.csv", out / "review.txt", out / "review.png"]
        self.table.to_csv(written[0])
        written[1].write_text(str(self) + "\n", encoding="utf-8")
        self.figure().savefig(written[2], dpi=110)
        return written

    def header(self) -> str:
        s, p = self.scenario, self.scenario.policy
        beat = f"heartbeat every {p.heartbeat_interval:g} s" if p.heartbeat else "no heartbeat"
        watch = f"watcher every {p.watcher_interval:g} s" if p.watcher else "no watcher"
        seeds = ", ".join(map(str, self.seeds))
        runs = count(len(self.runs), "run")
        queue = f" on the queue in {self.queue} (PostgreSQL)" if self.queue else ""
        if self.queue_settings:
            queue = queue[:-1] + f"; its queue.toml sets {self.queue_settings})"
        return (
            f"Design review of {s.name}{queue}: {runs} ({plural(len(self.seeds), 'seed')} "
            f"{seeds}), {s.horizon:g} s each; {count(p.workers, 'worker')}, claim={p.claim}, TTL "
            f"{p.lease_ttl:g} s, {beat}, {watch}"
        )

    def __str__(self) -> str:
        lines = [self.header(), self.tally(), ""]
        for row in self.table.itertuples():
            lines.append(f"[{row.status.upper()}] {row.item}")
            lines.extend(
                textwrap.wrap(
                    row.evidence, 100, initial_indent="       ", subsequent_indent="       "
                )
            )
            lines.extend(
                textwrap.wrap(
                    f"basis: {row.basis}",
                    100,
                    initial_indent="       ",
                    subsequent_indent="       ",
                )
            )
        return "\n".join(lines)

    def figure(self, *, timeline: bool = True):
        """One page: the checklist with status badges, and a lease timeline of the first run."""
        from matplotlib.figure import Figure

        from sim.plots import auto_window, lease_timeline

        fig = Figure(figsize=(11.69, 8.27), layout="constrained")
        if timeline:
            grid = fig.add_gridspec(2, 1, height_ratios=[2.1, 1.0])
            table_ax = fig.add_subplot(grid[0])
        else:
            table_ax = fig.add_subplot()
        fig.suptitle(
            f"{chr(10).join(textwrap.wrap(self.header(), 140))}\n{self.tally()}; "
            "evidence measured on these runs and on the named variants",
            x=0.01,
            ha="left",
            fontsize=9.5,
        )
        _draw_table(table_ax, self.table)
        if timeline and self.runs:
            run, where = self.showcase()
            ax = fig.add_subplot(grid[1])
            lease_timeline(
                run, ax, window=auto_window(run), workers=min(run.scenario.policy.workers, 8)
            )
            ax.set_title(
                f"{ax.get_title(loc='left').splitlines()[0]}: {where}, seed {run.scenario.seed} "
                "(bars: leases, hatched by how they ended; x: crash; o: refused by fencing)",
                loc="left",
                fontsize=9,
            )
            legend = ax.get_legend()
            if legend is not None:  # the title says what the marks mean; the legend is too big
                legend.remove()
        return fig

    def showcase(self) -> tuple:
        """The run to draw: the first with trouble (crash, expiry, double claim, pause),
        preferring the scenario's own runs, then the zombie, crash and duplicates variants."""
        sources = [("the scenario", self.runs)] + [
            (f"{name} variant", self.variants.get(name, []))
            for name in ("zombie", "crashes", "duplicates")
        ]
        for where, runs in sources:
            for run in runs:
                troubled = run.leases["end_reason"].isin(["crashed", "expired", "revoked"]).any()
                if troubled or run.events["kind"].isin(["pause_start", "partition_start"]).any():
                    return run, where
        return self.runs[0], "the scenario"


def review(
    scenario: Scenario | str,
    *,
    seeds=(1, 2, 3),
    variants: bool = True,
    sql=None,
    dsn: str | None = None,
    **overrides,
) -> Review:
    """Run `scenario` for each seed (and its variants) and evaluate the checklist on what happened.

    sql: a queue directory (see sim.db.queue.directory): every run executes its statements on
    PostgreSQL (`dsn`, else the embedded server), and the claim, fencing and watcher items also
    say what the statements do, asked of the server, confirmed or refuted by the runs.
    """
    if sql is not None:
        from sim.db.queue.directory import loaded

        sql = loaded(sql)
    scenario, sql = prepared(scenario, overrides, queue=sql)
    if isinstance(seeds, str | bytes) or not isinstance(seeds, Iterable):
        raise ConfigError(
            f"seeds: expected a list of whole numbers, got {type(seeds).__name__} {seeds!r}"
        )
    seeds = tuple(
        itertools.islice(seeds, limits.MAX_RUNS + 1)
    )  # an endless iterator stops here too
    if len(seeds) > limits.MAX_RUNS:
        raise ConfigError(f"seeds: more than {limits.MAX_RUNS:,}, the limit of runs in one review")
    for i, s in enumerate(seeds):
        if isinstance(s, bool | np.bool_) or not isinstance(s, int | np.integer) or s < 0:
            raise ConfigError(
                f"seeds[{i}]: expected a whole number >= 0, got {type(s).__name__} {s!r}"
            )
    seeds = tuple(int(s) for s in seeds)
    expect_text("dsn", dsn, none_ok=True)
    if not isinstance(variants, bool):
        raise ConfigError(
            f"variants: expected True or False, got {type(variants).__name__} {variants!r}"
        )
    if not seeds:
        raise ConfigError("seeds: give at least one seed")
    on = {}
    if sql is not None:
        from sim.runner import checked_queue

        queue, dsn = checked_queue(
            sql, dsn, [scenario], memory=overrides.get("backend") == "memory"
        )
        on = {"sql": queue, "dsn": dsn}
    evidence = Evidence.gathered(scenario, seeds, variants, on)
    runs = evidence.runs
    rows, measured = [], {}
    for key, check in CHECKS.items():
        status, text, numbers = check(evidence)
        rows.append(
            {
                "check": key,
                "item": ITEMS[key],
                "status": status,
                "evidence": text,
                "basis": evidence.basis(key),
            }
        )
        measured[key] = numbers
    found = {}
    if on:
        from sim.db.queue.sql_findings import findings

        found = findings(on["sql"], scenario, on["dsn"])
        for row in rows:
            if row["check"] in found:
                row["status"], row["evidence"] = _weigh(
                    found[row["check"]], row["status"], row["evidence"], measured[row["check"]]
                )
    table = pd.DataFrame(rows).set_index("check")
    return Review(
        scenario,
        seeds,
        table,
        measured,
        runs,
        evidence.variants,
        queue=str(on["sql"].path) if on else None,
        queue_settings=describe(on["sql"].settings) if on else "",
        findings=found,
    )


def trouble(key: str, numbers: dict) -> int:
    """What the runs measured against an item the SQL speaks to: double claims by the claim
    (claim), completions by a non-owner and other late writes that broke an invariant (fencing),
    expired jobs never moved or stuck, finished jobs overwritten and live leases requeued by the
    watcher (watcher)."""
    if key == "claim":
        return int(numbers.get("double_claims", 0) + (numbers.get("variant_double_claims") or 0))
    if key == "fencing":
        return int(numbers.get("non_owner_completions", 0) + numbers.get("late_worker_writes", 0))
    return int(
        sum(
            numbers.get(k, 0)
            for k in (
                "stuck_processing",
                "never_moved",
                "watcher_overwrites",
                "watcher_double_claims",
            )
        )
    )


def _weigh(finding, status: str, evidence: str, numbers: dict) -> tuple[str, str]:
    """An item's status and evidence with the server's finding beside the runs: a flaw the probes
    show and the runs hit fails; one they did not hit stays a risk; statements that behaved in
    the probes but whose runs went wrong are refuted. The claim says which evidence decided."""
    bad = trouble(finding.item, numbers)
    numbers["sql_safe"] = finding.safe
    if finding.safe is None:
        verdict = "so the runs alone decide"
    elif not finding.safe and bad:
        verdict, status = "the runs confirm it", FAIL
    elif not finding.safe:
        verdict, status = "the runs did not hit it", RISK if status in (PASS, UNTESTED) else status
    elif bad:
        verdict = "the runs refute it"
    else:
        verdict = "the runs confirm it" if status == PASS else "the runs do not contradict it"
    decided = _decided(finding, numbers, bad) if finding.item == "claim" else ""
    return status, f"SQL, asked of the server: {finding.text}; {verdict}.{decided} Runs: {evidence}"


def _decided(finding, numbers: dict, bad: int) -> str:
    """Which evidence decided the claim: a probe shows a race outright; a claim that passed them
    (one statement, or data-changing steps) is judged by what it did under contention."""
    if finding.safe is False:
        return " Decided by the server probe" + (", and the runs' double claims." if bad else ".")
    leases = numbers.get("variant_leases")
    if leases is None:
        return (
            f" Decided by the scenario's runs ({count(numbers['double_claims'], 'double claim')} "
            f"in {count(numbers['leases'], 'lease')}); no contention variant ran."
        )
    return (
        " Decided by the runs under contention: "
        f"{count(numbers['variant_double_claims'], 'double claim')} in {count(leases, 'lease')} "
        f"(8+ workers on 200 jobs at once), {count(numbers['double_claims'], 'double claim')} in "
        f"the scenario's {count(numbers['leases'], 'lease')}."
    )


# ---- the figure's table --------------------------------------------------------------------------


def _draw_table(ax, table: pd.DataFrame) -> None:
    """Rows of: status badge (colour, symbol and word), item, evidence; wrapped to fit."""
    from matplotlib.patches import FancyBboxPatch, Rectangle

    ax.set_axis_off()
    rows = []
    for key, row in table.iterrows():
        item = textwrap.wrap(row["item"], 34)
        evidence = textwrap.wrap(row["evidence"], 112)
        rows.append((key, row["status"], item, evidence, max(len(item), len(evidence))))
    total = sum(n for *_, n in rows) + 0.9 * len(rows) + 1.2
    ax.set_xlim(0, 1)
    ax.set_ylim(total, 0)
    y = 0.0
    for x, text in (
        (0.005, "status"),
        (0.095, "checklist item"),
        (0.355, "evidence measured by simulation"),
    ):
        ax.text(x, y + 0.5, text, fontsize=8, fontweight="bold", va="center", color="#222222")
    y = 1.2
    for i, (_key, status, item, evidence, n) in enumerate(rows):
        height = n + 0.9
        if i % 2 == 0:
            ax.add_patch(Rectangle((0, y), 1, height, facecolor="#f3f3f3", lw=0, zorder=0))
        symbol, face, ink = STATUS_STYLE[status]
        ax.add_patch(
            FancyBboxPatch(
                (0.008, y + 0.2),
                0.075,
                min(height - 0.4, 1.5),
                boxstyle="round,pad=0,rounding_size=0.004",
                facecolor=face,
                edgecolor="#222222",
                lw=0.8,
                zorder=2,
                gid=f"status-{status}",
                mutation_aspect=1 / 40,
            )
        )
        ax.text(
            0.0455,
            y + 0.2 + min(height - 0.4, 1.5) / 2,
            f"{symbol} {status.upper()}",
            ha="center",
            va="center",
            fontsize=8.5,
            fontweight="bold",
            color=ink,
            zorder=3,
            gid="status-text",
        )
        ax.text(
            0.095,
            y + 0.45,
            "\n".join(item),
            va="top",
            fontsize=8,
            color="#222222",
            linespacing=1.25,
            gid="item",
        )
        ax.text(
            0.355,
            y + 0.45,
            "\n".join(evidence),
            va="top",
            fontsize=7.6,
            color="#222222",
            linespacing=1.25,
            gid="evidence",
            family="DejaVu Sans",
        )
        y += height
