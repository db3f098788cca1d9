-- Tenantry main store, schema version 1.
-- Principals are identified by Principal.key ("user/agent/session").

CREATE TABLE sessions (
    principal   TEXT PRIMARY KEY,
    uid         INTEGER NOT NULL,
    user        TEXT NOT NULL,
    agent       TEXT NOT NULL,
    session     TEXT NOT NULL,
    host        TEXT NOT NULL,
    project     TEXT NOT NULL,
    first_seen  REAL NOT NULL,
    last_seen   REAL NOT NULL,
    requests    INTEGER NOT NULL DEFAULT 0
);

-- Jobs are journaled *before* they are handed to a backend (phase 'journaled')
-- and updated after ('handed'), so a crash between the two is detectable.
CREATE TABLE jobs (
    id            TEXT PRIMARY KEY,
    backend       TEXT NOT NULL,
    backend_id    TEXT NOT NULL DEFAULT '',
    phase         TEXT NOT NULL DEFAULT 'journaled',
    state         TEXT NOT NULL,
    principal     TEXT NOT NULL,
    uid           INTEGER NOT NULL,
    name          TEXT NOT NULL DEFAULT '',
    spec_json     TEXT NOT NULL,
    spec_hash     TEXT NOT NULL,
    submitted_at  REAL NOT NULL,
    started_at    REAL,
    ended_at      REAL,
    exit_code     INTEGER,
    reason        TEXT NOT NULL DEFAULT '',
    output        TEXT NOT NULL DEFAULT '',
    error         TEXT NOT NULL DEFAULT '',
    resources_json TEXT NOT NULL DEFAULT '{}',
    updated_at    REAL NOT NULL
);
CREATE INDEX jobs_uid_state ON jobs (uid, state);
CREATE INDEX jobs_dedup ON jobs (principal, spec_hash, submitted_at);
CREATE INDEX jobs_backend_id ON jobs (backend, backend_id);

CREATE TABLE commands (
    id           TEXT PRIMARY KEY,
    principal    TEXT NOT NULL,
    uid          INTEGER NOT NULL,
    argv_json    TEXT NOT NULL,
    cwd          TEXT NOT NULL,
    where_run    TEXT NOT NULL,
    started_at   REAL NOT NULL,
    ended_at     REAL,
    exit_code    INTEGER,
    state        TEXT NOT NULL DEFAULT 'running',
    reason       TEXT NOT NULL DEFAULT '',
    cpu_s        REAL NOT NULL DEFAULT 0,
    max_rss_kb   INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX commands_principal ON commands (principal, started_at);

CREATE TABLE events (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    ts          REAL NOT NULL,
    type        TEXT NOT NULL,
    principal   TEXT NOT NULL DEFAULT '',
    subject     TEXT NOT NULL DEFAULT '',
    outcome     TEXT NOT NULL DEFAULT '',
    duration_s  REAL,
    data_json   TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX events_ts ON events (ts);
CREATE INDEX events_type_ts ON events (type, ts);
