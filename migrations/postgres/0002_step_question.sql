-- 0002_step_question (PostgreSQL): SQLite's 0010_step_question. An
-- implementation step whose agent ended on a question records it; the run
-- WAITs (needs_answer) until `loopctl answer` stores the answer on the same
-- step.

ALTER TABLE steps ADD COLUMN question TEXT NOT NULL DEFAULT '';
ALTER TABLE steps ADD COLUMN answer TEXT NOT NULL DEFAULT '';
