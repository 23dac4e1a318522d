-- 0004_run_leases (PostgreSQL): SQLite's 0012_run_leases, and the index
-- the takeover scan reads. A worker claims runs with FOR UPDATE SKIP
-- LOCKED, renews its leases every heartbeat in one statement, and fences
-- every write of a run by (lease_owner, lease_epoch); lease_expires_at is
-- Unix ms computed on the database's clock only, never a worker's.

ALTER TABLE runs ADD COLUMN lease_owner TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN lease_epoch BIGINT NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN lease_expires_at BIGINT;
CREATE INDEX runs_lease_expiry ON runs (lease_expires_at) WHERE status = 'RUNNING';
