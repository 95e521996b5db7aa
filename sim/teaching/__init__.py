"""What the teaching notebooks (notebooks/NN-*.ipynb) need beyond the rest of `sim`, as
`teaching.X`.

The notebooks narrate and call; everything with logic lives in these modules, with tests
(tests/teaching/test_teaching.py):

- notebook: `fast_mode()`, `size(full, fast)` and `sizes()` shrink horizons, jobs and replications
  when LEASELAB_FAST=1 (CI); `setup()` sets the plotting defaults; `headless()`, `progress()`,
  `executor()`; prose computed from variables: `md()`, `claim()`, `seconds()`, `percent()`;
- lessons: the scenarios and experiments the lessons share: `one_job()`, `recovery_experiment()`,
  `stalling_queue()`, `retention_experiment()`, `claim_contention()`, `compare_logs()`
  (`advice_frame()` and `ADVICE_AXES`, which chart an advice, come from sim.plots);
- figures: the lesson figures `plot_false_expiry()`, `plot_retention()`, `plot_contention()`
  (general ones, `lease_clock()`, `plot_durations()`, `busy_window()`, live in sim.plots);
- explore: `explore()` re-runs a small scenario when a slider moves and redraws its timeline;
  headless (no widget frontend) it runs once with the defaults and shows a static figure;
- by_hand: `Script` drives a Backend statement by statement with a transcript, `Delivery` is
  seed 2's dedup transaction;
- answers: the `Verdict` and how a reader's answer is read (numbers with or without "s", names in
  any case, sets; right only when closer to the truth than to every common mistake);
- exercises: `check_*()` tell the reader whether an answer is right (a `Verdict`); ttl_exercises:
  notebook 03's; sql_exercise: notebook 08's, SQL typed by the reader run as a sandbox role,
  read-only, judged on a second table state drawn at random;
- coverage: `REQUIRED_TAGS`, `coverage()` map the seed's concepts and checklist to notebook cells;
- caveats: sentences that follow their numbers when a reader's values or fast mode's small runs
  cannot support the lesson's sentence (`contention_sentence()`, `recovery_theory_sentence()`,
  `false_expiry_caveat()`, `duplicate_charge_sentence()`, `false_expiry_target_sentence()`,
  `review_tally_sentence()`);
- queue_lab (notebook 09: example queues, a queue beside its review, the fenced-completion exercise)
  and live_lesson (notebook 10: the effects the closed form hides, the --sql comparison's double
  claims beside both simulations, `check_largest_part()`);
- cheatsheet (notebook 11): the lease article's items each with its measured `Proof`, the rules
  of thumb measured by `rules_of_thumb`, and notebook 12's takeaways;
- hunting (notebook 13, sim hunt): a failure buried in noise (`noisy_failure()`), the shrinker's
  steps (`shrink_table()`), `check_shortest_pause()`;
- fencing and clocks (notebook 12): what a failed lease costs, who checks a fencing token, Chubby's
  lock-delay (`check_refusers()`); a worker's conservative deadline, drift, clocks that disagree
  (`check_safe_deadline()`).

PostgreSQL by hand: `sql_frame()` and `sim_seconds()` come from sim.db.inspect.
"""

from sim.db.inspect import sim_seconds, sql_frame
from sim.payload import payload_hash
from sim.plots.advice import ADVICE_AXES, advice_frame  # notebook 06: the advice charted
from sim.plots.analysis import duration_summary, plot_durations
from sim.plots.clock import lease_clock
from sim.plots.timeline import busy_window
from sim.support.in_words import (  # teaching.percent, teaching.times in the notebooks
    count,
    percent,
    times,
)
from sim.teaching import cheatsheet, clocks, fencing, rules_of_thumb
from sim.teaching.answers import Verdict
from sim.teaching.by_hand import Delivery, Script, deliver, ledger_counts
from sim.teaching.caveats import (
    contention_sentence,
    duplicate_charge_sentence,
    false_expiry_caveat,
    false_expiry_target_sentence,
    false_expiry_theory,
    leases_to_show,
    recovery_theory_sentence,
    review_tally_sentence,
)
from sim.teaching.cheatsheet import CHEAT_SHEET_TAGS
from sim.teaching.clocks import check_safe_deadline
from sim.teaching.coverage import (
    CLOCKS_TAGS,
    DEDUP_TAGS,
    REQUIRED_TAGS,
    coverage,
    coverage_markdown,
)
from sim.teaching.exercises import (
    check_convoy,
    check_duplicating_peers,
    check_fastest_peer,
    check_fenced_completion,
    check_lease_end,
    check_ledger_rows,
    check_lock_recovery,
    check_recovery_prediction,
    check_retention,
    check_safe_claims,
    check_smallest_ttl,
    check_watcher_interval,
    check_watcher_multiples,
    redelivery_puzzle,
)
from sim.teaching.explore import Control, Explorer, explore
from sim.teaching.fencing import check_refusers
from sim.teaching.figures import (
    false_expiry_table,
    plot_contention,
    plot_false_expiry,
    plot_retention,
)
from sim.teaching.hunting import check_shortest_pause, noisy_failure, shrink_table  # notebook 13
from sim.teaching.lessons import (
    STRATEGIES,
    claim_contention,
    compare_logs,
    contention,
    followed_job,
    one_job,
    phase_bias,
    recovery_experiment,
    retention_curve,
    retention_experiment,
    stalling_queue,
)
from sim.teaching.live_lesson import check_largest_part  # notebook 10 (live mode)
from sim.teaching.notebook import (
    FAST_ENV,
    HEADLESS_ENV,
    HEADLESS_RUNNERS,
    claim,
    executor,
    fast_mode,
    headless,
    md,
    progress,
    release_workers,
    seconds,
    server_words,
    setup,
    size,
    sizes,
    widgets_available,
)
from sim.teaching.sql_exercise import check_stuck_query, stuck_jobs_fixture  # notebook 08
from sim.teaching.ttl_exercises import (  # notebook 03
    check_pause_ttl,
    check_ttl_quantile,
    pause_survival,
    ttl_for_quantile,
)

__all__ = [
    "ADVICE_AXES",
    "CHEAT_SHEET_TAGS",
    "CLOCKS_TAGS",
    "DEDUP_TAGS",
    "FAST_ENV",
    "HEADLESS_ENV",
    "HEADLESS_RUNNERS",
    "REQUIRED_TAGS",
    "STRATEGIES",
    "Control",
    "Delivery",
    "Explorer",
    "Script",
    "Verdict",
    "advice_frame",
    "busy_window",
    "check_convoy",
    "check_duplicating_peers",
    "check_fastest_peer",
    "check_fenced_completion",
    "check_largest_part",
    "check_lease_end",
    "check_ledger_rows",
    "check_lock_recovery",
    "check_pause_ttl",
    "check_recovery_prediction",
    "check_refusers",
    "check_retention",
    "check_safe_claims",
    "check_safe_deadline",
    "check_shortest_pause",
    "check_smallest_ttl",
    "check_stuck_query",
    "check_ttl_quantile",
    "check_watcher_interval",
    "check_watcher_multiples",
    "cheatsheet",
    "clocks",
    "claim",
    "claim_contention",
    "contention_sentence",
    "duplicate_charge_sentence",
    "false_expiry_caveat",
    "false_expiry_target_sentence",
    "false_expiry_theory",
    "fencing",
    "leases_to_show",
    "noisy_failure",
    "recovery_theory_sentence",
    "review_tally_sentence",
    "rules_of_thumb",
    "compare_logs",
    "contention",
    "count",
    "coverage",
    "coverage_markdown",
    "deliver",
    "duration_summary",
    "executor",
    "explore",
    "false_expiry_table",
    "fast_mode",
    "followed_job",
    "headless",
    "lease_clock",
    "ledger_counts",
    "md",
    "one_job",
    "pause_survival",
    "payload_hash",
    "percent",
    "phase_bias",
    "plot_contention",
    "plot_durations",
    "plot_false_expiry",
    "plot_retention",
    "progress",
    "recovery_experiment",
    "redelivery_puzzle",
    "release_workers",
    "retention_curve",
    "retention_experiment",
    "seconds",
    "server_words",
    "setup",
    "shrink_table",
    "sim_seconds",
    "size",
    "sizes",
    "sql_frame",
    "stalling_queue",
    "stuck_jobs_fixture",
    "times",
    "ttl_for_quantile",
    "widgets_available",
]
