-- Content classes of a lesson (remote, credentials, privilege; see
-- tenantry.memory.content), decided once at write time: a sensitive lesson is
-- shown to other principals only once staff approved it.
ALTER TABLE lessons ADD COLUMN classes TEXT NOT NULL DEFAULT '';
ALTER TABLE lessons ADD COLUMN sensitive INTEGER NOT NULL DEFAULT 0;
