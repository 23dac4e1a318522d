-- 0004 (PostgreSQL): a placeholder holding the number of the baseline
-- phase's migration (SQLite's 0012); replaced by it when the branches meet.
SELECT 1;
