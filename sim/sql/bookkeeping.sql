-- Lease Lab schema, part 2: its own bookkeeping, the dedup markers of seed 2 and the ledger that
-- stands for the database effect. Always Lease Lab's, also under a user's queue definition.

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
