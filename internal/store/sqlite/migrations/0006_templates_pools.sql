-- Templates, the per-step build cache, and warm pools. Definitions are
-- JSON documents the controller validates; layers are JSON arrays of
-- snapshot layer digests, lowest first. Pooled sandboxes are ordinary
-- sandboxes found by their reserved labels, so no table holds them.

CREATE TABLE templates (
	name       TEXT    NOT NULL PRIMARY KEY,
	data       TEXT    NOT NULL CHECK (json_valid(data)),
	created_at INTEGER,
	updated_at INTEGER
) STRICT;

CREATE TABLE build_cache (
	key      TEXT NOT NULL PRIMARY KEY,
	template TEXT NOT NULL,
	layers   TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(layers))
) STRICT;

CREATE INDEX build_cache_template ON build_cache (template);

CREATE TABLE pools (
	name       TEXT    NOT NULL PRIMARY KEY,
	data       TEXT    NOT NULL CHECK (json_valid(data)),
	created_at INTEGER
) STRICT;
