-- A graphile-worker-like job table (after graphile_worker._private_jobs, v0.16+, trimmed): a lock
-- (locked_at, locked_by) instead of a lease, and is_available, a generated column the claim
-- reads: a locked job is never available, however old its lock, until the periodic reset clears
-- it. graphile-worker deletes a job once it completes, and so does this queue.
CREATE TABLE jobs (
    id            bigint      PRIMARY KEY,
    payload       json        NOT NULL,
    event_id      text        NOT NULL,
    attempts      integer     NOT NULL DEFAULT 0,
    max_attempts  integer     NOT NULL DEFAULT 25,
    run_at        timestamptz NOT NULL,
    locked_at     timestamptz,
    locked_by     text,
    last_error    text,
    created_at    timestamptz NOT NULL,
    is_available  boolean     GENERATED ALWAYS AS (locked_at IS NULL AND attempts < max_attempts) STORED
);
CREATE INDEX jobs_main_index ON jobs (run_at, id) WHERE is_available;
