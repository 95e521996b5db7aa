-- The seed article's queue, as Lease Lab ships it: the claim, heartbeat, completion and watcher
-- of sql/queries.sql, copied here so that a review quotes them from this file. Clean: the claim is
-- one conditional UPDATE, heartbeat and completion are fenced by owner + attempt, a watcher exists.

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
