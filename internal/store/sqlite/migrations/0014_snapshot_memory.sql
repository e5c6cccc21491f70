-- A snapshot may keep its sandbox's memory and processes too (a gVisor
-- checkpoint, stored beside the snapshot's layers): what restoring it
-- needs, as JSON, or '' for a snapshot of files only.
ALTER TABLE snapshots ADD COLUMN memory TEXT NOT NULL DEFAULT '' CHECK (length(memory) <= 4096);
