-- Lease Lab named queries: THE source of every statement the simulation runs.
-- Format: "-- name: NAME", then a one-line description, then "-- params: NAME TYPE, ..."
-- (types: int, text, bool, time), then the statement. Parameters are bound by psycopg as
-- %(name)s; time parameters are the simulated clock (epoch + seconds), never now().

-- name: insert_job
-- Enqueue one payment job as Pending.
-- params: id int, event_id text, payload text, now time
INSERT INTO payment_jobs (id, event_id, payload, status, attempts, created_at)
VALUES (%(id)s, %(event_id)s, %(payload)s, 'Pending', 0, %(now)s);

-- name: select_candidates
-- The read of a claim: up to `limit` claimable jobs oldest first (Pending and due, or an expired lease when take_expired; attempts left); never waits.
-- params: now time, take_expired bool, max_attempts int, limit int
SELECT id, status, lease_owner, lease_until, attempts
FROM payment_jobs
WHERE attempts < %(max_attempts)s
  AND ((status = 'Pending' AND (run_after IS NULL OR run_after <= %(now)s))
       OR (%(take_expired)s AND status = 'Processing' AND lease_until < %(now)s))
ORDER BY id
LIMIT %(limit)s;

-- name: claim_conditional
-- The seed's claim: one atomic conditional UPDATE; no row back means someone else holds the job (or it is out of attempts).
-- params: id int, owner text, now time, lease_until time, max_attempts int
UPDATE payment_jobs
SET status = 'Processing', lease_owner = %(owner)s, lease_until = %(lease_until)s,
    heartbeat_at = %(now)s, attempts = attempts + 1
WHERE id = %(id)s AND attempts < %(max_attempts)s
  AND ((status = 'Pending' AND (run_after IS NULL OR run_after <= %(now)s))
       OR (status = 'Processing' AND lease_until < %(now)s))
RETURNING id, attempts;

-- name: claim_unconditional
-- The write of read-then-write (or of a row locked FOR UPDATE): takes the job whatever its state, within its attempts.
-- params: id int, owner text, now time, lease_until time, max_attempts int
UPDATE payment_jobs
SET status = 'Processing', lease_owner = %(owner)s, lease_until = %(lease_until)s,
    heartbeat_at = %(now)s, attempts = attempts + 1
WHERE id = %(id)s AND attempts < %(max_attempts)s
RETURNING id, attempts;

-- name: claim_skip_locked
-- Claim the oldest claimable job in one statement, skipping rows other transactions have locked.
-- params: owner text, now time, lease_until time, take_expired bool, max_attempts int
WITH next_job AS (
    SELECT id FROM payment_jobs
    WHERE attempts < %(max_attempts)s
      AND ((status = 'Pending' AND (run_after IS NULL OR run_after <= %(now)s))
           OR (%(take_expired)s AND status = 'Processing' AND lease_until < %(now)s))
    ORDER BY id
    LIMIT 1
    FOR UPDATE SKIP LOCKED
)
UPDATE payment_jobs j
SET status = 'Processing', lease_owner = %(owner)s, lease_until = %(lease_until)s,
    heartbeat_at = %(now)s, attempts = j.attempts + 1
FROM next_job
WHERE j.id = next_job.id
RETURNING j.id, j.attempts;

-- name: claim_batch
-- Claim up to `limit` of the oldest claimable jobs at once (policy.prefetch: Celery's prefetch, SQS's MaxNumberOfMessages): every lease starts now, those of the jobs waiting in the worker's buffer too. Skips locked rows.
-- params: owner text, now time, lease_until time, take_expired bool, max_attempts int, limit int
WITH next_jobs AS (
    SELECT id FROM payment_jobs
    WHERE attempts < %(max_attempts)s
      AND ((status = 'Pending' AND (run_after IS NULL OR run_after <= %(now)s))
           OR (%(take_expired)s AND status = 'Processing' AND lease_until < %(now)s))
    ORDER BY id
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
), claimed AS (
    UPDATE payment_jobs j
    SET status = 'Processing', lease_owner = %(owner)s, lease_until = %(lease_until)s,
        heartbeat_at = %(now)s, attempts = j.attempts + 1
    FROM next_jobs
    WHERE j.id = next_jobs.id
    RETURNING j.id, j.attempts
)
SELECT id, attempts FROM claimed ORDER BY id;

-- name: lock_next_candidate
-- Blocking claim, step 1 (inside a transaction): lock the oldest claimable job, waiting for its holder.
-- params: now time, take_expired bool, max_attempts int
SELECT id, attempts
FROM payment_jobs
WHERE attempts < %(max_attempts)s
  AND ((status = 'Pending' AND (run_after IS NULL OR run_after <= %(now)s))
       OR (%(take_expired)s AND status = 'Processing' AND lease_until < %(now)s))
ORDER BY id
LIMIT 1
FOR UPDATE;

-- name: lock_job_nowait
-- Lock one job row or fail at once with SQLSTATE 55P03 if another transaction holds it.
-- params: id int
SELECT id, status FROM payment_jobs WHERE id = %(id)s FOR UPDATE NOWAIT;

-- name: heartbeat
-- Renew a lease, fenced: only the owner of this attempt of a Processing job extends it.
-- params: id int, owner text, attempt int, now time, lease_until time
UPDATE payment_jobs
SET lease_until = %(lease_until)s, heartbeat_at = %(now)s
WHERE id = %(id)s AND status = 'Processing' AND lease_owner = %(owner)s AND attempts = %(attempt)s
RETURNING id, lease_until;

-- name: complete_fenced
-- Mark a job Completed only if the caller still owns this attempt (owner + attempt fencing).
-- params: id int, owner text, attempt int, now time
UPDATE payment_jobs
SET status = 'Completed', completed_at = %(now)s
WHERE id = %(id)s AND status = 'Processing' AND lease_owner = %(owner)s AND attempts = %(attempt)s
RETURNING id;

-- name: complete_unfenced
-- Mark a job Completed whoever holds it now: a zombie's late completion goes through.
-- params: id int, now time
UPDATE payment_jobs
SET status = 'Completed', completed_at = %(now)s
WHERE id = %(id)s
RETURNING id;

-- name: reject_job_fenced
-- Mark a job Dead with a reason (e.g. same event id with another payload), fenced like completion.
-- params: id int, owner text, attempt int, now time, error text
UPDATE payment_jobs
SET status = 'Dead', completed_at = %(now)s, last_error = %(error)s
WHERE id = %(id)s AND status = 'Processing' AND lease_owner = %(owner)s AND attempts = %(attempt)s
RETURNING id;

-- name: requeue_expired
-- The stuck watcher: Processing jobs whose lease expired go back to Pending (due after retry_backoff us x attempts^4), or Dead at max_attempts; skips locked rows.
-- params: now time, max_attempts int, limit int, retry_backoff int
WITH expired AS (
    SELECT id FROM payment_jobs
    WHERE status = 'Processing' AND lease_until < %(now)s
    ORDER BY lease_until, id
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
), requeued AS (
    UPDATE payment_jobs j
    SET status = CASE WHEN j.attempts >= %(max_attempts)s THEN 'Dead' ELSE 'Pending' END,
        last_error = 'lease expired',
        run_after = %(now)s + (%(retry_backoff)s * j.attempts * j.attempts * j.attempts * j.attempts) * interval '1 microsecond'
    FROM expired
    WHERE j.id = expired.id
    RETURNING j.id, j.status, j.lease_owner, j.attempts
)
SELECT id, status, lease_owner, attempts FROM requeued ORDER BY id;

-- name: reclaim_stalled
-- The two-phase stall check (BullMQ's moveStalledJobsToWait): jobs the previous pass marked and whose lease is still expired go back to Pending (due after retry_backoff us x attempts^4), or Dead once stalled more than max_stalls times or out of attempts; then every other Processing job is marked for the next pass. Skips locked rows.
-- params: now time, max_attempts int, max_stalls int, limit int, retry_backoff int
WITH stalled AS (
    SELECT id FROM payment_jobs
    WHERE status = 'Processing' AND stall_marked AND lease_until < %(now)s
    ORDER BY lease_until, id
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
), reclaimed AS (
    UPDATE payment_jobs j
    SET status = CASE WHEN j.stalls >= %(max_stalls)s OR j.attempts >= %(max_attempts)s
                      THEN 'Dead' ELSE 'Pending' END,
        last_error = CASE WHEN j.stalls >= %(max_stalls)s THEN 'stalled more than max_stalls times'
                          ELSE 'stalled' END,
        stalls = j.stalls + 1,
        stall_marked = false,
        run_after = %(now)s + (%(retry_backoff)s * j.attempts * j.attempts * j.attempts * j.attempts) * interval '1 microsecond'
    FROM stalled
    WHERE j.id = stalled.id
    RETURNING j.id, j.status, j.lease_owner, j.attempts
), marking AS (
    SELECT id FROM payment_jobs
    WHERE (stall_marked OR status = 'Processing') AND id NOT IN (SELECT id FROM stalled)
    FOR UPDATE SKIP LOCKED
), marked AS (
    UPDATE payment_jobs j
    SET stall_marked = (j.status = 'Processing')
    FROM marking
    WHERE j.id = marking.id
)
SELECT id, status, lease_owner, attempts FROM reclaimed ORDER BY id;

-- name: register_process
-- A worker process starts: its row with a first heartbeat. A process that reuses a name takes the old row over, heartbeat and all (a restarted pod keeps its name).
-- params: owner text, now time
INSERT INTO worker_processes (name, started_at, heartbeat_at)
VALUES (%(owner)s, %(now)s, %(now)s)
ON CONFLICT (name) DO UPDATE SET started_at = EXCLUDED.started_at, heartbeat_at = EXCLUDED.heartbeat_at
RETURNING name;

-- name: process_heartbeat
-- The process says it is alive, every process_heartbeat_interval; no row back means it was pruned.
-- params: owner text, now time
UPDATE worker_processes SET heartbeat_at = %(now)s WHERE name = %(owner)s RETURNING name;

-- name: prune_processes
-- Process liveness (Solid Queue's prune, Hatchet's reassignment, procrastinate's stalled jobs): delete the processes silent for stale_after us; Processing jobs whose owner has no live process row go back to Pending (due after retry_backoff us x attempts^4), or Dead when dead, past the stall budget or out of attempts. Skips locked rows.
-- params: now time, stale_after int, dead bool, max_attempts int, max_stalls int, limit int, retry_backoff int
WITH pruned AS (
    DELETE FROM worker_processes
    WHERE heartbeat_at < %(now)s - %(stale_after)s * interval '1 microsecond'
    RETURNING name
), orphaned AS (
    SELECT j.id FROM payment_jobs j
    WHERE j.status = 'Processing'
      AND NOT EXISTS (
          SELECT 1 FROM worker_processes p
          WHERE p.name = j.lease_owner
            AND p.heartbeat_at >= %(now)s - %(stale_after)s * interval '1 microsecond')
    ORDER BY j.id
    LIMIT %(limit)s
    FOR UPDATE OF j SKIP LOCKED
), moved AS (
    UPDATE payment_jobs j
    SET status = CASE WHEN %(dead)s OR j.stalls >= %(max_stalls)s OR j.attempts >= %(max_attempts)s
                      THEN 'Dead' ELSE 'Pending' END,
        last_error = 'process gone',
        stalls = j.stalls + 1,
        run_after = %(now)s + (%(retry_backoff)s * j.attempts * j.attempts * j.attempts * j.attempts) * interval '1 microsecond'
    FROM orphaned
    WHERE j.id = orphaned.id
    RETURNING j.id, j.status, j.lease_owner, j.attempts
)
SELECT id, status, lease_owner, attempts FROM moved ORDER BY id;

-- name: rescue_job
-- The write of a read-then-write watcher (River's rescuer before PR #1373): requeues the job by id, whatever it became since the read.
-- params: id int, now time, max_attempts int, retry_backoff int
UPDATE payment_jobs j
SET status = CASE WHEN j.attempts >= %(max_attempts)s THEN 'Dead' ELSE 'Pending' END,
    last_error = 'lease expired',
    run_after = %(now)s + (%(retry_backoff)s * j.attempts * j.attempts * j.attempts * j.attempts) * interval '1 microsecond'
WHERE j.id = %(id)s
RETURNING j.id, j.status, j.lease_owner, j.attempts;

-- name: fail_job_fenced
-- A worker-side deadline (pg-boss's expireIn in work()): the owner fails its job for a retry (Dead at max_attempts) while its handler may still run.
-- params: id int, owner text, attempt int, now time, max_attempts int, retry_backoff int
UPDATE payment_jobs j
SET status = CASE WHEN j.attempts >= %(max_attempts)s THEN 'Dead' ELSE 'Pending' END,
    last_error = 'deadline exceeded',
    run_after = %(now)s + (%(retry_backoff)s * j.attempts * j.attempts * j.attempts * j.attempts) * interval '1 microsecond'
WHERE j.id = %(id)s AND j.status = 'Processing' AND j.lease_owner = %(owner)s AND j.attempts = %(attempt)s
RETURNING j.id, j.status, j.attempts;

-- name: release_job_fenced
-- Graceful shutdown (Solid Queue releases claimed executions): the owner gives its job back at once, Pending (Dead at max_attempts).
-- params: id int, owner text, attempt int, max_attempts int
UPDATE payment_jobs
SET status = CASE WHEN attempts >= %(max_attempts)s THEN 'Dead' ELSE 'Pending' END,
    last_error = 'released at shutdown'
WHERE id = %(id)s AND status = 'Processing' AND lease_owner = %(owner)s AND attempts = %(attempt)s
RETURNING id, status, attempts;

-- name: select_stuck_jobs
-- What the watcher looks for: Processing jobs whose lease has expired (a direct diagnostic query).
-- params: now time
SELECT id, lease_owner, lease_until, attempts
FROM payment_jobs
WHERE status = 'Processing' AND lease_until < %(now)s
ORDER BY id;

-- name: insert_dedup_marker
-- Seed 2's claim on a logical event: a row back means this transaction may apply the effect.
-- params: event_id text, payload_hash text, now time
INSERT INTO processed_events (event_id, payload_hash, processed_at)
VALUES (%(event_id)s, %(payload_hash)s, %(now)s)
ON CONFLICT DO NOTHING
RETURNING event_id;

-- name: read_dedup_marker
-- The stored marker of an event, to compare payload hashes when the marker insert found a conflict.
-- params: event_id text
SELECT event_id, payload_hash, processed_at FROM processed_events WHERE event_id = %(event_id)s;

-- name: purge_dedup_markers
-- Forget markers older than the retention (must cover the redelivery window, or duplicates return).
-- params: before time
WITH purged AS (
    DELETE FROM processed_events WHERE processed_at < %(before)s RETURNING event_id
)
SELECT event_id FROM purged ORDER BY event_id;

-- name: insert_ledger_entry
-- Apply the database effect of a payment: one ledger row.
-- params: job_id int, event_id text, amount_cents int, worker text, attempt int, now time
INSERT INTO ledger (job_id, event_id, amount_cents, worker, attempt, applied_at)
VALUES (%(job_id)s, %(event_id)s, %(amount_cents)s, %(worker)s, %(attempt)s, %(now)s)
RETURNING entry_id;

-- name: count_jobs_by_status
-- Status counts, the first thing an operator asks of a queue.
-- params:
SELECT status, count(*) FROM payment_jobs GROUP BY status ORDER BY status;

-- name: dump_jobs
-- Every job row, for comparing final table contents and for analysis.
-- params:
SELECT id, event_id, payload, status, lease_owner, lease_until, attempts, heartbeat_at,
       created_at, completed_at, last_error
FROM payment_jobs ORDER BY id;

-- name: dump_processed_events
-- Every dedup marker.
-- params:
SELECT event_id, payload_hash, processed_at FROM processed_events ORDER BY event_id;

-- name: dump_ledger
-- Every ledger row, in insertion order.
-- params:
SELECT entry_id, job_id, event_id, amount_cents, worker, attempt, applied_at
FROM ledger ORDER BY entry_id;
