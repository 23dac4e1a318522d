-- 0005_run_leases (PostgreSQL): SQLite's 0013_run_leases. A worker claims
-- runs with FOR UPDATE SKIP LOCKED, renews its leases every heartbeat in
-- one statement, and fences every write of a run by (lease_owner,
-- lease_epoch); lease_expires_at is Unix ms computed on the database's
-- clock only, never a worker's. It has no index on purpose: a renewal
-- then changes no indexed column, so PostgreSQL can update the row in
-- place (HOT) instead of adding an entry to every index of runs at every
-- heartbeat; the takeover scan finds RUNNING runs through runs_status.

ALTER TABLE runs ADD COLUMN lease_owner TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN lease_epoch BIGINT NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN lease_expires_at BIGINT;
-- Room on each page for those in-place updates (a full page forces the
-- new row version elsewhere, and an entry in every index).
ALTER TABLE runs SET (fillfactor = 50);
