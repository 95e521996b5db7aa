-- A pg-boss-like queue (after pg-boss 12's plans.ts): uuid ids of its own, no owner, expiry by
-- age, failure and retry by DELETE + INSERT of the job row, a worker-side deadline that fails the
-- job by its id alone while the handler runs on, completion by id and state. Its settings are in
-- queue.toml: `python -m sim review examples/queues/pg-boss-like/scenario.toml --sql
-- examples/queues/pg-boss-like` needs no --set.

-- name: insert_job
-- send(): pg-boss makes up the id; it is returned, and Lease Lab binds %(id)s as it from then on.
-- params: event_id text, payload text, now time
INSERT INTO job (name, data, start_after, created_on)
VALUES ('payments', jsonb_build_object('event_id', %(event_id)s, 'payment', %(payload)s::jsonb), %(now)s, %(now)s)
RETURNING id;

-- name: claim_skip_locked
-- fetchNextJob: the oldest created/retry job that is due, skipping locked rows; retry_count counts the starts after the first.
-- params: now time
WITH next AS (
    SELECT id FROM job
    WHERE name = 'payments' AND state < 'active' AND start_after <= %(now)s
    ORDER BY created_on, id
    LIMIT 1
    FOR UPDATE SKIP LOCKED
)
UPDATE job j
SET state = 'active', started_on = %(now)s, heartbeat_on = %(now)s,
    retry_count = CASE WHEN j.started_on IS NOT NULL THEN j.retry_count + 1 ELSE j.retry_count END
FROM next
WHERE j.id = next.id
RETURNING j.id, j.retry_count + 1;

-- name: heartbeat
-- touchJobs (pg-boss 12.12+, opt-in, off in queue.toml): renews any active job with this id, whoever runs it. It moves heartbeat_on only: the job still expires expire_seconds after it started, so the lease it returns ends at the earlier of the two (LEAST skips a NULL heartbeat_seconds).
-- params: id int, now time
UPDATE job SET heartbeat_on = %(now)s
WHERE id = %(id)s AND state = 'active'
RETURNING id, LEAST(started_on + expire_seconds * interval '1 second',
                    heartbeat_on + heartbeat_seconds * interval '1 second');

-- name: complete_unfenced
-- completeJobs: completes the job if it is active, whoever holds it.
-- params: id int, now time
UPDATE job SET state = 'completed', completed_on = %(now)s
WHERE name = 'payments' AND id = %(id)s AND state = 'active'
RETURNING id;

-- name: fail_job_fenced
-- failJobsById, as work() calls it at expireInSeconds: by the job's id alone (any state before completed); the row is deleted and inserted again, for a retry or as failed.
-- params: id int, now time
WITH deleted_jobs AS (
    DELETE FROM job WHERE name = 'payments' AND id = %(id)s AND state < 'completed'
    RETURNING *
), retried_jobs AS (
    INSERT INTO job (id, name, data, state, retry_limit, retry_count, retry_delay, expire_seconds,
                     heartbeat_seconds, singleton_on, start_after, created_on, started_on, output)
    SELECT id, name, data,
           CASE WHEN retry_count < retry_limit THEN 'retry'::job_state ELSE 'failed'::job_state END,
           retry_limit, retry_count, retry_delay, expire_seconds, heartbeat_seconds, singleton_on,
           %(now)s + retry_delay * interval '1 second', created_on, started_on,
           '{"message": "handler execution exceeded the expiration"}'::jsonb
    FROM deleted_jobs
    RETURNING id, state
)
SELECT id, CASE state WHEN 'failed' THEN 'Dead' ELSE 'Pending' END FROM retried_jobs;

-- name: requeue_expired
-- failJobsByTimeout and failJobsByHeartbeat, the supervisor's monitor: active jobs started over expire_seconds ago, or whose heartbeat is older than heartbeat_seconds (12.12+), are deleted and inserted again, for a retry or as failed. It reads each job's own expire_seconds and heartbeat_seconds, not a parameter.
-- params: now time
WITH deleted_jobs AS (
    DELETE FROM job
    WHERE name = 'payments' AND state = 'active'
      AND (started_on + expire_seconds * interval '1 second' < %(now)s
           OR heartbeat_on + heartbeat_seconds * interval '1 second' < %(now)s)
    RETURNING *
), retried_jobs AS (
    INSERT INTO job (id, name, data, state, retry_limit, retry_count, retry_delay, expire_seconds,
                     heartbeat_seconds, singleton_on, start_after, created_on, started_on, output)
    SELECT id, name, data,
           CASE WHEN retry_count < retry_limit THEN 'retry'::job_state ELSE 'failed'::job_state END,
           retry_limit, retry_count, retry_delay, expire_seconds, heartbeat_seconds, singleton_on,
           %(now)s + retry_delay * interval '1 second', created_on, started_on,
           '{"message": "job timed out"}'::jsonb
    FROM deleted_jobs
    RETURNING id, state, retry_count
)
SELECT id, CASE state WHEN 'failed' THEN 'Dead' ELSE 'Pending' END, NULL::text, (retry_count + 1)::bigint
FROM retried_jobs ORDER BY id;

-- name: dump_jobs
-- Every job in Lease Lab's words; pg-boss keeps no owner, and attempts = starts = retry_count + 1 once started.
-- params:
SELECT id, data->>'event_id', (data->'payment')::text,
       CASE WHEN state IN ('created', 'retry') THEN 'Pending' WHEN state = 'active' THEN 'Processing'
            WHEN state = 'completed' THEN 'Completed' ELSE 'Dead' END,
       NULL::text, LEAST(started_on + expire_seconds * interval '1 second',
                         heartbeat_on + heartbeat_seconds * interval '1 second'),
       CASE WHEN started_on IS NULL THEN 0 ELSE retry_count + 1 END::bigint,
       heartbeat_on, created_on, completed_on, output->>'message'
FROM job ORDER BY created_on, id;
