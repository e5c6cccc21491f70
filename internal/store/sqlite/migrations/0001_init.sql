-- Sandboxes and API keys.
--
-- Times are unix nanoseconds (UTC); NULL stands for the zero time.
-- Maps and resources are JSON text; a nil map is stored as JSON null so it
-- reads back as nil rather than as an empty map.

CREATE TABLE sandboxes (
	id               TEXT    NOT NULL PRIMARY KEY,
	name             TEXT    NOT NULL DEFAULT '',
	state            TEXT    NOT NULL,
	error_reason     TEXT    NOT NULL DEFAULT '',
	image            TEXT    NOT NULL DEFAULT '',
	image_digest     TEXT    NOT NULL DEFAULT '',
	runtime          TEXT    NOT NULL DEFAULT '',
	resources        TEXT    NOT NULL DEFAULT '{}' CHECK (json_valid(resources)),
	env              TEXT    NOT NULL DEFAULT 'null' CHECK (json_valid(env)),
	labels           TEXT    NOT NULL DEFAULT 'null' CHECK (json_valid(labels)),
	sleep_after_ns   INTEGER NOT NULL DEFAULT 0,
	keep_alive       INTEGER NOT NULL DEFAULT 0,
	timeout_ns       INTEGER NOT NULL DEFAULT 0,
	created_at       INTEGER,
	updated_at       INTEGER,
	last_activity_at INTEGER
) STRICT;

-- A name identifies one live sandbox; once destroyed, its name is free again.
CREATE UNIQUE INDEX sandboxes_live_name ON sandboxes (name)
	WHERE name <> '' AND state <> 'destroyed';

CREATE INDEX sandboxes_created_at ON sandboxes (created_at);

CREATE TABLE api_keys (
	id          TEXT NOT NULL PRIMARY KEY,
	name        TEXT NOT NULL DEFAULT '',
	prefix      TEXT NOT NULL DEFAULT '',
	secret_hash BLOB NOT NULL,
	created_at  INTEGER
) STRICT;

-- Every authenticated request looks a key up by the hash of its secret.
CREATE UNIQUE INDEX api_keys_secret_hash ON api_keys (secret_hash);
