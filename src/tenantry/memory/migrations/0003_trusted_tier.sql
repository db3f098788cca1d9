-- The trusted tier: a second FTS5 index holding only live, unquarantined lessons
-- with probe-verified or staff-approved trust (rowid = lessons.seq). It is small,
-- so a query can use all of its terms there however common they are in the bulk
-- of agent-observed lessons. Kept in step by the store on every write.
CREATE VIRTUAL TABLE trusted_fts USING fts5 (
    title, body, subjects, signature, tokenize = 'unicode61'
);
INSERT INTO trusted_fts (rowid, title, body, subjects, signature)
    SELECT f.rowid, f.title, f.body, f.subjects, f.signature
    FROM lessons_fts f JOIN lessons l ON l.seq = f.rowid
    WHERE l.trust_rank >= 2 AND l.quarantined = 0
      AND l.status IN ('candidate', 'active', 'stale');
