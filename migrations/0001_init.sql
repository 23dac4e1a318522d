-- 0001_init: runs, steps, events and stop-condition evaluations.
-- Timestamps are INTEGER milliseconds since the Unix epoch (UTC).

CREATE TABLE runs (
    id            TEXT    PRIMARY KEY,
    name          TEXT    NOT NULL DEFAULT '',
    workspace     TEXT    NOT NULL,
    goal          TEXT    NOT NULL,
    config        TEXT    NOT NULL,                -- the resolved config, frozen at creation (JSON)
    conditions    TEXT    NOT NULL DEFAULT '{}',   -- the stop condition set, frozen at creation (JSON)
    status        TEXT    NOT NULL CHECK (status IN
                    ('PENDING','RUNNING','PAUSED','WAITING','COMPLETED','FAILED','ABORTED','INTERRUPTED')),
    reason        TEXT    NOT NULL DEFAULT '',
    description   TEXT    NOT NULL DEFAULT '',
    condition     TEXT    NOT NULL DEFAULT '',     -- JSON of the triggering condition, '' when none
    exit_code     INTEGER CHECK (exit_code IS NULL OR exit_code BETWEEN 0 AND 3),
    stop_request  TEXT    NOT NULL DEFAULT '' CHECK (stop_request IN ('', 'graceful', 'now')),
    pause_request INTEGER NOT NULL DEFAULT 0 CHECK (pause_request IN (0, 1)),
    user_signal   INTEGER NOT NULL DEFAULT 0 CHECK (user_signal IN (0, 1)),
    wait_until    INTEGER,                         -- WAITING: when the agent's usage limit resets
    postmortem_at INTEGER,                         -- when runs/<id>/postmortem.md was written for the current ending
    created_at    INTEGER NOT NULL,
    started_at    INTEGER,
    ended_at      INTEGER,
    updated_at    INTEGER NOT NULL
);
CREATE INDEX runs_workspace_created ON runs (workspace, created_at);
CREATE INDEX runs_status ON runs (status, created_at);
CREATE INDEX runs_postmortem_due ON runs (status) WHERE postmortem_at IS NULL;

CREATE TABLE steps (
    id                 INTEGER PRIMARY KEY,
    run_id             TEXT    NOT NULL REFERENCES runs (id),
    seq                INTEGER NOT NULL,            -- 1-based position within the run
    phase              TEXT    NOT NULL CHECK (phase IN ('implementation','review','verification')),
    iteration          INTEGER NOT NULL CHECK (iteration >= 1),
    status             TEXT    NOT NULL CHECK (status IN ('RUNNING','SUCCEEDED','FAILED','CANCELED','INTERRUPTED')),
    exit_code          INTEGER,
    error              TEXT    NOT NULL DEFAULT '',
    started_at         INTEGER NOT NULL,
    ended_at           INTEGER,
    log_path           TEXT    NOT NULL,
    -- The step's process, for adoption after a daemon restart. proc_start is the
    -- leader's start time in clock ticks since boot (/proc/<pid>/stat field 22);
    -- together with boot_id it guards against pid reuse.
    pid                INTEGER,
    pgid               INTEGER,
    proc_start         INTEGER,
    boot_id            TEXT    NOT NULL DEFAULT '',
    -- Token usage and cost of this step.
    model              TEXT    NOT NULL DEFAULT '',
    input_tokens       INTEGER NOT NULL DEFAULT 0,
    output_tokens      INTEGER NOT NULL DEFAULT 0,
    cache_read_tokens  INTEGER NOT NULL DEFAULT 0,
    cache_write_tokens INTEGER NOT NULL DEFAULT 0,
    usage_found        INTEGER NOT NULL DEFAULT 0,
    reported_cost_usd  REAL,                        -- NULL: the agent reported none
    priced_cost_usd    REAL,                        -- NULL: the model is not in the pricing table
    -- Outcome details used by the completion gate and stop conditions.
    promise            INTEGER NOT NULL DEFAULT 0,  -- the completion promise ended the agent's final message
    final_message      TEXT    NOT NULL DEFAULT '', -- capped tail of the agent's final message
    rate_limited_until INTEGER,                     -- the agent hit a usage limit that resets then
    -- Test results of a verification step; NULL counts are unknown, never guessed.
    tests_format       TEXT    NOT NULL DEFAULT '',
    tests_passed       INTEGER,
    tests_failed       INTEGER,
    tests_skipped      INTEGER,
    tests_failed_names TEXT    NOT NULL DEFAULT '[]',
    tests_passed_names TEXT    NOT NULL DEFAULT '[]',
    -- Progress signals: workspace fingerprint after the step and the plan task it worked on.
    fingerprint        TEXT    NOT NULL DEFAULT '',
    plan_task          TEXT    NOT NULL DEFAULT '',
    plan_checked       INTEGER,
    UNIQUE (run_id, seq)
);
CREATE INDEX steps_running ON steps (status) WHERE status = 'RUNNING';

CREATE TABLE events (
    seq     INTEGER PRIMARY KEY,                    -- global order; rowid allocation keeps it gap-free per commit
    run_id  TEXT    NOT NULL DEFAULT '',
    step_id INTEGER,
    type    TEXT    NOT NULL,
    ts      INTEGER NOT NULL,
    payload TEXT    NOT NULL DEFAULT '{}'
);
CREATE INDEX events_run_seq ON events (run_id, seq);

CREATE TABLE evaluations (
    id          INTEGER PRIMARY KEY,
    run_id      TEXT    NOT NULL REFERENCES runs (id),
    step_id     INTEGER,
    iteration   INTEGER NOT NULL,
    at          INTEGER NOT NULL,
    duration_us INTEGER NOT NULL,
    results     TEXT    NOT NULL                    -- JSON array of condition results
);
CREATE INDEX evaluations_run ON evaluations (run_id, id);
