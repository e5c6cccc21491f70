-- Filesystem snapshots, and what a sandbox's root filesystem is built from
-- beyond its image.
--
-- layers is a JSON array of {digest, size}, lowest first: the whole chain
-- of a snapshot of a restored sandbox, so a snapshot never depends on
-- another snapshot's record. expires_at NULL means never.

CREATE TABLE snapshots (
	id           TEXT    NOT NULL PRIMARY KEY,
	name         TEXT    NOT NULL DEFAULT '',
	sandbox_id   TEXT    NOT NULL DEFAULT '',
	image        TEXT    NOT NULL DEFAULT '',
	image_digest TEXT    NOT NULL,
	parent       TEXT    NOT NULL DEFAULT '',
	layers       TEXT    NOT NULL DEFAULT '[]' CHECK (json_valid(layers)),
	size         INTEGER NOT NULL DEFAULT 0,
	created_at   INTEGER,
	expires_at   INTEGER
) STRICT;

CREATE UNIQUE INDEX snapshots_name ON snapshots (name) WHERE name <> '';
CREATE INDEX snapshots_expires_at ON snapshots (expires_at) WHERE expires_at IS NOT NULL;

-- The snapshot a sandbox was restored from, the layers its root filesystem
-- stacks on the image (JSON array of digests, lowest first), and what
-- idling does to it.
ALTER TABLE sandboxes ADD COLUMN snapshot_id TEXT NOT NULL DEFAULT '';
ALTER TABLE sandboxes ADD COLUMN snapshot_layers TEXT NOT NULL DEFAULT 'null' CHECK (json_valid(snapshot_layers));
ALTER TABLE sandboxes ADD COLUMN on_idle TEXT NOT NULL DEFAULT '';
