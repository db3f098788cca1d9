-- On PostgreSQL 0001 already holds these columns.
SELECT 1;
