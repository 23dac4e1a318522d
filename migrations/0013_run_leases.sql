-- 0013_run_leases: a run's lease, for a fleet of workers over PostgreSQL
-- (docs/fleet.md). The embedded daemon never sets these columns: it is the
-- only writer of its database and needs no lease. They exist here only so
-- that both dialects describe the same tables.
--   lease_owner       the worker that holds (or last held) the run ('' none)
--   lease_epoch       +1 at every claim; every write of a runner is fenced by it
--   lease_expires_at  Unix ms on the database's clock; NULL when not leased

ALTER TABLE runs ADD COLUMN lease_owner TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN lease_epoch INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN lease_expires_at INTEGER;
