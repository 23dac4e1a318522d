-- 0012_step_phase_baseline: steps gain the phase 'baseline' (verify_baseline:
-- the verification run once on the untouched workspace before iteration 1,
-- at iteration 0 like the setup step) and tests_ignored_names, the failing
-- tests of a verification step that were already failing in the baseline
-- (pre-existing: the verify gate ignores them). A CHECK constraint cannot be
-- altered in SQLite: the table is rebuilt, its rows and ids kept.

CREATE TABLE steps_new (
    id                 INTEGER PRIMARY KEY,
    run_id             TEXT    NOT NULL REFERENCES runs (id),
    seq                INTEGER NOT NULL,
    phase              TEXT    NOT NULL CHECK (phase IN ('setup','baseline','implementation','review','verification')),
    iteration          INTEGER NOT NULL CHECK (iteration >= 0),   -- 0: the setup and baseline steps, before iteration 1
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
    change_commit      TEXT    NOT NULL DEFAULT '',
    files_changed      INTEGER,
    insertions         INTEGER,
    deletions          INTEGER,
    change_files       TEXT    NOT NULL DEFAULT '[]',
    api_unavailable    INTEGER NOT NULL DEFAULT 0 CHECK (api_unavailable IN (0, 1)),
    reasoning_tokens   INTEGER NOT NULL DEFAULT 0,
    binary_files       INTEGER,
    question           TEXT    NOT NULL DEFAULT '',
    answer             TEXT    NOT NULL DEFAULT '',
    credential         TEXT    NOT NULL DEFAULT '',
    tests_ignored_names TEXT   NOT NULL DEFAULT '[]',
    UNIQUE (run_id, seq)
);
INSERT INTO steps_new (id, run_id, seq, phase, iteration, status, exit_code, error, started_at, ended_at, log_path,
    pid, pgid, proc_start, boot_id, model, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens,
    usage_found, reported_cost_usd, priced_cost_usd, promise, final_message, rate_limited_until, tests_format,
    tests_passed, tests_failed, tests_skipped, tests_failed_names, tests_passed_names, fingerprint, plan_task,
    plan_checked, cancel_cause, change_commit, files_changed, insertions, deletions, change_files,
    api_unavailable, reasoning_tokens, binary_files, question, answer, credential)
SELECT id, run_id, seq, phase, iteration, status, exit_code, error, started_at, ended_at, log_path,
    pid, pgid, proc_start, boot_id, model, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens,
    usage_found, reported_cost_usd, priced_cost_usd, promise, final_message, rate_limited_until, tests_format,
    tests_passed, tests_failed, tests_skipped, tests_failed_names, tests_passed_names, fingerprint, plan_task,
    plan_checked, cancel_cause, change_commit, files_changed, insertions, deletions, change_files,
    api_unavailable, reasoning_tokens, binary_files, question, answer, credential
FROM steps;
DROP TABLE steps;
ALTER TABLE steps_new RENAME TO steps;
-- Dropped with the old table: the shared usage limit's index (0011).
CREATE INDEX steps_credential_limit ON steps (credential, rate_limited_until)
    WHERE credential <> '' AND rate_limited_until IS NOT NULL AND api_unavailable = 0;
