-- 0009_trust_agent_files: the agents' own project files (.claude/settings.json,
-- .mcp.json, .gemini/settings.json, .codex/config.toml…) are trusted like
-- .loop/config, as kind 'agent'. SQLite cannot change a CHECK constraint in
-- place: the table is rebuilt with its rows.

CREATE TABLE trusted_files_new (
    workspace  TEXT    NOT NULL,
    path       TEXT    NOT NULL,
    kind       TEXT    NOT NULL CHECK (kind IN ('config', 'stop', 'env', 'agent')),
    sha256     TEXT    NOT NULL CHECK (length(sha256) = 64),
    summary    TEXT    NOT NULL DEFAULT '{}',
    trusted_at INTEGER NOT NULL,
    PRIMARY KEY (workspace, path)
);
INSERT INTO trusted_files_new (workspace, path, kind, sha256, summary, trusted_at)
    SELECT workspace, path, kind, sha256, summary, trusted_at FROM trusted_files;
DROP TABLE trusted_files;
ALTER TABLE trusted_files_new RENAME TO trusted_files;
