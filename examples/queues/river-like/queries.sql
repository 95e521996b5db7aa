-- A River-like queue (after River's river_job.sql, before PR #1373): fetch with FOR UPDATE SKIP
-- LOCKED, no heartbeat, and a rescuer that reads the jobs `running` for longer than the stuck age
-- and then updates each by its id alone. Nothing tells a slow worker from a dead one: a job that
-- runs longer than the stuck age is handed to a second worker while the first is still at it.
-- Completion is JobCompleteTx in the worker's transaction: it completes the job if it is still
-- running, and returns the job's row either way (JobSetStateIfRunningMany), so the worker commits
-- its transaction, effects included, even when another worker holds the job by then. Its settings
-- are in queue.toml: `python -m sim review examples/queues/river-like/scenario.toml --sql
-- examples/queues/river-like` needs no --set.

-- name: insert_job
-- Enqueue: an available job whose args carry the payment.
-- params: id int, payload text, now time
INSERT INTO river_job (id, args, state, scheduled_at, created_at)
VALUES (%(id)s, %(payload)s::jsonb, 'available', %(now)s, %(now)s);

-- name: claim_skip_locked
-- JobGetAvailable: lock the oldest available job that is due, skipping locked rows; count the attempt; note the worker.
-- params: owner text, now time
WITH locked AS (
    SELECT id FROM river_job
    WHERE state = 'available' AND scheduled_at <= %(now)s
    ORDER BY scheduled_at, id
    LIMIT 1
    FOR UPDATE SKIP LOCKED
)
UPDATE river_job j
SET state = 'running', attempt = j.attempt + 1, attempted_at = %(now)s,
    attempted_by = array_append(j.attempted_by, %(owner)s)
FROM locked
WHERE j.id = locked.id
RETURNING j.id, j.attempt;

-- name: heartbeat
-- River has no per-job heartbeat: this queue leaves the statement out.
-- params:

-- name: complete_unfenced
-- JobCompleteTx: complete the job if it is still running, and return its row either way (the caller commits its transaction).
-- params: id int, now time
WITH updated AS (
    UPDATE river_job SET state = 'completed', finalized_at = %(now)s
    WHERE id = %(id)s AND state = 'running'
    RETURNING id
)
SELECT id FROM updated
UNION ALL
SELECT id FROM river_job WHERE id = %(id)s AND NOT EXISTS (SELECT 1 FROM updated);

-- name: requeue_expired
-- River's rescuer reads, then writes: see select_stuck_jobs and rescue_job.
-- params:

-- name: select_stuck_jobs
-- JobGetStuck: the jobs running since before the stuck horizon.
-- params: now time, stuck_after interval
SELECT id FROM river_job
WHERE state = 'running' AND attempted_at < %(now)s - %(stuck_after)s
ORDER BY id;

-- name: rescue_job
-- JobRescueMany: the job, by its id alone, goes back to available after its retry delay (attempt^4), or is discarded at max_attempts.
-- params: id int, now time, retry_backoff int
UPDATE river_job j
SET state = CASE WHEN j.attempt >= j.max_attempts THEN 'discarded' ELSE 'available' END,
    errors = array_append(j.errors, 'Stuck job rescued by JobRescuer'),
    scheduled_at = %(now)s + (%(retry_backoff)s * j.attempt * j.attempt * j.attempt * j.attempt) * interval '1 microsecond',
    finalized_at = CASE WHEN j.attempt >= j.max_attempts THEN %(now)s END
WHERE j.id = %(id)s
RETURNING j.id, CASE j.state WHEN 'discarded' THEN 'Dead' ELSE 'Pending' END,
          j.attempted_by[cardinality(j.attempted_by)], j.attempt::bigint;

-- name: dump_jobs
-- Every job in Lease Lab's words: state -> status, last attempted_by -> lease_owner, stuck age -> lease_until.
-- params:
SELECT id, args->>'event_id', args::text,
       CASE state WHEN 'available' THEN 'Pending' WHEN 'running' THEN 'Processing'
                  WHEN 'completed' THEN 'Completed' ELSE 'Dead' END,
       attempted_by[cardinality(attempted_by)], attempted_at + interval '30 seconds', attempt::bigint,
       NULL::timestamptz, created_at, finalized_at, errors[cardinality(errors)]
FROM river_job ORDER BY id;
