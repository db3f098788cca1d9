-- Idempotency: the client's request id of a submission, and the intent token
-- the backend carries (Slurm: in the job's comment tag) so a daemon that died
-- between journaling and handing over can ask the backend whether the job exists.
ALTER TABLE jobs ADD COLUMN request_id TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN intent TEXT NOT NULL DEFAULT '';
CREATE UNIQUE INDEX jobs_request_id ON jobs (uid, request_id) WHERE request_id != '';

-- Commands end with the daemon that ran them: the process group to end on
-- the next start, identified by pid and its start time (no pid reuse).
ALTER TABLE commands ADD COLUMN pid INTEGER;
ALTER TABLE commands ADD COLUMN pid_start INTEGER;
