-- 0006_step_api_unavailable: a step that ended because the model API was
-- unavailable (overloaded, 5xx, 429 without a usage-limit reset, a cut
-- stream, no network) counts no iteration and no failure; the run's back-off
-- and its max_api_wait are derived from the unbroken series of such steps,
-- so they survive daemon restarts. reasoning_tokens is the part of
-- output_tokens the agent reported as reasoning (Codex, Gemini thoughts).

ALTER TABLE steps ADD COLUMN api_unavailable INTEGER NOT NULL DEFAULT 0 CHECK (api_unavailable IN (0, 1));
ALTER TABLE steps ADD COLUMN reasoning_tokens INTEGER NOT NULL DEFAULT 0;
