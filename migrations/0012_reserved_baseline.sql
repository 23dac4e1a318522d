-- 0012: a placeholder holding the number of the baseline phase's migration
-- (branch baseline) so that 0013 applies on this branch alone. It is
-- replaced by that migration when the branches meet; it changes nothing.
SELECT 1;
