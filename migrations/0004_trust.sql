-- 0004_trust: the workspace files this user trusted (loopctl trust), and
-- the env file each run must find still trusted before every step.

-- One row per trusted file of a workspace. sha256 is of the file's exact
-- bytes; summary is what the file set then (commands, variable names,
-- setting names as JSON, never an env value), to say what changed.
CREATE TABLE trusted_files (
    workspace  TEXT    NOT NULL,
    path       TEXT    NOT NULL,
    kind       TEXT    NOT NULL CHECK (kind IN ('config', 'stop', 'env')),
    sha256     TEXT    NOT NULL CHECK (length(sha256) = 64),
    summary    TEXT    NOT NULL DEFAULT '{}',
    trusted_at INTEGER NOT NULL,
    PRIMARY KEY (workspace, path)
);

-- A run whose env file the workspace picked: it is loaded at every step
-- only while its content is still trusted.
CREATE TABLE run_env_trust (
    run_id TEXT PRIMARY KEY REFERENCES runs (id),
    path   TEXT NOT NULL
);
