-- 0003_workspaces: isolation, the change ledger and what loopd made in git.

-- How a run uses its workspace, and where its worktree and branch are.
ALTER TABLE runs ADD COLUMN isolation TEXT NOT NULL DEFAULT 'in_place'
    CHECK (isolation IN ('in_place', 'worktree'));
ALTER TABLE runs ADD COLUMN worktree      TEXT NOT NULL DEFAULT ''; -- LOOPD_HOME/worktrees/<run-id>; '' for in_place
ALTER TABLE runs ADD COLUMN branch        TEXT NOT NULL DEFAULT ''; -- loop/<short-id>
ALTER TABLE runs ADD COLUMN base_branch   TEXT NOT NULL DEFAULT ''; -- the checkout's branch when the run started
ALTER TABLE runs ADD COLUMN base_commit   TEXT NOT NULL DEFAULT ''; -- the checkout's HEAD when the run started
ALTER TABLE runs ADD COLUMN landed_commit TEXT NOT NULL DEFAULT ''; -- the commit `loopctl land` made or moved to
-- The worktree's state as loopd last saw it: '' (none yet), 'present',
-- 'gone' (removed by hand), 'removed' (by loopctl clean).
ALTER TABLE runs ADD COLUMN worktree_state TEXT NOT NULL DEFAULT ''
    CHECK (worktree_state IN ('', 'present', 'gone', 'removed'));
CREATE INDEX runs_active_workspace ON runs (workspace, status);

-- Steps gain the phase 'setup' (a CHECK constraint: the table is rebuilt)
-- and the change each implementation step left behind (NULL: unknown).
CREATE TABLE steps_new (
    id                 INTEGER PRIMARY KEY,
    run_id             TEXT    NOT NULL REFERENCES runs (id),
    seq                INTEGER NOT NULL,
    phase              TEXT    NOT NULL CHECK (phase IN ('setup','implementation','review','verification')),
    iteration          INTEGER NOT NULL CHECK (iteration >= 0),   -- 0: the setup step, before iteration 1
    status             TEXT    NOT NULL CHECK (status IN ('RUNNING','SUCCEEDED','FAILED','CANCELED','INTERRUPTED')),
    exit_code          INTEGER,
    error              TEXT    NOT NULL DEFAULT '',
    started_at         INTEGER NOT NULL,
    ended_at           INTEGER,
    log_path           TEXT    NOT NULL,
    pid                INTEGER,
    pgid               INTEGER,
    proc_start         INTEGER,
    boot_id            TEXT    NOT NULL DEFAULT '',
    model              TEXT    NOT NULL DEFAULT '',
    input_tokens       INTEGER NOT NULL DEFAULT 0,
    output_tokens      INTEGER NOT NULL DEFAULT 0,
    cache_read_tokens  INTEGER NOT NULL DEFAULT 0,
    cache_write_tokens INTEGER NOT NULL DEFAULT 0,
    usage_found        INTEGER NOT NULL DEFAULT 0,
    reported_cost_usd  REAL,
    priced_cost_usd    REAL,
    promise            INTEGER NOT NULL DEFAULT 0,
    final_message      TEXT    NOT NULL DEFAULT '',
    rate_limited_until INTEGER,
    tests_format       TEXT    NOT NULL DEFAULT '',
    tests_passed       INTEGER,
    tests_failed       INTEGER,
    tests_skipped      INTEGER,
    tests_failed_names TEXT    NOT NULL DEFAULT '[]',
    tests_passed_names TEXT    NOT NULL DEFAULT '[]',
    fingerprint        TEXT    NOT NULL DEFAULT '',
    plan_task          TEXT    NOT NULL DEFAULT '',
    plan_checked       INTEGER,
    cancel_cause       TEXT    NOT NULL DEFAULT ''
        CHECK (cancel_cause IN ('', 'user', 'daemon_stop', 'max_duration', 'step_timeout', 'idle_timeout')),
    -- The change ledger: the commit that records this step's change (a run
    -- branch commit, or a snapshot under refs/loop/<run-id>/<iteration>),
    -- '' when nothing changed; the counts are NULL when nothing is known.
    change_commit      TEXT    NOT NULL DEFAULT '',
    files_changed      INTEGER,
    insertions         INTEGER,
    deletions          INTEGER,
    change_files       TEXT    NOT NULL DEFAULT '[]',
    UNIQUE (run_id, seq)
);
INSERT INTO steps_new (id, run_id, seq, phase, iteration, status, exit_code, error, started_at, ended_at, log_path,
    pid, pgid, proc_start, boot_id, model, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens,
    usage_found, reported_cost_usd, priced_cost_usd, promise, final_message, rate_limited_until, tests_format,
    tests_passed, tests_failed, tests_skipped, tests_failed_names, tests_passed_names, fingerprint, plan_task,
    plan_checked, cancel_cause)
SELECT id, run_id, seq, phase, iteration, status, exit_code, error, started_at, ended_at, log_path,
    pid, pgid, proc_start, boot_id, model, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens,
    usage_found, reported_cost_usd, priced_cost_usd, promise, final_message, rate_limited_until, tests_format,
    tests_passed, tests_failed, tests_skipped, tests_failed_names, tests_passed_names, fingerprint, plan_task,
    plan_checked, cancel_cause
FROM steps;
DROP TABLE steps;
ALTER TABLE steps_new RENAME TO steps;

-- Every worktree and branch loopd created, so that it removes only those
-- (never a `loop/*` worktree or branch a user made by hand).
CREATE TABLE git_objects (
    id         INTEGER PRIMARY KEY,
    run_id     TEXT    NOT NULL REFERENCES runs (id),
    kind       TEXT    NOT NULL CHECK (kind IN ('worktree', 'branch')),
    repo       TEXT    NOT NULL,   -- the repository's common git directory
    name       TEXT    NOT NULL,   -- the worktree's path, or the branch's short name
    created_at INTEGER NOT NULL,
    removed_at INTEGER,            -- when loopd removed it
    gone_at    INTEGER,            -- when loopd found it removed by someone else
    UNIQUE (repo, kind, name)
);
CREATE INDEX git_objects_run ON git_objects (run_id);
