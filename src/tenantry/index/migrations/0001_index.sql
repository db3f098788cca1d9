-- The workspace index: one row per registered workspace, one per indexed path,
-- compressed text of indexed files, and a contentless trigram index over it.

CREATE TABLE workspaces (
    id INTEGER PRIMARY KEY,
    root TEXT NOT NULL UNIQUE,          -- absolute, resolved at registration
    added_at REAL NOT NULL,
    crawled_at REAL,                    -- end of the last complete crawl
    swept_at REAL                       -- end of the last directory sweep
);

-- Paths are relative to the workspace root ('' is the root itself). `base` is the
-- 1-based offset of the final name in `path`, so name filters use substr(path, base)
-- without a second copy of the name. `parent` is the id of the parent directory row.
CREATE TABLE entries (
    id INTEGER PRIMARY KEY,
    ws INTEGER NOT NULL,
    parent INTEGER NOT NULL,
    path TEXT NOT NULL,
    base INTEGER NOT NULL,
    kind TEXT NOT NULL,                 -- f file, d directory, l symlink, o other
    size INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    mode INTEGER NOT NULL,
    text INTEGER NOT NULL DEFAULT 0     -- 0 none, 1 indexed text, 2 binary, 3 too large, 4 unreadable
);
CREATE UNIQUE INDEX entries_path ON entries (ws, path);
CREATE INDEX entries_parent ON entries (parent);
CREATE INDEX entries_mtime ON entries (ws, mtime_ns);
-- names (find --name with a literal prefix, exact names) without a second copy in the table
CREATE INDEX entries_name ON entries (ws, substr(path, base));

-- zlib-compressed text of files with text = 1 (exact verification of grep hits).
CREATE TABLE content (
    id INTEGER PRIMARY KEY,             -- = entries.id
    z BLOB NOT NULL
);

-- Contentless trigram index (rowid = entries.id); detail=none keeps only which rows
-- hold a trigram, the smallest form. Queries AND together single trigrams.
CREATE VIRTUAL TABLE grams USING fts5 (body, content = '', tokenize = 'trigram', detail = 'none', columnsize = 0);
