-- The trusted tier (see ../0003_trusted_tier.sql), as a plain table.
CREATE TABLE trusted_fts (
    rowid BIGINT PRIMARY KEY,
    title TEXT NOT NULL,
    body TEXT NOT NULL,
    subjects TEXT NOT NULL,
    signature TEXT NOT NULL
);
CREATE INDEX trusted_fts_text ON trusted_fts
    USING gin (to_tsvector('simple', title || ' ' || body || ' ' || subjects || ' ' || signature));
INSERT INTO trusted_fts (rowid, title, body, subjects, signature)
    SELECT f.rowid, f.title, f.body, f.subjects, f.signature
    FROM lessons_fts f JOIN lessons l ON l.seq = f.rowid
    WHERE l.trust_rank >= 2 AND l.quarantined = 0
      AND l.status IN ('candidate', 'active', 'stale');
