-- A queue whose completion checks the job id only: a worker that lost its lease (a zombie: a
-- long GC pause, say) still completes the job that another worker now holds, and books it again.

-- name: complete_fenced
-- Mark the job Completed (the owner and attempt are not checked).
-- params: id int, now time
UPDATE payment_jobs
SET status = 'Completed', completed_at = %(now)s
WHERE id = %(id)s
RETURNING id;
