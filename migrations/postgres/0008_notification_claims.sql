-- 0008_notification_claims (PostgreSQL): SQLite's 0016_notification_claims.
-- A due notification is claimed (claim_owner, claim_epoch + 1,
-- claim_expires_at on the database's clock) by one worker or API node
-- before it is sent, and its attempt is recorded only under that claim:
-- two nodes never send it at once, and a node that dies mid-delivery
-- leaves it to another once the claim expires. The same for the
-- postmortem of an ended run (postmortem_owner…).

ALTER TABLE notifications ADD COLUMN claim_owner TEXT NOT NULL DEFAULT '';
ALTER TABLE notifications ADD COLUMN claim_epoch BIGINT NOT NULL DEFAULT 0;
ALTER TABLE notifications ADD COLUMN claim_expires_at BIGINT NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN postmortem_owner TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN postmortem_epoch BIGINT NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN postmortem_expires_at BIGINT NOT NULL DEFAULT 0;
-- What every worker's claim scan looks for: ended runs whose postmortem is
-- not written, or is held.
CREATE INDEX runs_postmortem_claimable ON runs (ended_at) WHERE postmortem_at IS NULL OR postmortem_owner <> '';
