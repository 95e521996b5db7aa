-- A River-like queue: fetch with FOR UPDATE SKIP LOCKED, no heartbeat, and a rescuer that puts
-- jobs back once they have been `running` for longer than a fixed age (River's JobRescuer; 1 h
-- there, 30 s here so that a short run shows it). Nothing tells a slow worker from a dead one:
-- a job that runs longer than the rescue age is handed to a second worker while the first is
-- still at it, and both finish it. Completion only checks that the job is still running.
-- Review it with examples/queues/river-like/scenario.toml (lease_ttl = the rescue age).

-- name: insert_job
-- Enqueue: an available job whose args carry the payment.
-- params: id int, payload text, now time
INSERT INTO river_job (id, args, state, created_at) VALUES (%(id)s, %(payload)s::jsonb, 'available', %(now)s);

-- name: claim_skip_locked
-- River's fetch: lock the oldest available job, skipping locked rows; count the attempt; note the worker.
-- params: owner text, now time
WITH locked AS (
    SELECT id FROM river_job
    WHERE state = 'available'
    ORDER BY id
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
-- Complete the job if it is still running (whoever runs it now).
-- params: id int, now time
UPDATE river_job SET state = 'completed', finalized_at = %(now)s
WHERE id = %(id)s AND state = 'running'
RETURNING id;

-- name: requeue_expired
-- The rescuer: jobs running for over 30 s are made available again (discarded after max_attempts).
-- params: now time, limit int
WITH stuck AS (
    SELECT id FROM river_job
    WHERE state = 'running' AND attempted_at < %(now)s - interval '30 seconds'
    ORDER BY id
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
), rescued AS (
    UPDATE river_job j
    SET state = CASE WHEN j.attempt >= j.max_attempts THEN 'discarded' ELSE 'available' END
    FROM stuck
    WHERE j.id = stuck.id
    RETURNING j.id, j.state, j.attempted_by, j.attempt
)
SELECT id, CASE state WHEN 'discarded' THEN 'Dead' ELSE 'Pending' END,
       attempted_by[cardinality(attempted_by)], attempt::bigint
FROM rescued ORDER BY id;

-- name: dump_jobs
-- Every job in Lease Lab's words: state -> status, last attempted_by -> lease_owner, rescue age -> lease_until.
-- params:
SELECT id, args->>'event_id', args::text,
       CASE state WHEN 'available' THEN 'Pending' WHEN 'running' THEN 'Processing'
                  WHEN 'completed' THEN 'Completed' ELSE 'Dead' END,
       attempted_by[cardinality(attempted_by)], attempted_at + interval '30 seconds', attempt::bigint,
       NULL::timestamptz, created_at, finalized_at, NULL::text
FROM river_job ORDER BY id;
