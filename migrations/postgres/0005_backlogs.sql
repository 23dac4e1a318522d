-- 0005_backlogs (PostgreSQL): SQLite's 0013_backlogs. A backlog run
-- (runs.kind = 'backlog'), its task runs (runs.parent) and its tasks, each
-- transition written in one transaction with its event.

ALTER TABLE runs ADD COLUMN kind TEXT NOT NULL DEFAULT '' CHECK (kind IN ('', 'backlog'));
ALTER TABLE runs ADD COLUMN parent TEXT COLLATE "C" NOT NULL DEFAULT '';
CREATE INDEX runs_parent ON runs (parent) WHERE parent <> '';

CREATE TABLE tasks (
    backlog        TEXT    COLLATE "C" NOT NULL REFERENCES runs (id),
    id             TEXT    COLLATE "C" NOT NULL,
    position       BIGINT  NOT NULL,
    title          TEXT    NOT NULL,
    description    TEXT    NOT NULL DEFAULT '',
    depends_on     TEXT    NOT NULL DEFAULT '[]',
    verify_command TEXT    NOT NULL DEFAULT '',
    settings       TEXT    NOT NULL DEFAULT '{}',
    priority       BIGINT  NOT NULL DEFAULT 0,
    state          TEXT    NOT NULL CHECK (state IN
                     ('pending','ready','running','waiting','landing','done','blocked','skipped')),
    why            TEXT    NOT NULL DEFAULT '',
    task_run       TEXT    COLLATE "C" NOT NULL DEFAULT '',
    land_attempts  BIGINT  NOT NULL DEFAULT 0,
    land_base      TEXT    NOT NULL DEFAULT '',
    landed_commit  TEXT    NOT NULL DEFAULT '',
    verified       BIGINT  NOT NULL DEFAULT 0 CHECK (verified IN (0, 1)),
    updated_at     BIGINT  NOT NULL,
    PRIMARY KEY (backlog, id)
);
CREATE INDEX tasks_task_run ON tasks (task_run) WHERE task_run <> '';

-- A task list that names commands is trusted as kind 'tasks'.
ALTER TABLE trusted_files DROP CONSTRAINT trusted_files_kind_check;
ALTER TABLE trusted_files ADD CONSTRAINT trusted_files_kind_check
    CHECK (kind IN ('config', 'stop', 'env', 'agent', 'tasks'));
