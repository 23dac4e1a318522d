-- 0014_api_tokens: the bearer tokens of a fleet's users, beside the API
-- node's own LOOPD_HOME/http.token. Only a SHA-256 of each token is kept:
-- whoever reads the database cannot use it. A user (name) has at most one
-- token in use; a revoked token stays as a record. A fleet run also
-- records the repository it comes from (repo_url: the clone's origin),
-- and whose token created it (created_by: the token's name; '' for the
-- owner's socket and http.token).

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
