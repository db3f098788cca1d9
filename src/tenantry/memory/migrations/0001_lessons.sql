-- Facility memory: lessons (content immutable), their subjects, an append-only
-- history of lifecycle transitions, endorsements, and an FTS5 index.
CREATE TABLE lessons (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    kind TEXT NOT NULL,
    scope TEXT NOT NULL,
    owner_user TEXT NOT NULL,
    owner_key TEXT NOT NULL,
    owner_project TEXT NOT NULL DEFAULT '',
    owner_agent TEXT NOT NULL DEFAULT 'human',
    title TEXT NOT NULL,
    body TEXT NOT NULL,
    subject TEXT NOT NULL DEFAULT '{}',
    error_signature TEXT NOT NULL DEFAULT '',
    sig_hash TEXT NOT NULL DEFAULT '',
    evidence TEXT NOT NULL DEFAULT '[]',
    sources TEXT NOT NULL DEFAULT '[]',
    claim TEXT,
    trust TEXT NOT NULL,
    trust_rank INTEGER NOT NULL,
    status TEXT NOT NULL,
    quarantined INTEGER NOT NULL DEFAULT 0,
    findings TEXT NOT NULL DEFAULT '[]',
    supersedes TEXT NOT NULL DEFAULT '',
    superseded_by TEXT NOT NULL DEFAULT '',
    proposed_scope TEXT NOT NULL DEFAULT '',
    ttl_days REAL NOT NULL,
    verified_at REAL,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL
);
CREATE INDEX lessons_sig ON lessons (sig_hash, trust_rank DESC, seq DESC);
CREATE INDEX lessons_status ON lessons (status, scope);
CREATE INDEX lessons_owner ON lessons (owner_user, owner_key);

CREATE TABLE lesson_subjects (
    lesson_id TEXT NOT NULL REFERENCES lessons (id),
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (lesson_id, key)
);
CREATE INDEX lesson_subjects_kv ON lesson_subjects (key, value);

CREATE TABLE lesson_history (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    lesson_id TEXT NOT NULL,
    ts REAL NOT NULL,
    actor TEXT NOT NULL,
    action TEXT NOT NULL,
    detail TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX lesson_history_id ON lesson_history (lesson_id, seq);

CREATE TABLE endorsements (
    lesson_id TEXT NOT NULL,
    principal_key TEXT NOT NULL,
    user TEXT NOT NULL,
    project TEXT NOT NULL DEFAULT '',
    ts REAL NOT NULL,
    PRIMARY KEY (lesson_id, principal_key)
);

-- Processed text (see tenantry.memory.terms); rowid = lessons.seq.
CREATE VIRTUAL TABLE lessons_fts USING fts5 (
    title, body, subjects, signature, tokenize = 'unicode61'
);
CREATE VIRTUAL TABLE lessons_vocab USING fts5vocab (lessons_fts, 'row');
