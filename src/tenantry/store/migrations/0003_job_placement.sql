-- Where a job runs, as squeue/sacct show it: its working directory (from the
-- submission) and the node list the scheduler reports once it starts.
ALTER TABLE jobs ADD COLUMN cwd TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN nodes TEXT NOT NULL DEFAULT '';
UPDATE jobs SET cwd = COALESCE(json_extract(spec_json, '$.cwd'), '');
