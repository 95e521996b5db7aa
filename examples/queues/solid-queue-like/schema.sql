-- A Solid Queue-like schema (after solid_queue's migrations, trimmed): jobs, and one table per
-- state an execution is in (ready, claimed, failed); processes heartbeat in their own table. No
-- attempts column anywhere, and Rails' datetime columns are `timestamp without time zone`.
CREATE TABLE solid_queue_jobs (
    id            bigint       PRIMARY KEY,
    queue_name    text         NOT NULL,
    class_name    text         NOT NULL,
    arguments     text,
    active_job_id text,
    finished_at   timestamp(6) without time zone,
    created_at    timestamp(6) without time zone NOT NULL
);
CREATE TABLE solid_queue_ready_executions (
    id          bigserial PRIMARY KEY,
    job_id      bigint    NOT NULL UNIQUE,
    queue_name  text      NOT NULL,
    priority    integer   NOT NULL DEFAULT 0,
    created_at  timestamp(6) without time zone NOT NULL
);
CREATE TABLE solid_queue_claimed_executions (
    id          bigserial PRIMARY KEY,
    job_id      bigint    NOT NULL UNIQUE,
    process_id  bigint,
    created_at  timestamp(6) without time zone NOT NULL
);
CREATE TABLE solid_queue_failed_executions (
    id          bigserial PRIMARY KEY,
    job_id      bigint    NOT NULL UNIQUE,
    error       text,
    created_at  timestamp(6) without time zone NOT NULL
);
CREATE TABLE solid_queue_processes (
    id                bigserial PRIMARY KEY,
    name              text      NOT NULL,
    kind              text      NOT NULL DEFAULT 'Worker',
    last_heartbeat_at timestamp(6) without time zone NOT NULL
);
