-- 0010_step_question: an implementation step whose agent ended on a
-- question (<question>…</question>) records it; the run WAITs
-- (needs_answer) until `loopctl answer` stores the answer on the same
-- step. Both are persisted so a daemon restart keeps the wait and the next
-- prompt carries them.

ALTER TABLE steps ADD COLUMN question TEXT NOT NULL DEFAULT '';
ALTER TABLE steps ADD COLUMN answer TEXT NOT NULL DEFAULT '';
