"""The design review's checklist items, each measured on runs: what every item checks, the
numbers behind its evidence, and the variants (contention, crashes, zombie, duplicates,
no-heartbeat) run when the scenario alone cannot exercise an item. sim.review puts them together.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from sim.checklist.processing_times import processing_times
from sim.invariants import deleted_jobs, keeps_attempts
from sim.model.events import STATUS_MOVES
from sim.results import owner_crashes
from sim.scenario.dists import Dist
from sim.scenario.settings import (
    INVARIANTS,
    CrashPoint,
    Scenario,
    ScriptedCrash,
    ScriptedOutage,
    recovery_allowance,
)
from sim.support.in_words import count, duration, percent, plural
from sim.theory.stats import wilson_interval

PASS, FAIL, RISK, UNTESTED = "pass", "fail", "risk", "untested"
STATUSES = (PASS, RISK, FAIL, UNTESTED)
# status -> (symbol, face colour, text colour): Okabe-Ito, symbol and word for greyscale
STATUS_STYLE = {
    PASS: ("\u2713", "#009E73", "white"),
    RISK: ("!", "#E69F00", "black"),
    FAIL: ("\u2717", "#D55E00", "white"),
    UNTESTED: ("?", "#FFFFFF", "black"),  # not exercised: neither a pass nor a failure
}
ITEMS = {  # check key -> checklist item (1-6 are the seed's checklist)
    "claim": "1. The claim is one atomic UPDATE ... WHERE, not read-then-write",
    "ttl": "2. The lease TTL really exceeds the longest expected processing (with a heartbeat: the "
    "longest stall between renewals)",
    "heartbeat": "3. A heartbeat renews the lease of long jobs",
    "watcher": "4. A watcher runs periodically: expired jobs do not stay Processing",
    "owner": "5. lease_owner is stored",
    "attempts": "6. attempts is incremented on every lease and persisted",
    "fencing": "Completion is fenced by owner + attempt",
    "dedup": "The DB effect is deduplicated (marker and effect in one transaction)",
    "psp": "The PSP call is idempotent (idempotency key)",
    "invariants": "No run breaks an invariant (every violation sim.check finds, counted)",
}
CLAIMS = {
    "conditional_update": "one conditional UPDATE ... WHERE ... RETURNING",
    "skip_locked": "one UPDATE ... FROM (SELECT ... FOR UPDATE SKIP LOCKED)",
    "select_for_update": "SELECT ... FOR UPDATE, then UPDATE, in one transaction",
    "read_then_write": "SELECT, then an unconditional UPDATE",
}
# ---- measurements --------------------------------------------------------------------------------


def refused_effects(runs) -> int:
    """Completions refused after their worker's effect had committed (policy.completion =
    background): an effect record, then a refused completion, of the same lease."""
    total = 0
    for r in runs:
        events = r.events
        lease = ["worker", "job", "attempt"]
        effects = events[events["kind"] == "effect"][lease].drop_duplicates()
        refused = events[events["kind"] == "complete_rejected"][lease]
        total += len(refused.merge(effects, on=lease))
    return total


def leased_jobs(run) -> int:
    return int(run.leases["job"].nunique())


def double_processed(run) -> int:
    """Jobs whose lease expired under a live owner and that another lease then took."""
    leases = run.leases
    per_job = leases.groupby("job").size()
    expired = leases.loc[leases["false_expiry"], "job"].unique()
    return int(sum(per_job.get(j, 0) > 1 for j in expired))


def charged_payments(run) -> tuple[int, int]:
    """(payments the PSP charged, of which charged more than once)."""
    events = run.events
    charges = events[(events["kind"] == "psp_charge") & (events["detail"] == "new")]
    per_event = charges.merge(run.jobs[["job", "event_id"]], on="job").groupby("event_id").size()
    return len(per_event), int((per_event > 1).sum())


def owner_mismatches(run) -> tuple[int, int]:
    """(leased jobs the final table holds, of which the table's lease_owner is empty or not the last
    claimer in the log); jobs deleted once finished are not counted."""
    claims = run.events[run.events["kind"] == "claim"]
    last = claims.groupby("job")["worker"].last()
    last = last[~last.index.isin(deleted_jobs(run))]
    owners = run.table_jobs.set_index("id")["lease_owner"]
    stored = owners.reindex(last.index)
    bad = stored.isna() | (stored != last)
    return len(last), int(bad.sum())


def attempt_mismatches(run) -> tuple[int, int, int, int]:
    """(jobs, jobs whose attempts != leases in the log or whose claims were not numbered 1, 2, ...,
    jobs leased more than once, largest attempts)."""
    claims = run.events[run.events["kind"] == "claim"]
    leases = claims.groupby("job").size()
    sequential = claims.groupby("job")["attempt"].apply(
        lambda a: list(a) == list(range(1, len(a) + 1))
    )
    table = run.table_jobs.set_index("id")["attempts"]
    expected = leases.reindex(table.index, fill_value=0)
    bad = (table != expected) | ~sequential.reindex(table.index, fill_value=True)
    return (
        len(table),
        int(bad.sum()),
        int((leases > 1).sum()),
        int(table.max()) if len(table) else 0,
    )


def _basis(name: str | None, runs) -> str:
    """'baseline: seeds 1, 2, 3; 1234 leases observed; simulated t = 0-600 s each'."""
    seeds = ", ".join(str(r.scenario.seed) for r in runs)
    horizons = sorted({float(r.scenario.horizon) for r in runs})
    interval = (
        f"t = 0-{horizons[0]:.5g} s each"
        if len(horizons) == 1
        else f"t = 0-{horizons[0]:.5g} s to 0-{horizons[-1]:.5g} s"
    )
    head = f"{name}: " if name else ""
    return (
        f"{head}{plural(len(runs), 'seed')} {seeds}; {count(_total(runs, 'leases'), 'lease')} "
        f"observed; simulated {interval}"
    )


def renewal_count(run) -> int:
    """Heartbeats that renewed a lease: from the log, or (heartbeat records off) the heartbeat
    statements the database ran minus those it rejected."""
    kinds = run.events["kind"]
    if run.scenario.record_heartbeats:
        return int((kinds == "heartbeat").sum())
    return int(run.statement_counts.get("heartbeat", 0)) - int(
        (kinds == "heartbeat_rejected").sum()
    )


def stall_durations(runs) -> np.ndarray:
    """Durations of every pause and worker-DB partition that happened in the runs (seconds)."""
    values: list[float] = []
    for r in runs:
        events = r.events
        starts = events[events["kind"].isin(["pause_start", "partition_start"])]
        values.extend(float(d) for d in starts["detail"] if d is not None and np.isfinite(float(d)))
    return np.asarray(values, dtype=float)


def _longest(m) -> str:
    """'took 30 s', or 'ran at least 30 s' when the longest work seen was cut off."""
    words = duration(m["max_processing"])
    return f"took {words}" if m["longest_finished"] else f"ran at least {words}"


def _deleted(n: int) -> str:
    """The note for jobs a queue deleted once finished (not in the final table to be judged)."""
    return (
        f" ({count(n, 'finished job')} deleted from the table by the queue, not judged)"
        if n
        else ""
    )


def _total(runs, key: str) -> int:
    return int(sum(int(r.summary[key]) for r in runs))


class Checker:
    """Evaluates each item on the runs; builds (and caches) the variants it needs."""

    def __init__(
        self, scenario: Scenario, runs: list, allow_variants: bool, on: dict | None = None
    ):
        self.scenario = scenario
        self.on = on or {}  # sql= and dsn= for every run: the user's queue on PostgreSQL
        self.policy = scenario.policy
        self.runs = runs
        self.allow_variants = allow_variants
        self.variants: dict[str, list] = {}
        self.n = len(runs)
        self.used: dict[str, list[str]] = {}  # item -> names of the variants its evidence also used
        self._reports: dict[int, object] = {}  # id(run) -> its sim.check report, checked once

    def report(self, run):
        """The run's invariant report (sim.check), computed once per run."""
        found = self._reports.get(id(run))
        if found is None:
            found = self._reports[id(run)] = run.check()
        return found

    def caused(self, runs, invariant: str, *causes: str) -> int:
        """Violations of `invariant` in `runs` whose breaking write was one of `causes`' (the
        claim, the watcher, a worker's late write: sim.invariants.Violation.cause)."""
        return sum(
            v.invariant == invariant and v.cause in causes
            for r in runs
            for v in self.report(r).violations
        )

    def basis(self, key: str) -> str:
        """What an item's verdict rests on: scenario (and variants), seeds, leases observed,
        interval."""
        parts = [_basis(self.scenario.name, self.runs)]
        for name in self.used.get(key, []):
            runs = self.variants.get(name) or []
            if runs:
                parts.append(f"{name} variant ({runs[0].scenario.name}): " + _basis(None, runs))
        return "; ".join(parts)

    def _use(self, key: str, *names: str) -> None:
        self.used.setdefault(key, []).extend(n for n in names if self.variants.get(n))

    @property
    def n_runs(self) -> str:
        return count(self.n, "run")

    # -- variants --------------------------------------------------------------------------------

    def variant(self, name: str) -> list:
        """The runs of a variant, one per seed (built on first use); [] if variants are off."""
        if not self.allow_variants:
            return []
        if name not in self.variants:
            from sim.runner import run

            self.variants[name] = [
                r
                for r in (self._variant_scenario(name, base) for base in self.runs)
                if r is not None
            ]
            self.variants[name] = [run(s, seed=s.seed, **self.on) for s in self.variants[name]]
        return self.variants[name]

    def _variant_scenario(self, name: str, base) -> Scenario | None:
        s, p, f, w = self.scenario, self.policy, self.scenario.faults, self.scenario.workload
        s = s.replace(seed=base.scenario.seed)
        if name == "contention":
            if p.workers >= 8 and w.arrival == "batch" and w.jobs >= 200:
                return None  # the scenario is already that contended
            return s.with_overrides(
                {
                    "name": f"{s.name}+contention",
                    "policy.workers": max(8, p.workers),
                    "workload.arrival": "batch",
                    "workload.jobs": 200,
                    "horizon": min(s.horizon, 120.0),
                }
            )
        if name == "no-heartbeat":
            return s.with_overrides({"name": f"{s.name}+no-heartbeat", "policy.heartbeat": False})
        leases = base.leases
        done = leases[leases["outcome"] == "completed"].sort_values("start")
        margin = (
            p.lease_ttl + (p.watcher_interval if p.watcher else 0.0) + 2 * p.poll_interval + 5.0
        )
        if name == "crashes":
            pick = self._spread(done[done["start"] + margin < s.horizon * 0.9], 3)
            crashes = tuple(
                ScriptedCrash(at=float((row.start + row.released_at) / 2), job=int(row.job))
                for row in pick.itertuples()
            )
            if not crashes:
                return None
            return s.replace(
                name=f"{s.name}+crashes", faults=dataclasses.replace(f, crashes=f.crashes + crashes)
            )
        if name == "zombie":
            if p.workers < 2:
                return None
            pause = margin + 5.0
            pick = self._spread(done[done["start"] + pause + margin < s.horizon * 0.9], 2)
            pauses = tuple(
                ScriptedOutage(
                    worker=int(str(row.worker).lstrip("w")),
                    at=float((row.start + row.released_at) / 2),
                    duration=pause,
                )
                for row in pick.itertuples()
            )
            if not pauses:
                return None
            return s.replace(
                name=f"{s.name}+zombie",
                faults=dataclasses.replace(f, pauses=f.pauses + pauses, crash_rate=0.0),
                policy=dataclasses.replace(p, abandon_on_lost_lease=False),
            )
        if name == "duplicates":
            points = tuple(cp for cp in f.crash_points if cp.point != "after_psp") + (
                CrashPoint(point="after_psp", probability=0.5, limit=3),
            )
            workload = (
                w
                if w.duplicate_delivery >= 0.2
                else dataclasses.replace(
                    w,
                    duplicate_delivery=0.2,
                    redelivery_delay=w.redelivery_delay
                    if w.redelivery_delay.mean_value() > 0
                    else Dist.exponential(2.0),
                )
            )
            return s.replace(
                name=f"{s.name}+duplicates",
                workload=workload,
                faults=dataclasses.replace(f, crash_points=points),
            )
        raise ValueError(name)

    @staticmethod
    def _spread(frame: pd.DataFrame, k: int) -> pd.DataFrame:
        """k rows spread over the frame (at its 1/(k+1), 2/(k+1), ... positions)."""
        if frame.empty:
            return frame
        positions = sorted(
            {min(len(frame) - 1, int(len(frame) * (i + 1) / (k + 1))) for i in range(k)}
        )
        return frame.iloc[positions]

    # -- items -----------------------------------------------------------------------------------

    @staticmethod
    def _guarded(text: str, bad: int, exercised: int, unexercised: str):
        """An item whose guard is on: FAIL on any bad count, else PASS if exercised, else
        UNTESTED."""
        if bad:
            return FAIL, text + "."
        return (PASS, text + ".") if exercised else (UNTESTED, f"{text}: {unexercised}.")

    def claim(self):
        p = self.policy
        doubles, leases = (
            self.caused(self.runs, "double_claim", "claim"),
            _total(self.runs, "leases"),
        )
        handed = self.caused(self.runs, "double_claim", "watcher", "worker")
        numbers = {"double_claims": doubles, "leases": leases}
        how = "the queue's statements" if self.on else CLAIMS[p.claim]
        text = (
            f"{p.claim} ({how}): {count(doubles, 'double claim')} in {count(leases, 'lease')} over "
            f"{self.n_runs}"
        )
        if doubles:
            text += f" ({percent(doubles / leases)} of leases)"
        contention = self.variant("contention")
        self._use("claim", "contention")
        if contention:
            vd, vl = self.caused(contention, "double_claim", "claim"), _total(contention, "leases")
            handed += self.caused(contention, "double_claim", "watcher", "worker")
            numbers.update(variant_double_claims=vd, variant_leases=vl)
            workers = contention[0].scenario.policy.workers
            text += (
                f"; under contention ({count(workers, 'worker')}, 200 jobs at once): "
                f"{count(vd, 'double claim')} in {count(vl, 'lease')}"
                + (f" ({percent(vd / vl)})" if vd else "")
            )
        numbers["handed_double_claims"] = handed
        if handed:
            text += (
                f" ({count(handed, 'other double claim')} took a job that a watcher's or a late "
                "worker's write had made Pending while its lease ran: items 4 and fencing)"
            )
        if p.claim == "read_then_write" and not self.on:
            return FAIL, text + ". Two workers can read the same Pending row and both win.", numbers
        if (doubles or numbers.get("variant_double_claims", 0)) and self.on:
            return FAIL, text + ": two workers held one job at once.", numbers
        if doubles or numbers.get("variant_double_claims", 0):
            cause = (
                " (worker clocks are skewed: policy.clock = worker)" if p.clock == "worker" else ""
            )
            return (
                RISK,
                text + f"{cause}: the claim is atomic, yet two workers held one job at once.",
                numbers,
            )
        return PASS, text + ".", numbers

    def _ttl_numbers(self):
        """The TTL against the processing times (finished work observed, cut-off work censored:
        sim.checklist.processing_times), and what the leases show."""
        ttl = self.policy.lease_ttl
        times = self._times = processing_times(self.runs)
        p999 = times.quantile(0.999)
        jobs = sum(leased_jobs(r) for r in self.runs)
        twice = sum(double_processed(r) for r in self.runs)
        renewals = sum(renewal_count(r) for r in self.runs)
        interval = self.policy.heartbeat_interval if self.policy.heartbeat else np.inf
        return {
            "lease_ttl": ttl,
            "p999_processing": np.nan if p999 is None else p999,
            "max_processing": times.longest,
            "longest_finished": bool(len(times)) and times.longest in times.times[times.finished],
            "finished_jobs": times.n_finished,
            "cut_off_jobs": times.n_cut,
            "renewals": renewals,
            "jobs_over_interval": int((times.times > interval).sum()),
            "over_ttl_share": times.share_longer(ttl),
            "false_expiries": _total(self.runs, "false_expiries"),
            "leases": _total(self.runs, "leases"),
            "jobs": jobs,
            "double_processed_jobs": twice,
            "double_processed_share": twice / jobs if jobs else np.nan,
        }

    def _stall_tail(self) -> tuple[float, str] | None:
        """The longest stall between renewals the scenario declares: (seconds, words); None if
        none."""
        f = self.scenario.faults
        tails = []
        if f.pause_rate > 0:
            tails.append((f.pause_duration.quantile(0.99), "pause p99"))
        if f.pauses:
            tails.append((max(o.duration for o in f.pauses), "longest scripted pause"))
        if f.partition_rate > 0:
            tails.append((f.partition_duration.quantile(0.99), "partition p99"))
        if f.partitions:
            tails.append((max(o.duration for o in f.partitions), "longest scripted partition"))
        if f.heartbeat_delay.quantile(0.99) > 0:
            tails.append((f.heartbeat_delay.quantile(0.99), "heartbeat delay p99"))
        if not tails:
            return None
        value, words = max(tails)
        return float(value), f"{words} {duration(value)}"

    def ttl(self):
        p, m = self.policy, self._ttl_numbers()
        ttl, p999, fe, leases = (
            m["lease_ttl"],
            m["p999_processing"],
            m["false_expiries"],
            m["leases"],
        )
        self._use("ttl")
        low, high = wilson_interval(fe, leases, 0.95)  # NaN, NaN without leases
        m.update(false_expiry_ci_low=low, false_expiry_ci_high=high)
        lost = (
            f"{fe} of {leases} leases expired under a live owner (95% interval {percent(low)} to "
            f"{percent(high)}); {m['double_processed_jobs']} of {m['jobs']} leased jobs "
            f"({percent(m['double_processed_share'])}) were processed twice"
        )
        processing = (
            f"{self._p999_words(m)}: {percent(m['over_ttl_share'])} of jobs outlived the TTL"
        )
        untested = self._ttl_untested(m, processing, lost)
        if untested:
            return UNTESTED, untested, m
        stalls = stall_durations(self.runs)
        m.update(
            stalls_observed=len(stalls),
            longest_stall=float(stalls.max()) if len(stalls) else np.nan,
        )
        seen = f"{count(len(stalls), 'pause or partition', 'pauses or partitions')} in the runs" + (
            f", the longest {duration(stalls.max())}" if len(stalls) else ""
        )
        tail = self._stall_tail()
        if not p.heartbeat:
            known = np.isfinite(p999)
            cmp = "<" if not known or p999 > ttl else "=" if p999 == ttl else ">"
            head = f"no heartbeat: TTL {ttl:g} s {cmp} {processing}"
            if fe or m["over_ttl_share"] > 0:
                return FAIL, f"{head}; {lost}.", m
            if p999 > 0.8 * ttl:
                return (
                    RISK,
                    (
                        f"{head}; {lost}, but the TTL leaves under 25% margin over p99.9 and "
                        "nothing renews a slow job."
                    ),
                    m,
                )
            if tail is not None and p999 + tail[0] > ttl:
                return (
                    RISK,
                    (
                        f"{head}; {lost}, but p99.9 processing plus the {tail[1]} "
                        f"({duration(p999 + tail[0])}) outlasts the TTL; {seen}."
                    ),
                    m,
                )
            return PASS, f"{head}; {lost}; {seen}.", m
        h = p.heartbeat_interval
        latency = float(self.scenario.workload.statement_latency.quantile(0.99))
        slack = ttl - h - latency
        m.update(
            slack=slack,
            statement_latency_p99=latency,
            declared_stall_tail=tail[0] if tail else np.nan,
        )
        head = (
            f"heartbeat every {h:g} s: TTL {ttl:g} s - {h:g} s - statement latency p99 "
            f"{duration(latency)} = {duration(slack)} of slack between renewals"
        )
        kept = f"{processing}, kept alive by {count(m['renewals'], 'renewal')}"
        if h >= ttl:
            return (
                FAIL,
                f"heartbeat every {h:g} s >= TTL {ttl:g} s: leases lapse between renewals; {lost}.",
                m,
            )
        if fe:
            against = f" against the {tail[1]}" if tail else ""
            return FAIL, f"{head}{against}: stalls outlasted it; {lost}; {seen}; {kept}.", m
        if tail is None:
            return (
                UNTESTED,
                (
                    f"{head}; no pause, partition or heartbeat delay was declared or observed, so "
                    f"it was never tested; {lost}; {kept}."
                ),
                m,
            )
        if slack <= tail[0]:
            return (
                RISK,
                (
                    f"{head} {'<' if slack < tail[0] else '='} the {tail[1]}: such a stall lapses "
                    f"the lease under a live owner; {lost} ({seen}); {kept}."
                ),
                m,
            )
        return PASS, f"{head} > the {tail[1]}; {lost} ({seen}); {kept}.", m

    def _ttl_untested(self, m, processing: str, lost: str) -> str | None:
        """Item 2's evidence when the runs cannot judge the TTL (no job leased, or a tail the
        estimate never reaches with nothing outliving the TTL); else None."""
        if not len(self._times):
            return f"no job was leased in {self.n_runs}: processing time not measured."
        if np.isfinite(m["p999_processing"]) or m["false_expiries"] or m["over_ttl_share"] > 0:
            return None
        return (
            f"{processing}, so whether the {m['lease_ttl']:g} s TTL covers the tail is not "
            f"measured; {lost}."
        )

    @staticmethod
    def _p999_words(m) -> str:
        """'p99.9 processing 12 s (max 30 s, 47 jobs finished)', or with work cut off (a
        deadline, a crash, a lost lease): the Kaplan-Meier estimate and what it rests on."""
        p999, longest = m["p999_processing"], m["max_processing"]
        jobs, cut = m["finished_jobs"] + m["cut_off_jobs"], m["cut_off_jobs"]
        if not cut:
            return (
                f"p99.9 processing {duration(p999)} (max {duration(longest)}, "
                f"{m['finished_jobs']} jobs finished)"
            )
        basis = (
            f"Kaplan-Meier over {count(jobs, 'job')}: {m['finished_jobs']} finished, {cut} cut off "
            "before the end of their work, which ran at least as long"
        )
        if np.isfinite(p999):
            return f"p99.9 processing {duration(p999)} ({basis}; the longest {_longest(m)})"
        return (
            f"p99.9 processing beyond {duration(longest)}, where the estimate stops ({basis}; "
            f"the longest {_longest(m)})"
        )

    def heartbeat(self):
        p, m = self.policy, self._ttl_numbers()
        ttl = p.lease_ttl
        beats = m["renewals"]
        self._use("heartbeat")
        if not p.heartbeat:
            if m["over_ttl_share"] > 0 or m["false_expiries"]:
                return (
                    FAIL,
                    (
                        f"no heartbeat: {percent(m['over_ttl_share'])} of jobs outlived the "
                        f"{ttl:g} s TTL; {count(m['false_expiries'], 'lease')} expired under a "
                        f"live owner and {m['double_processed_jobs']} of {m['jobs']} leased jobs "
                        f"({percent(m['double_processed_share'])}) were processed twice."
                    ),
                    m,
                )
            if not np.isfinite(m["max_processing"]):
                return (
                    UNTESTED,
                    f"no heartbeat, and no job was leased in {self.n_runs}: job length not "
                    "measured.",
                    m,
                )
            if m["max_processing"] > ttl / 2:
                return (
                    RISK,
                    (
                        f"no heartbeat: the longest job {_longest(m)}, over half the {ttl:g} s "
                        "TTL; nothing renews a slow one."
                    ),
                    m,
                )
            if not np.isfinite(m["p999_processing"]):
                return (
                    UNTESTED,
                    f"no heartbeat, and the jobs' length is not measured: {self._p999_words(m)}.",
                    m,
                )
            return (
                PASS,
                (
                    "no heartbeat, and no long job to renew: the longest took "
                    f"{duration(m['max_processing'])}, at most half the {ttl:g} s TTL."
                ),
                m,
            )
        h = p.heartbeat_interval
        long_jobs = m["jobs_over_interval"]
        text = (
            f"heartbeat every {h:g} s (TTL {ttl:g} s): {count(beats, 'renewal')} in {self.n_runs} "
            f"for {count(long_jobs, 'job')} that ran longer than the interval; "
            f"{count(m['false_expiries'], 'false expiry', 'false expiries')}"
        )
        if long_jobs == 0:
            status, tail = (
                UNTESTED,
                "; no job ran longer than the interval, so renewal was not exercised",
            )
        elif beats == 0:
            status, tail = FAIL, "; no renewal reached the database"
        elif h >= ttl / 2:
            status, tail = (
                RISK,
                "; the interval is at least half the TTL: one late heartbeat loses the lease",
            )
        elif m["false_expiries"]:
            status, tail = (
                RISK,
                "; leases lapsed despite the renewals (stalls between them: see item 2)",
            )
        else:
            status, tail = PASS, ""
        text += tail
        without = self.variant("no-heartbeat")
        if without:
            self._use("heartbeat", "no-heartbeat")
            fe = _total(without, "false_expiries")
            leases = _total(without, "leases")
            jobs = sum(leased_jobs(r) for r in without)
            twice = sum(double_processed(r) for r in without)
            m.update(
                variant_false_expiries=fe,
                variant_leases=leases,
                variant_jobs=jobs,
                variant_double_processed_jobs=twice,
            )
            text += (
                f"; without it (variant): {count(fe, 'lease')} "
                f"({percent(fe / leases if leases else np.nan)}) would expire under a live owner "
                f"and {twice} of {jobs} leased jobs ({percent(twice / jobs if jobs else np.nan)}) "
                "would be processed twice"
            )
        return status, text + ".", m

    def watcher(self):
        p = self.policy
        runs = self.runs
        used = runs
        expired = sum(self._expired(r) for r in runs)
        variant = ""
        if not expired:
            crashed = self.variant("crashes")
            if crashed:
                used = crashed
                expired = sum(self._expired(r) for r in crashed)
                owners = sum(len(owner_crashes(r)) for r in crashed)
                variant = f" (crash variant: {owners} job owners crashed mid-work)"
                self._use("watcher", "crashes")
        pairs = [self._requeue_waits(r) for r in used]
        waits = np.concatenate([w for w, _ in pairs]) if pairs else np.array([])
        how = [kind for _, kinds in pairs for kind in kinds]
        by_watcher, by_claim = how.count("requeue"), how.count("claim")
        stuck = sum(self.report(r).counts().get("stuck_processing", 0) for r in used)
        never = int(np.isnan(waits).sum()) if len(waits) else 0
        seen = runs if used is runs else runs + used
        overwrote = self.caused(seen, "terminal_overwritten", "watcher")
        handed = self.caused(seen + self.variants.get("contention", []), "double_claim", "watcher")
        ticks = [r.events.loc[r.events["kind"] == "watcher_tick", "t"].to_numpy() for r in runs]
        n_ticks = sum(len(t) for t in ticks)
        gap = max((float(np.diff(t).max()) for t in ticks if len(t) > 1), default=np.nan)
        worst = float(np.nanmax(waits)) if len(waits) and np.isfinite(waits).any() else np.nan
        dead = sum(
            int(((r.events["kind"] == "requeue") & (r.events["detail"] == "Dead")).sum())
            for r in used
        )
        recovery = (
            np.concatenate([owner_crashes(r)["latency"].to_numpy(float) for r in used])
            if used
            else np.array([])
        )
        recovered = recovery[np.isfinite(recovery)]
        m = {
            "watcher_ticks": n_ticks,
            "largest_tick_gap": gap,
            "expired_leases": expired,
            "never_moved": never,
            "max_wait_after_expiry": worst,
            "stuck_processing": stuck,
            "watcher_dead": dead,
            "moved_by_watcher": by_watcher,
            "moved_by_claim": by_claim,
            "owner_crashes": len(recovery),
            "recovery_latency_mean": float(recovered.mean()) if len(recovered) else np.nan,
            "recovery_latency_max": float(recovered.max()) if len(recovered) else np.nan,
            "watcher_overwrites": overwrote,
            "watcher_double_claims": handed,
        }
        harm = "; ".join(
            text
            for n, text in (
                (
                    overwrote,
                    f"its write overwrote {count(overwrote, 'finished job')} "
                    "(terminal_overwritten: made Pending or Dead after Completed or Dead)",
                ),
                (
                    handed,
                    f"it made {count(handed, 'job')} Pending while a live lease held it, and a "
                    "second worker took it (double_claim)",
                ),
            )
            if n
        )
        given_back = how.count("deadline") + how.count("release")
        finished = len(how) - by_watcher - by_claim - given_back
        back = (
            f", {given_back} given back by their owner (failed at its deadline, or released)"
            if given_back
            else ""
        )
        moved = (
            f"{expired - never} of {expired} expired leases{variant} moved out of Processing "
            f"({by_watcher} by the watcher, {by_claim} taken by a claim{back}, {finished} finished "
            "by their owner)"
            if expired
            else f"no lease expired{variant}"
        )
        if expired and expired > never:
            moved += f", at most {duration(worst)} after expiry"
        if len(recovery):
            moved += f"; {len(recovered)} of {len(recovery)} crashed owners' jobs claimed again"
            if len(recovered):
                moved += (
                    f", {duration(m['recovery_latency_mean'])} after the crash on average "
                    f"(max {duration(m['recovery_latency_max'])})"
                )
        if p.watcher:
            head = (
                f"watcher every {p.watcher_interval:g} s: {count(n_ticks, 'tick')} in "
                f"{self.n_runs}, largest gap {duration(gap)}"
            )
            if p.watcher_action == "dead":
                return (
                    RISK,
                    f"{head}; it marks every expired job Dead instead of retrying: "
                    f"{count(dead, 'job')} failed; {moved}.",
                    m,
                )
            if stuck or never or harm:
                harm = f"; {harm}" if harm else ""
                return (
                    FAIL,
                    f"{head}; {moved}; {count(stuck, 'stuck_processing violation')}{harm}.",
                    m,
                )
            status = PASS if expired else UNTESTED
            tail = "" if expired else ": recovery not exercised"
            return status, f"{head}; {moved}{tail}; 0 stuck.", m
        if p.claim_takes_expired:
            head = "no watcher: the claim itself takes expired leases"
            if stuck or never:
                return (
                    RISK,
                    f"{head}; {moved}; {count(stuck, 'stuck_processing violation')} (no idle "
                    "worker to take them).",
                    m,
                )
            if not expired:
                return UNTESTED, f"{head}; {moved}: recovery not exercised; 0 stuck.", m
            return PASS, f"{head}; {moved}; 0 stuck.", m
        why = "" if never else ", but nothing would move an expired lease out of Processing"
        return (
            FAIL,
            f"no watcher and the claim skips expired leases: {moved}; {count(never, 'job')} stayed "
            f"Processing{why}.",
            m,
        )

    def _expired(self, run) -> int:
        """Leases that ran out without being finished, early enough for recovery to fit in the
        horizon."""
        leases = run.leases
        late = run.scenario.horizon - recovery_allowance(run.scenario)
        return int(
            (leases["end_reason"].isin(["crashed", "expired"]) & (leases["until"] < late)).sum()
        )

    @staticmethod
    def _requeue_waits(run) -> tuple[np.ndarray, list[str]]:
        """Per expired lease: lease end -> the job left Processing (requeued, released or failed by
        a deadline, re-claimed or done), NaN if never; and the kind of record that moved it."""
        leases = run.leases
        late = run.scenario.horizon - recovery_allowance(run.scenario)
        ended = leases[leases["end_reason"].isin(["crashed", "expired"]) & (leases["until"] < late)]
        events = run.events
        kinds = events["kind"]
        moved = kinds.isin(["claim", "complete", "payload_conflict"]) | (
            kinds.isin(STATUS_MOVES) & events["detail"].notna()  # a move that found no row: none
        )
        moves = events[moved]
        by_job = {job: (g["t"].to_numpy(), g["kind"].to_numpy()) for job, g in moves.groupby("job")}
        waits, how = [], []
        for lease in ended.itertuples():
            t, kinds = by_job.get(lease.job, (np.array([]), np.array([])))
            later = np.flatnonzero(t > lease.start)
            if len(later):
                waits.append(max(0.0, t[later[0]] - lease.until))
                how.append(str(kinds[later[0]]))
            else:
                waits.append(np.nan)
        return np.asarray(waits, dtype=float), how

    def owner(self):
        leased, bad = map(sum, zip(*(owner_mismatches(r) for r in self.runs), strict=True))
        gone = sum(len(deleted_jobs(r)) for r in self.runs)
        m = {"leased_jobs": leased, "owner_mismatches": bad, "deleted_jobs": gone}
        text = (
            f"lease_owner set in the final table on {leased - bad} of {leased} leased jobs and "
            f"equal to the job's last claimer in the event log ({self.n_runs})"
        ) + _deleted(gone)
        return (
            (PASS if bad == 0 and leased else FAIL if bad else UNTESTED),
            text + ("." if leased else ": no job was leased."),
            m,
        )

    def attempts(self):
        if not all(keeps_attempts(r) for r in self.runs):
            return (
                UNTESTED,
                "the queue keeps no attempts count (dump_jobs returns NULL attempts, its claims "
                "too): Lease Lab numbered the leases itself, so whether attempts are incremented "
                "and persisted cannot be checked, and no statement can fence by attempt.",
                {"keeps_attempts": False},
            )
        jobs, bad, multi, most = 0, 0, 0, 0
        for r in self.runs:
            j, b, mu, mo = attempt_mismatches(r)
            jobs, bad, multi, most = jobs + j, bad + b, multi + mu, max(most, mo)
        m = {
            "jobs": jobs,
            "attempt_mismatches": bad,
            "re_leased_jobs": multi,
            "max_attempts_seen": most,
        }
        text = (
            "attempts in the final table == leases per job in the event log, numbered 1, 2, ... "
            f"on {jobs - bad} of {jobs} jobs; {count(multi, 'job')} leased more than once (at most "
            f"{count(most, 'attempt')})"
        ) + _deleted(sum(len(deleted_jobs(r)) for r in self.runs))
        if not multi:
            crashed = self.variant("crashes")
            if crashed:
                vj, vb, vmu, vmo = map(
                    sum, zip(*(attempt_mismatches(r) for r in crashed), strict=True)
                )
                m.update(variant_jobs=vj, variant_attempt_mismatches=vb, variant_re_leased_jobs=vmu)
                bad += vb
                self._use("attempts", "crashes")
                text += (
                    f"; crash variant: {vj - vb} of {vj} jobs match, {vmu} leased more than once"
                )
                multi = vmu
        if not jobs:
            return UNTESTED, text + ": the final table holds no job to compare.", m
        return (*self._guarded(text, bad, multi, "the increment was never exercised"), m)

    def fencing(self):
        p = self.policy
        variant = ""
        refused, stolen, late = self._zombies(self.runs)
        used = self.runs
        if not (refused or stolen or late):
            zombies = self.variant("zombie")
            if zombies:
                used = zombies
                refused, stolen, late = self._zombies(zombies)
                self._use("fencing", "zombie")
                pause = zombies[0].scenario.faults.pauses[-1].duration
                lost = _total(zombies, "false_expiries")
                variant = (
                    f" (zombie variant: owners paused {pause:.0f} s mid-job, random crashes off: "
                    f"{lost} lost their lease and carried on)"
                )
        undone = refused_effects(used) if p.completion == "background" else 0
        m = {
            "refused_completions": refused,
            "non_owner_completions": stolen,
            "late_worker_writes": late,
            "effects_of_refused_completions": undone,
            "variant": bool(variant),
        }
        harm = (
            f"; {count(late, 'late write')} by a worker that had lost the job (a completion, "
            "failure or release) overwrote a finished job or handed a held one on"
            if late
            else ""
        )
        if p.completion == "background":
            harm += (
                f"; completion in the background (policy.completion): a refused completion "
                f"undoes nothing, and the effect of {count(undone, 'refused completion')} had "
                "committed before"
            )
        if p.fencing:
            head = "complete_fenced" if self.on else "completion checks owner + attempt"
            text = (
                f"{head}: {count(refused, 'late completion')} refused, "
                f"{count(stolen, 'completion')} by a non-owner{variant}{harm}"
            )
            status, text = self._guarded(text, stolen + late, refused, "fencing never exercised")
            if status == PASS and undone:
                return RISK, text[:-1] + ": the fence guards the job's row, not the effect.", m
            return status, text, m
        text = (
            f"unfenced completion: {count(stolen, 'completion')} by a worker that had lost the "
            f"job{variant}{harm}"
        )
        if (stolen or late) and not variant:
            return FAIL, text + ": late completions went through.", m
        return RISK, text + ("; a zombie's completion would go through." if not stolen else "."), m

    def _zombies(self, runs) -> tuple[int, int, int]:
        """(completions refused, completions by a non-owner, other late writes by a worker that
        broke an invariant: a finished job overwritten, a held job handed on)."""
        refused = sum(int((r.events["kind"] == "complete_rejected").sum()) for r in runs)
        stolen = self.caused(runs, "non_owner_completion", "worker")
        late = self.caused(runs, "terminal_overwritten", "worker") + self.caused(
            runs, "double_claim", "worker"
        )
        return refused, stolen, late

    def _duplicates(self, item: str, key: str):
        """(count in the runs, count in the duplicates variant or None, jobs, variant jobs,
        variant runs)."""
        found = _total(self.runs, key)
        jobs = _total(self.runs, "jobs")
        dup = self.variant("duplicates")
        self._use(item, "duplicates")
        return (
            found,
            (_total(dup, key) if dup else None),
            jobs,
            (_total(dup, "jobs") if dup else 0),
            dup,
        )

    def dedup(self):
        p = self.policy
        found, vfound, jobs, vjobs, dup = self._duplicates("dedup", "duplicate_db_effects")
        skipped = sum(int((r.events["kind"] == "dedup_skip").sum()) for r in self.runs + dup)
        m = {
            "duplicate_db_effects": found,
            "jobs": jobs,
            "variant_duplicate_db_effects": vfound,
            "variant_jobs": vjobs,
            "dedup_skips": skipped,
        }
        variant = (
            "; duplicates variant (20% of events delivered twice, crashes after the PSP call): "
            f"{vfound} extra ledger rows in {count(vjobs, 'job')}"
            if vfound is not None
            else ""
        )
        if p.dedup:
            text = (
                f"marker and ledger row commit together: {found} extra ledger rows in "
                f"{count(jobs, 'job')}{variant}; "
                f"{count(skipped, 'repeated delivery or retry', 'repeated deliveries or retries')} "
                "found the marker and skipped the effect"
            )
            return (
                *self._guarded(
                    text, found or vfound, skipped, "no event came twice, not exercised"
                ),
                m,
            )
        text = (
            f"no dedup marker: {found} extra ledger rows (a payment booked again) in "
            f"{count(jobs, 'job')}{variant}"
        )
        return (FAIL if found else RISK), text + ".", m

    def psp(self):
        p = self.policy
        found, vfound, jobs, vjobs, dup = self._duplicates("psp", "duplicate_external_effects")
        replays = sum(
            int(((r.events["kind"] == "psp_charge") & (r.events["detail"] == "replay")).sum())
            for r in self.runs + dup
        )
        charged, twice = map(sum, zip(*(charged_payments(r) for r in self.runs), strict=True))
        m = {
            "duplicate_external_effects": found,
            "jobs": jobs,
            "charged_payments": charged,
            "payments_charged_twice": twice,
            "variant_duplicate_external_effects": vfound,
            "variant_jobs": vjobs,
            "psp_replays": replays,
        }
        variant = (
            f"; duplicates variant: {vfound} extra charges in {count(vjobs, 'job')}"
            if vfound is not None
            else ""
        )
        if p.idempotency_key:
            text = (
                f"the event id is the PSP idempotency key: {found} extra charges in "
                f"{count(jobs, 'job')}{variant}; the PSP replayed "
                f"{count(replays, 'repeated call')} instead of charging again"
            )
            return (
                *self._guarded(
                    text, found or vfound, replays, "no call was repeated, not exercised"
                ),
                m,
            )
        text = (
            f"no idempotency key: {twice} of {charged} charged payments "
            f"({percent(twice / charged if charged else np.nan)}) were charged more than once, "
            f"{found} extra charges in all{variant}"
        )
        return (FAIL if found else RISK), text + ".", m

    def invariants(self):
        """Every violation sim.check finds in the scenario's runs and in its variants' runs (the
        variants built for the other items), counted per invariant, with an example."""
        sets = [("the scenario's runs", self.runs)] + [
            (f"the {name} variant", runs) for name, runs in self.variants.items() if runs
        ]
        self._use("invariants", *(name for name, runs in self.variants.items() if runs))
        found: dict[str, dict[str, int]] = {}
        example = {}
        for where, runs in sets:
            for r in runs:
                for v in self.report(r).violations:
                    counts = found.setdefault(v.invariant, {})
                    counts[where] = counts.get(where, 0) + 1
                    run_of = "the scenario's run" if runs is self.runs else f"{where}'s run"
                    example.setdefault(v.invariant, (v, f"{run_of} of seed {r.scenario.seed}"))
        n_runs = sum(len(runs) for _, runs in sets)
        m = {name: sum(found.get(name, {}).values()) for name in INVARIANTS}
        m["runs"] = n_runs
        if not found:
            return (
                PASS,
                f"all {len(INVARIANTS)} invariants held in {count(n_runs, 'run')} (the scenario's "
                "and its variants').",
                m,
            )
        parts = []
        for name in INVARIANTS:
            if name not in found:
                continue
            where = ", ".join(f"{n} in {w}" for w, n in found[name].items())
            expected = " (the scenario expects it)" if name in self.scenario.expect else ""
            v, seen_in = example[name]
            job = f"job {v.job} " if v.job is not None else ""
            parts.append(
                f"{name} {sum(found[name].values())}: {where}{expected}; e.g. {job}in {seen_in}: "
                f"{v.detail}"
            )
        return (
            FAIL,
            f"{len(found)} of {len(INVARIANTS)} invariants broken in {count(n_runs, 'run')}: "
            + "; ".join(parts)
            + ".",
            m,
        )
