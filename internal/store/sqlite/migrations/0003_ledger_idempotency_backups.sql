-- The per-sandbox ledger, Idempotency-Key results and directory backups.
--
-- None of these tables references sandboxes with a foreign key: a ledger
-- and a backup outlive the sandbox they came from (until their retention
-- or time-to-live ends), and idempotency results belong to API calls, not
-- to sandboxes.

CREATE TABLE ledger (
	seq          INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
	sandbox_id   TEXT    NOT NULL,
	sandbox_name TEXT    NOT NULL DEFAULT '',
	kind         TEXT    NOT NULL,
	source       TEXT    NOT NULL,
	at           INTEGER NOT NULL,
	command      TEXT    NOT NULL DEFAULT 'null' CHECK (json_valid(command)),
	exit_code    INTEGER,
	duration_ns  INTEGER NOT NULL DEFAULT 0,
	path         TEXT    NOT NULL DEFAULT '',
	note         TEXT    NOT NULL DEFAULT '',
	data         TEXT    NOT NULL DEFAULT 'null' CHECK (json_valid(data))
) STRICT;

CREATE INDEX ledger_sandbox ON ledger (sandbox_id, seq);
CREATE INDEX ledger_sandbox_name ON ledger (sandbox_name, seq) WHERE sandbox_name <> '';

CREATE TABLE idempotency_keys (
	key          TEXT    NOT NULL PRIMARY KEY,
	fingerprint  TEXT    NOT NULL,
	method       TEXT    NOT NULL,
	path         TEXT    NOT NULL,
	state        TEXT    NOT NULL CHECK (state IN ('in_progress', 'done', 'aborted', 'too_large')),
	owner        TEXT    NOT NULL DEFAULT '',
	status       INTEGER NOT NULL DEFAULT 0,
	content_type TEXT    NOT NULL DEFAULT '',
	body         BLOB,
	created_at   INTEGER NOT NULL,
	expires_at   INTEGER NOT NULL
) STRICT;

CREATE INDEX idempotency_keys_expires ON idempotency_keys (expires_at);

CREATE TABLE backups (
	id           TEXT    NOT NULL PRIMARY KEY,
	sandbox_id   TEXT    NOT NULL,
	sandbox_name TEXT    NOT NULL DEFAULT '',
	path         TEXT    NOT NULL,
	excludes     TEXT    NOT NULL DEFAULT 'null' CHECK (json_valid(excludes)),
	size_bytes   INTEGER NOT NULL,
	sha256       TEXT    NOT NULL,
	storage      TEXT    NOT NULL,
	created_at   INTEGER NOT NULL,
	expires_at   INTEGER
) STRICT;

CREATE INDEX backups_sandbox ON backups (sandbox_id, created_at);
CREATE INDEX backups_expires ON backups (expires_at) WHERE expires_at IS NOT NULL;
