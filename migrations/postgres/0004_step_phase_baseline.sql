-- 0004_step_phase_baseline (PostgreSQL): SQLite's 0012_step_phase_baseline.
-- Steps gain the phase 'baseline' (verify_baseline: the verification run once
-- on the untouched workspace before iteration 1) and tests_ignored_names, the
-- failing tests of a verification step that were already failing in the
-- baseline. PostgreSQL alters the CHECK in place; its default name for the
-- column's constraint is steps_phase_check.

ALTER TABLE steps DROP CONSTRAINT steps_phase_check;
ALTER TABLE steps ADD CONSTRAINT steps_phase_check
    CHECK (phase IN ('setup','baseline','implementation','review','verification'));
ALTER TABLE steps ADD COLUMN tests_ignored_names TEXT NOT NULL DEFAULT '[]';
