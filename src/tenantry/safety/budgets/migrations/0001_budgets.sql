-- Budget counters (one row per charge or measured usage), kept across restarts.
CREATE TABLE usage (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    ts          REAL NOT NULL,
    user        TEXT NOT NULL,
    principal   TEXT NOT NULL,
    metric      TEXT NOT NULL,
    amount      REAL NOT NULL,
    action      TEXT NOT NULL DEFAULT '',
    ref         TEXT NOT NULL DEFAULT ''
);
CREATE INDEX usage_user ON usage (user, metric, ts);
CREATE INDEX usage_principal ON usage (principal, metric, ts);

-- Jobs submitted and not yet ended: their estimated hours count as committed.
CREATE TABLE inflight (
    job_id          TEXT PRIMARY KEY,
    user            TEXT NOT NULL,
    principal       TEXT NOT NULL,
    cpus            REAL NOT NULL,
    gpus            REAL NOT NULL,
    est_hours       REAL NOT NULL,
    submitted_at    REAL NOT NULL,
    started_at      REAL
);
CREATE INDEX inflight_user ON inflight (user);

-- Leases held now (from lease.ready / lease.released / lease.lost events).
CREATE TABLE leases (
    lease_id    TEXT PRIMARY KEY,
    user        TEXT NOT NULL,
    principal   TEXT NOT NULL,
    ts          REAL NOT NULL
);
