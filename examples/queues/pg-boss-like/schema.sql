-- A pg-boss-like job table (after pg-boss 12's job table, trimmed): uuid ids the queue makes up
-- itself, a state enum whose order the claim relies on (created < retry < active < completed),
-- retry_count instead of attempts, a per-job expiry (expire_seconds) instead of a lease, no
-- owner column at all. singleton_on is `timestamp without time zone`, as in pg-boss.
CREATE TYPE job_state AS ENUM ('created', 'retry', 'active', 'completed', 'cancelled', 'failed');

CREATE TABLE job (
    id              uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    name            text        NOT NULL,
    data            jsonb,
    state           job_state   NOT NULL DEFAULT 'created',
    retry_limit     integer     NOT NULL DEFAULT 2,
    retry_count     integer     NOT NULL DEFAULT 0,
    retry_delay     integer     NOT NULL DEFAULT 0,
    expire_seconds  integer     NOT NULL DEFAULT 30,
    heartbeat_seconds integer,
    singleton_on    timestamp without time zone,
    start_after     timestamptz NOT NULL,
    created_on      timestamptz NOT NULL,
    started_on      timestamptz,
    heartbeat_on    timestamptz,
    completed_on    timestamptz,
    output          jsonb
);
CREATE INDEX job_fetch ON job (name, state, start_after);
