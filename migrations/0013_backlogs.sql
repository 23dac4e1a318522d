-- 0013_backlogs: a backlog run works through a task list task by task, each
-- task in a child run (a task run) of its own.
--
-- runs.kind is 'backlog' for a backlog run ('' for any other run) and
-- runs.parent is a task run's backlog ('' otherwise). The tasks table holds
-- the list as it was read at start (an agent editing the file changes
-- nothing) and every task's state: each transition (a task run created, a
-- land intended, a land recorded) is written in one transaction with its
-- event, so a daemon killed at any moment finds every task where it was.
-- land_base and land_run record a land's intent before git moves the
-- integration branch: the next daemon looks for the merge on the branch and
-- records it instead of landing twice.

ALTER TABLE runs ADD COLUMN kind TEXT NOT NULL DEFAULT '' CHECK (kind IN ('', 'backlog'));
ALTER TABLE runs ADD COLUMN parent TEXT NOT NULL DEFAULT '';
CREATE INDEX runs_parent ON runs (parent) WHERE parent <> '';

CREATE TABLE tasks (
    backlog        TEXT    NOT NULL REFERENCES runs (id),
    id             TEXT    NOT NULL,
    position       INTEGER NOT NULL,               -- 1-based, list order
    title          TEXT    NOT NULL,
    description    TEXT    NOT NULL DEFAULT '',
    depends_on     TEXT    NOT NULL DEFAULT '[]',  -- JSON array of task ids
    verify_command TEXT    NOT NULL DEFAULT '',
    settings       TEXT    NOT NULL DEFAULT '{}',  -- the task's set: JSON object of config key to value
    priority       INTEGER NOT NULL DEFAULT 0,     -- 1 first; 0 not given
    state          TEXT    NOT NULL CHECK (state IN
                     ('pending','ready','running','waiting','landing','done','blocked','skipped')),
    why            TEXT    NOT NULL DEFAULT '',    -- blocked or skipped: why
    task_run       TEXT    NOT NULL DEFAULT '',    -- the task's run, once started
    land_attempts  INTEGER NOT NULL DEFAULT 0,     -- lands refused and sent back to the task run
    land_base      TEXT    NOT NULL DEFAULT '',    -- landing: the integration tip the land started from
    landed_commit  TEXT    NOT NULL DEFAULT '',    -- done: the integration branch's commit after the land
    verified       INTEGER NOT NULL DEFAULT 0 CHECK (verified IN (0, 1)),
    updated_at     INTEGER NOT NULL,
    PRIMARY KEY (backlog, id)
);
CREATE INDEX tasks_task_run ON tasks (task_run) WHERE task_run <> '';

-- A task list that names commands (a task's verify_command or set) is
-- trusted like .loop/config, as kind 'tasks'. SQLite cannot change a CHECK
-- constraint in place: the table is rebuilt with its rows.
CREATE TABLE trusted_files_new (
    workspace  TEXT    NOT NULL,
    path       TEXT    NOT NULL,
    kind       TEXT    NOT NULL CHECK (kind IN ('config', 'stop', 'env', 'agent', 'tasks')),
    sha256     TEXT    NOT NULL CHECK (length(sha256) = 64),
    summary    TEXT    NOT NULL DEFAULT '{}',
    trusted_at INTEGER NOT NULL,
    PRIMARY KEY (workspace, path)
);
INSERT INTO trusted_files_new (workspace, path, kind, sha256, summary, trusted_at)
    SELECT workspace, path, kind, sha256, summary, trusted_at FROM trusted_files;
DROP TABLE trusted_files;
ALTER TABLE trusted_files_new RENAME TO trusted_files;
