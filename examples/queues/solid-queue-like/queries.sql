-- A Solid Queue-like queue (after solid_queue 1.5's models): a claim that moves a job from ready
-- to claimed in data-changing steps with a final SELECT, no attempts column, process heartbeats,
-- a prune that fails the claimed jobs of a silent process, and (v1.5, #761) a finish that only
-- goes through while this process still holds the job's claimed execution. Its settings are in
-- queue.toml: `python -m sim review examples/queues/solid-queue-like/scenario.toml --sql
-- examples/queues/solid-queue-like` needs no --set.

-- name: insert_job
-- A job and its ready execution.
-- params: id int, event_id text, payload text, now time
WITH job AS (
    INSERT INTO solid_queue_jobs (id, queue_name, class_name, arguments, active_job_id, created_at)
    VALUES (%(id)s, 'payments', 'PaymentJob', %(payload)s, %(event_id)s, %(now)s)
    RETURNING id
)
INSERT INTO solid_queue_ready_executions (job_id, queue_name, priority, created_at)
SELECT id, 'payments', 0, %(now)s FROM job;

-- name: claim_skip_locked
-- ReadyExecution.claim: lock the next ready execution (skipping locked ones), insert its claimed execution for this process, delete the ready one. A Lease Lab worker is a single-job process: it registers once (Process.register, at its first claim; again only if the prune deleted its row) and a claim is a sign of life; a restarted worker is a new process under a new name (worker_identity = fresh). No attempts column: NULL.
-- params: owner text, now time
WITH alive AS (
    UPDATE solid_queue_processes SET last_heartbeat_at = %(now)s WHERE name = %(owner)s
    RETURNING id
), registered AS (
    INSERT INTO solid_queue_processes (name, last_heartbeat_at)
    SELECT %(owner)s, %(now)s WHERE NOT EXISTS (SELECT 1 FROM alive)
    RETURNING id
), process AS (
    SELECT id FROM alive UNION ALL SELECT id FROM registered
), candidate AS (
    SELECT id, job_id FROM solid_queue_ready_executions
    WHERE queue_name = 'payments'
    ORDER BY priority, job_id
    LIMIT 1
    FOR UPDATE SKIP LOCKED
), claimed AS (
    INSERT INTO solid_queue_claimed_executions (job_id, process_id, created_at)
    SELECT candidate.job_id, process.id, %(now)s FROM candidate, process
    RETURNING job_id
), unready AS (
    DELETE FROM solid_queue_ready_executions r USING claimed WHERE r.job_id = claimed.job_id
)
SELECT job_id, NULL::bigint FROM claimed;

-- name: heartbeat
-- The process heartbeat, while this process still holds the job's claimed execution.
-- params: id int, owner text, now time, lease_until time
UPDATE solid_queue_processes p SET last_heartbeat_at = %(now)s
FROM solid_queue_claimed_executions c
WHERE c.job_id = %(id)s AND c.process_id = p.id AND p.name = %(owner)s
RETURNING c.job_id, %(lease_until)s;

-- name: complete_fenced
-- ClaimedExecution#finished (v1.5): only while this process's claimed execution of the job exists; it is deleted and the job finished.
-- params: id int, owner text, now time
WITH finalized AS (
    DELETE FROM solid_queue_claimed_executions c USING solid_queue_processes p
    WHERE c.job_id = %(id)s AND c.process_id = p.id AND p.name = %(owner)s
    RETURNING c.job_id
)
UPDATE solid_queue_jobs j SET finished_at = %(now)s FROM finalized
WHERE j.id = finalized.job_id
RETURNING j.id;

-- name: release_job_fenced
-- ClaimedExecution#release at a graceful shutdown: the job is ready again, if this process still holds it.
-- params: id int, owner text
WITH released AS (
    DELETE FROM solid_queue_claimed_executions c USING solid_queue_processes p
    WHERE c.job_id = %(id)s AND c.process_id = p.id AND p.name = %(owner)s
    RETURNING c.job_id, c.created_at
), ready AS (
    INSERT INTO solid_queue_ready_executions (job_id, queue_name, priority, created_at)
    SELECT job_id, 'payments', 0, created_at FROM released
)
SELECT job_id, 'Pending' FROM released;

-- name: requeue_expired
-- The supervisor's prune: processes silent for the stuck age are deleted, and their claimed executions fail (failed_executions): the jobs are Dead, not retried.
-- params: now time, stuck_after interval
WITH pruned AS (
    DELETE FROM solid_queue_processes WHERE last_heartbeat_at < %(now)s - %(stuck_after)s
    RETURNING id, name
), orphaned AS (
    DELETE FROM solid_queue_claimed_executions c USING pruned
    WHERE c.process_id = pruned.id
    RETURNING c.job_id, pruned.name
), failed AS (
    INSERT INTO solid_queue_failed_executions (job_id, error, created_at)
    SELECT job_id, 'SolidQueue::Processes::ProcessPrunedError', %(now)s FROM orphaned
)
SELECT job_id, 'Dead', name, NULL::bigint FROM orphaned ORDER BY job_id;

-- name: dump_jobs
-- Every job in Lease Lab's words: finished, failed, claimed (its process is the owner) or ready; no attempts column (NULL).
-- params:
SELECT j.id, j.active_job_id, j.arguments,
       CASE WHEN j.finished_at IS NOT NULL THEN 'Completed'
            WHEN f.job_id IS NOT NULL THEN 'Dead'
            WHEN c.job_id IS NOT NULL THEN 'Processing' ELSE 'Pending' END,
       p.name, (p.last_heartbeat_at + interval '30 seconds')::timestamp, NULL::bigint,
       p.last_heartbeat_at, j.created_at, j.finished_at, f.error
FROM solid_queue_jobs j
LEFT JOIN solid_queue_claimed_executions c ON c.job_id = j.id
LEFT JOIN solid_queue_processes p ON p.id = c.process_id
LEFT JOIN solid_queue_failed_executions f ON f.job_id = j.id
ORDER BY j.id;
