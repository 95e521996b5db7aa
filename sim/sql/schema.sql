-- Lease Lab schema, part 1: the payment job queue handed out by leases. Created inside the run's
-- own schema, after bookkeeping.sql (the dedup markers and the ledger). A queue directory's
-- schema.sql replaces this file, never bookkeeping.sql.
-- Times are timestamptz; Lease Lab binds them as a fixed epoch + simulated seconds.

CREATE TABLE payment_jobs (
    id            bigint      PRIMARY KEY,
    event_id      text        NOT NULL,               -- stable id of the logical event (seed 2)
    payload       text        NOT NULL,               -- JSON text: amount, currency, ...
    status        text        NOT NULL DEFAULT 'Pending'
                  CHECK (status IN ('Pending', 'Processing', 'Completed', 'Dead')),
    lease_owner   text,                               -- kept after the lease, for diagnosis
    lease_until   timestamptz,
    attempts      integer     NOT NULL DEFAULT 0,     -- incremented on every lease, never reset
    run_after     timestamptz,                        -- a requeued job waits for its retry backoff
    heartbeat_at  timestamptz,
    created_at    timestamptz NOT NULL,
    completed_at  timestamptz,
    last_error    text,
    stalls        integer     NOT NULL DEFAULT 0,     -- recoveries by a stall check or a process prune
    stall_marked  boolean     NOT NULL DEFAULT false  -- seen Processing by the last two-phase stall pass
);

-- Claims scan open jobs oldest first; the watcher scans expired leases by expiry.
CREATE INDEX payment_jobs_open_idx ON payment_jobs (id) WHERE status IN ('Pending', 'Processing');
CREATE INDEX payment_jobs_lease_idx ON payment_jobs (lease_until) WHERE status = 'Processing';
CREATE INDEX payment_jobs_event_idx ON payment_jobs (event_id);
CREATE INDEX payment_jobs_marked_idx ON payment_jobs (id) WHERE stall_marked;

-- Process liveness (policy.process_heartbeat_interval > 0): one row per worker process, renewed by
-- the process, not per job; a job's lease_owner names the process that holds it.
CREATE TABLE worker_processes (
    name          text        PRIMARY KEY,
    started_at    timestamptz NOT NULL,
    heartbeat_at  timestamptz NOT NULL
);
CREATE INDEX worker_processes_heartbeat_idx ON worker_processes (heartbeat_at);
