-- 0007_run_stats: a run's aggregates (iteration, failure streaks, usage and
-- cost, running time), written in the same transaction as each step that
-- changes them, so that `list` and `status` read one row per run instead
-- of every step of every run. last_seq and last_status name the step the
-- aggregates were computed after: a reader that finds a different newest
-- step (written by a path that does not keep them) derives the run from
-- its steps instead. Runs from before this migration get theirs when the
-- daemon starts.
CREATE TABLE run_stats (
    run_id      TEXT    PRIMARY KEY REFERENCES runs (id),
    last_seq    INTEGER NOT NULL,
    last_status TEXT    NOT NULL,
    body        TEXT    NOT NULL   -- JSON: storage.RunStats
) WITHOUT ROWID;
