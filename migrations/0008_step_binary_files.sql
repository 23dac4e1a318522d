-- 0008_step_binary_files: how many of a step's changed files are binary
-- (git counts no lines for them), so that a step that changed only an image
-- does not read "1 file +0 -0" as if nothing happened. NULL for steps
-- recorded before, like the other counts when nothing is known.

ALTER TABLE steps ADD COLUMN binary_files INTEGER;
