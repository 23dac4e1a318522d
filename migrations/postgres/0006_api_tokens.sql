-- 0006_api_tokens (PostgreSQL): SQLite's 0014_api_tokens. The bearer
-- tokens of a fleet's users, stored as SHA-256 only, at most one in use per
-- name; the repository a fleet run comes from, and whose token created it.

CREATE TABLE api_tokens (
    id         TEXT    PRIMARY KEY,
    name       TEXT    NOT NULL,
    sha256     TEXT    NOT NULL UNIQUE,
    created_at BIGINT  NOT NULL,
    revoked_at BIGINT
);
CREATE UNIQUE INDEX api_tokens_name_in_use ON api_tokens (name) WHERE revoked_at IS NULL;

ALTER TABLE runs ADD COLUMN repo_url TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN created_by TEXT NOT NULL DEFAULT '';
