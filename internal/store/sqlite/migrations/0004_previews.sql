-- Exposed ports of sandboxes (preview URLs): the token itself is never
-- stored, only its sha256. Removed with the sandbox.

CREATE TABLE previews (
	sandbox_id TEXT    NOT NULL REFERENCES sandboxes (id) ON DELETE CASCADE,
	port       INTEGER NOT NULL CHECK (port BETWEEN 1 AND 65535),
	token_hash BLOB    NOT NULL CHECK (length(token_hash) = 32),
	created_at INTEGER,
	PRIMARY KEY (sandbox_id, port)
) STRICT;
