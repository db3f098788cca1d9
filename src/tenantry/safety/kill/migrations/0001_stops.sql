-- Kill-switch stops. A stop is active while resumed_at IS NULL.
-- kind 'session' matches Principal.session or Principal.key; kind 'user' every
-- agent session of that user. owner limits a stop to one user's principals
-- ('*' = any user; set when a staff member stops a session).
CREATE TABLE stops (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    kind        TEXT NOT NULL CHECK (kind IN ('session', 'user')),
    target      TEXT NOT NULL,
    owner       TEXT NOT NULL,
    by          TEXT NOT NULL,
    reason      TEXT NOT NULL DEFAULT '',
    stopped_at  REAL NOT NULL,
    resumed_at  REAL,
    resumed_by  TEXT NOT NULL DEFAULT '',
    summary_json TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX stops_active ON stops (kind, target) WHERE resumed_at IS NULL;
