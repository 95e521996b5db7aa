-- Lease Lab schema: a payment job queue handed out by leases, the dedup markers of seed 2 and
-- the ledger that stands for the database effect. Created inside the run's own schema.
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
    last_error    text
);

-- Claims scan open jobs oldest first; the watcher scans expired leases by expiry.
CREATE INDEX payment_jobs_open_idx ON payment_jobs (id) WHERE status IN ('Pending', 'Processing');
CREATE INDEX payment_jobs_lease_idx ON payment_jobs (lease_until) WHERE status = 'Processing';
CREATE INDEX payment_jobs_event_idx ON payment_jobs (event_id);

-- Seed 2: one row per logical event that has been applied; the unique key is the dedup claim.
CREATE TABLE processed_events (
    event_id      text        PRIMARY KEY,
    payload_hash  text        NOT NULL,               -- same id, other payload: rejected by policy
    processed_at  timestamptz NOT NULL
);
CREATE INDEX processed_events_age_idx ON processed_events (processed_at);

-- The database effect of processing a payment: one row per application.
CREATE TABLE ledger (
    entry_id      bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id        bigint      NOT NULL,
    event_id      text        NOT NULL,
    amount_cents  bigint      NOT NULL,
    worker        text        NOT NULL,
    attempt       integer     NOT NULL,
    applied_at    timestamptz NOT NULL
);
CREATE INDEX ledger_event_idx ON ledger (event_id);
