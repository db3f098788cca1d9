-- Id counters: a job's number comes from one row (locked by the UPDATE that
-- takes it), so replicas sharing the database never hand out the same id.
CREATE TABLE counters (
    name TEXT PRIMARY KEY,
    n    BIGINT NOT NULL
);
INSERT INTO counters (name, n)
    SELECT 'jobs', COALESCE(MAX(CAST(substr(id, 2) AS BIGINT)), 0) FROM jobs;
