-- The facility status log: every change of every job's status, in seq order.
-- Written only by the leader replica, on the connection that holds the
-- leader lock (so a deposed leader cannot write); read by every replica.
CREATE TABLE facility_status_log (
    seq         bigserial PRIMARY KEY,
    job_id      text NOT NULL,
    user_name   text NOT NULL,
    body        jsonb NOT NULL,
    observed_at double precision NOT NULL
);
CREATE INDEX facility_status_log_job ON facility_status_log (job_id, seq);

-- When the leader last polled the scheduler (the followers' staleness), and who leads.
CREATE TABLE facility_poll (
    id          integer PRIMARY KEY CHECK (id = 1),
    observed_at double precision NOT NULL DEFAULT 0,
    leader      text NOT NULL DEFAULT '',
    epoch       bigint NOT NULL DEFAULT 0
);
INSERT INTO facility_poll (id) VALUES (1);
