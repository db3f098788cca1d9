-- Id counters: a job's number comes from one row, so processes that share the
-- store (facility replicas) never hand out the same id and none is reused.
CREATE TABLE counters (
    name TEXT PRIMARY KEY,
    n    INTEGER NOT NULL
);
INSERT INTO counters (name, n)
    SELECT 'jobs', COALESCE(MAX(CAST(substr(id, 2) AS INTEGER)), 0) FROM jobs;
