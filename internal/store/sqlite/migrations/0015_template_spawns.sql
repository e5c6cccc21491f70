-- How many sandboxes were created from a template (from its pool or cold,
-- a warm pool's own sandboxes not counted until handed out) and when the
-- last one was, as E2B's template listing reports them. A rebuild keeps
-- them.
ALTER TABLE templates ADD COLUMN spawns INTEGER NOT NULL DEFAULT 0 CHECK (spawns >= 0);
ALTER TABLE templates ADD COLUMN last_spawned_at INTEGER;
