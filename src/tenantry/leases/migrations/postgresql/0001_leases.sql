-- Leases (see ../0001_leases.sql), PostgreSQL types.
CREATE TABLE leases (
    id           TEXT PRIMARY KEY,
    "user"       TEXT NOT NULL,
    uid          BIGINT NOT NULL,
    owner        TEXT NOT NULL,
    pool         TEXT NOT NULL,
    secret_hash  TEXT NOT NULL,
    backend      TEXT NOT NULL,
    backend_id   TEXT NOT NULL DEFAULT '',
    state        TEXT NOT NULL,
    slots        INTEGER NOT NULL,
    walltime_end DOUBLE PRECISION NOT NULL DEFAULT 0,
    created_at   DOUBLE PRECISION NOT NULL,
    ready_at     DOUBLE PRECISION,
    ended_at     DOUBLE PRECISION,
    served       BIGINT NOT NULL DEFAULT 0,
    idle_core_s  DOUBLE PRECISION NOT NULL DEFAULT 0,
    host         TEXT NOT NULL DEFAULT '',
    pid          BIGINT NOT NULL DEFAULT 0,
    reason       TEXT NOT NULL DEFAULT ''
);
CREATE INDEX leases_state ON leases(state);

CREATE TABLE lease_results (
    id          TEXT PRIMARY KEY,
    lease_id    TEXT NOT NULL,
    result      TEXT NOT NULL,
    finished_at DOUBLE PRECISION NOT NULL
);

CREATE TABLE lease_meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
