-- A graphile-worker-like job table (after graphile_worker.jobs, trimmed): a lock (locked_at,
-- locked_by) instead of a lease; a lock older than the stale age is free to take. graphile-worker
-- deletes a finished job; here the row stays, with finished_at set, so the final table can be read.
CREATE TABLE jobs (
    id            bigint      PRIMARY KEY,
    payload       json        NOT NULL,
    event_id      text        NOT NULL,
    attempts      integer     NOT NULL DEFAULT 0,
    max_attempts  integer     NOT NULL DEFAULT 25,
    locked_at     timestamptz,
    locked_by     text,
    created_at    timestamptz NOT NULL,
    finished_at   timestamptz
);
