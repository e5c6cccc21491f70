-- Template builds asked for through E2B's API, as their status call reports
-- them, so that a client polling a build across a daemon restart learns how
-- it ended (a build the restart cut short is an error saying so) instead of
-- "not found". Log lines and uploads are not kept. The daemon keeps them a
-- day, and at most a few thousand.

CREATE TABLE e2b_builds (
	id          TEXT    NOT NULL PRIMARY KEY,
	owner       TEXT    NOT NULL,
	name        TEXT    NOT NULL,
	tags        TEXT    NOT NULL, -- a JSON array of strings
	status      TEXT    NOT NULL CHECK (status IN ('waiting', 'building', 'ready', 'error')),
	reason      TEXT    NOT NULL DEFAULT '',
	step        TEXT    NOT NULL DEFAULT '',
	created_at  INTEGER NOT NULL,
	finished_at INTEGER
) STRICT;

CREATE INDEX e2b_builds_created ON e2b_builds (created_at);
