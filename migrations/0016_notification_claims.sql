-- 0016_notification_claims: who is delivering a notification, and who is
-- writing a run's postmortem, in a fleet. A worker or API node claims a due
-- notification (claim_owner, claim_epoch + 1, claim_expires_at on the
-- database's clock) before it sends it, and records the attempt only under
-- that claim: two nodes never send one notification at once, and a node
-- that dies mid-delivery leaves it to another once the claim expires. The
-- same for the postmortem of an ended run (postmortem_owner…). The embedded
-- SQLite daemon is the only sender of its outbox and never claims: the
-- columns stay at their defaults there.

ALTER TABLE notifications ADD COLUMN claim_owner TEXT NOT NULL DEFAULT '';
ALTER TABLE notifications ADD COLUMN claim_epoch INTEGER NOT NULL DEFAULT 0;
ALTER TABLE notifications ADD COLUMN claim_expires_at INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN postmortem_owner TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN postmortem_epoch INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN postmortem_expires_at INTEGER NOT NULL DEFAULT 0;
