-- 0003_step_credential (PostgreSQL): SQLite's 0011_step_credential. An
-- agent step records the SHA-256 fingerprint of its agent preset and
-- credentials (never the key itself), so that a usage limit one run hits is
-- shared with every run of the same account. The partial index holds only
-- the limited steps.

ALTER TABLE steps ADD COLUMN credential TEXT NOT NULL DEFAULT '';
CREATE INDEX steps_credential_limit ON steps (credential, rate_limited_until)
    WHERE credential <> '' AND rate_limited_until IS NOT NULL AND api_unavailable = 0;
