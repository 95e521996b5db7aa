-- A graphile-worker-like queue (after graphile-worker 0.16+'s src/sql): no heartbeat; a claim
-- that takes only available (unlocked) jobs; the periodic reset of locks older than the stale age
-- as the watcher; completion that deletes the job by its id alone (no owner, no attempt: as
-- graphile-worker's completeJobs); failure fenced by the lock's owner. Its settings are in
-- queue.toml: `python -m sim review examples/queues/graphile-like/scenario.toml --sql
-- examples/queues/graphile-like` needs no --set.

-- name: insert_job
-- add_job: an available job, due now.
-- params: id int, event_id text, payload text, now time
INSERT INTO jobs (id, payload, event_id, run_at, created_at)
VALUES (%(id)s, %(payload)s::json, %(event_id)s, %(now)s, %(now)s);

-- name: claim_skip_locked
-- get_job: the oldest available job that is due, skipping locked rows; count the attempt and lock it.
-- params: owner text, now time
WITH j AS (
    SELECT id FROM jobs
    WHERE is_available AND run_at <= %(now)s
    ORDER BY run_at, id
    LIMIT 1
    FOR UPDATE SKIP LOCKED
)
UPDATE jobs
SET attempts = jobs.attempts + 1, locked_by = %(owner)s, locked_at = %(now)s
FROM j
WHERE jobs.id = j.id
RETURNING jobs.id, jobs.attempts;

-- name: complete_unfenced
-- completeJobs: delete the job by its id, whoever holds its lock.
-- params: id int
DELETE FROM jobs WHERE id = %(id)s
RETURNING id;

-- name: fail_job_fenced
-- failJobs: unlock the job for a retry after exp(attempts) seconds, if this worker holds its lock.
-- params: id int, owner text, now time
UPDATE jobs
SET last_error = 'deadline exceeded', locked_by = NULL, locked_at = NULL,
    run_at = greatest(%(now)s, run_at) + exp(least(attempts, 10)) * interval '1 second'
WHERE id = %(id)s AND locked_by = %(owner)s
RETURNING id, CASE WHEN attempts >= max_attempts THEN 'Dead' ELSE 'Pending' END;

-- name: requeue_expired
-- resetLockedAt: unlock every job whose lock is older than the stale age; it is available again (or, out of attempts, never).
-- params: now time, stuck_after interval
WITH stale AS (
    SELECT id, locked_by FROM jobs WHERE locked_at < %(now)s - %(stuck_after)s FOR UPDATE
), reset AS (
    UPDATE jobs SET locked_at = NULL, locked_by = NULL, run_at = greatest(run_at, %(now)s)
    FROM stale WHERE jobs.id = stale.id
    RETURNING jobs.id, jobs.attempts, jobs.max_attempts, stale.locked_by
)
SELECT id, CASE WHEN attempts >= max_attempts THEN 'Dead' ELSE 'Pending' END, locked_by, attempts::bigint
FROM reset ORDER BY id;

-- name: dump_jobs
-- Every job still in the table, in Lease Lab's words (a completed job is deleted): a lock is a lease ending at the stale age.
-- params:
SELECT id, event_id, payload::text,
       CASE WHEN locked_at IS NOT NULL THEN 'Processing'
            WHEN attempts >= max_attempts THEN 'Dead' ELSE 'Pending' END,
       locked_by, locked_at + interval '30 seconds', attempts::bigint, NULL::timestamptz,
       created_at, NULL::timestamptz, last_error
FROM jobs ORDER BY id;
