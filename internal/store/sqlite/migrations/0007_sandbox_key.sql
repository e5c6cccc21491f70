-- The caller that created each sandbox: an API key id, or "local" for the
-- unix socket. Admission counts a caller's sandboxes against its quota.
-- Sandboxes created before this migration belong to no caller ('').

ALTER TABLE sandboxes ADD COLUMN key_id TEXT NOT NULL DEFAULT '';
CREATE INDEX sandboxes_key_id ON sandboxes (key_id) WHERE state != 'destroyed';
