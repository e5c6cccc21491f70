-- Lifecycle transitions of each sandbox, removed with the sandbox.

CREATE TABLE sandbox_state_changes (
	seq        INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
	sandbox_id TEXT    NOT NULL REFERENCES sandboxes (id) ON DELETE CASCADE,
	from_state TEXT    NOT NULL DEFAULT '',
	to_state   TEXT    NOT NULL,
	reason     TEXT    NOT NULL DEFAULT '',
	at         INTEGER
) STRICT;

CREATE INDEX sandbox_state_changes_sandbox ON sandbox_state_changes (sandbox_id, at, seq);
