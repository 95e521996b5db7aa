-- A River-like job table (after River's river_job, trimmed): `state` instead of a status, no
-- lease_until, no owner column but the list of workers that attempted the job. Lease Lab's
-- dedup markers and ledger are created beside it, as always.
CREATE TABLE river_job (
    id            bigint      PRIMARY KEY,
    args          jsonb       NOT NULL,
    state         text        NOT NULL DEFAULT 'available'
                  CHECK (state IN ('available', 'running', 'completed', 'discarded')),
    attempt       smallint    NOT NULL DEFAULT 0,
    max_attempts  smallint    NOT NULL DEFAULT 25,
    attempted_at  timestamptz,
    attempted_by  text[]      NOT NULL DEFAULT '{}',
    scheduled_at  timestamptz NOT NULL,
    created_at    timestamptz NOT NULL,
    finalized_at  timestamptz,
    errors        text[]      NOT NULL DEFAULT '{}'
);
CREATE INDEX river_job_state_idx ON river_job (state, scheduled_at, id);
