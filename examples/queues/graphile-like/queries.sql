-- A graphile-worker-like queue: no heartbeat and no watcher; the claim itself takes jobs whose
-- lock is older than the stale age (4 h in graphile-worker, 30 s here). Completion checks the
-- owner (locked_by) but not the attempt number.
-- Review it with examples/queues/graphile-like/scenario.toml (lease_ttl = the stale age).

-- name: insert_job
-- Enqueue an unlocked job.
-- params: id int, event_id text, payload text, now time
INSERT INTO jobs (id, payload, event_id, created_at) VALUES (%(id)s, %(payload)s::json, %(event_id)s, %(now)s);

-- name: claim_skip_locked
-- get_job: the oldest job that is unlocked, or whose lock went stale, skipping locked rows.
-- params: owner text, now time
UPDATE jobs
SET attempts = attempts + 1, locked_by = %(owner)s, locked_at = %(now)s
WHERE id = (
    SELECT id FROM jobs
    WHERE finished_at IS NULL AND attempts < max_attempts
      AND (locked_at IS NULL OR locked_at < %(now)s - interval '30 seconds')
    ORDER BY id
    LIMIT 1
    FOR UPDATE SKIP LOCKED
)
RETURNING id, attempts;

-- name: complete_fenced
-- Finish the job if this worker holds its lock (the attempt is not checked).
-- params: id int, owner text, now time
UPDATE jobs SET finished_at = %(now)s, locked_at = NULL
WHERE id = %(id)s AND locked_by = %(owner)s
RETURNING id;

-- name: requeue_expired
-- graphile-worker has no watcher: the claim takes stale locks itself.
-- params:

-- name: dump_jobs
-- Every job in Lease Lab's words: a lock is a lease ending at the stale age.
-- params:
SELECT id, event_id, payload::text,
       CASE WHEN finished_at IS NOT NULL THEN 'Completed'
            WHEN locked_at IS NOT NULL THEN 'Processing'
            WHEN attempts >= max_attempts THEN 'Dead' ELSE 'Pending' END,
       locked_by, locked_at + interval '30 seconds', attempts::bigint, NULL::timestamptz,
       created_at, finished_at, NULL::text
FROM jobs ORDER BY id;
