-- 0011_step_credential: an agent step records the fingerprint of its agent
-- preset and credentials (a SHA-256 of the preset, its config home and its
-- API key or token: never the key itself). A usage limit one run hits is
-- then shared: another run with the same fingerprint waits for the same
-- reset before its next agent step instead of spending an attempt on it.
-- The partial index holds only the limited steps, so the check before every
-- agent step reads a handful of rows.

ALTER TABLE steps ADD COLUMN credential TEXT NOT NULL DEFAULT '';
CREATE INDEX steps_credential_limit ON steps (credential, rate_limited_until)
    WHERE credential <> '' AND rate_limited_until IS NOT NULL AND api_unavailable = 0;
