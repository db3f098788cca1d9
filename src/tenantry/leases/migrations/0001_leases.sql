-- Leases survive a daemon restart: a pilot that dials back is recognised by
-- its secret (only its SHA-256 is kept) and its replayed results are kept.
CREATE TABLE leases (
    id           TEXT PRIMARY KEY,
    user         TEXT NOT NULL,
    uid          INTEGER NOT NULL,
    owner        TEXT NOT NULL,          -- Principal.key that caused the acquisition
    pool         TEXT NOT NULL,          -- JSON of the PoolKey
    secret_hash  TEXT NOT NULL,
    backend      TEXT NOT NULL,
    backend_id   TEXT NOT NULL DEFAULT '',
    state        TEXT NOT NULL,
    slots        INTEGER NOT NULL,
    walltime_end REAL NOT NULL DEFAULT 0,
    created_at   REAL NOT NULL,
    ready_at     REAL,
    ended_at     REAL,
    served       INTEGER NOT NULL DEFAULT 0,
    idle_core_s  REAL NOT NULL DEFAULT 0,
    host         TEXT NOT NULL DEFAULT '',
    pid          INTEGER NOT NULL DEFAULT 0,
    reason       TEXT NOT NULL DEFAULT ''
);
CREATE INDEX leases_state ON leases(state);

CREATE TABLE lease_results (
    id          TEXT PRIMARY KEY,       -- command id
    lease_id    TEXT NOT NULL,
    result      TEXT NOT NULL,          -- CommandResult as JSON
    finished_at REAL NOT NULL
);

CREATE TABLE lease_meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
