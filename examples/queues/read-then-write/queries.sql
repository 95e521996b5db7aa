-- A queue that reads, then writes: the worker SELECTs Pending jobs (Lease Lab's
-- select_candidates) and then takes one with an UPDATE that matches the id alone. Two workers
-- that read the same Pending row both win: double claims, payments processed twice.
-- Review it with policy.claim = conditional_update (the SELECT, then this claim).

-- name: claim_conditional
-- Take the job that the SELECT returned, whatever its state by now.
-- params: id int, owner text, now time, lease_until time
UPDATE payment_jobs
SET status = 'Processing', lease_owner = %(owner)s, lease_until = %(lease_until)s,
    heartbeat_at = %(now)s, attempts = attempts + 1
WHERE id = %(id)s
RETURNING id, attempts;
