-- 0002_step_cancel_cause: why the daemon stopped a step, recorded before it
-- signals the step, so that a daemon restarted in the middle of the kill
-- still classifies the step's end correctly (CANCELED, not FAILED).

ALTER TABLE steps ADD COLUMN cancel_cause TEXT NOT NULL DEFAULT ''
    CHECK (cancel_cause IN ('', 'user', 'daemon_stop', 'max_duration', 'step_timeout', 'idle_timeout'));

-- Nothing looks steps up by status alone.
DROP INDEX steps_running;
