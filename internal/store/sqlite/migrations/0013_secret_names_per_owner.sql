-- Secret names are unique per owner, not across the daemon: two API keys
-- may each keep a secret named 'token', a name another owner holds no
-- longer answers 'taken' (which told one tenant what another has), and an
-- injection rule's secret name is looked up among its sandbox's owner's
-- secrets only. Existing secrets keep their owner; their names were unique
-- across owners, so they are unique per owner too. SQLite cannot change a
-- primary key in place, so the table is copied.

CREATE TABLE secrets_by_owner (
	owner      TEXT    NOT NULL,
	name       TEXT    NOT NULL CHECK (length(name) BETWEEN 1 AND 63),
	sealed     BLOB    NOT NULL CHECK (length(sealed) BETWEEN 29 AND 70000),
	created_at INTEGER NOT NULL,
	updated_at INTEGER NOT NULL,
	PRIMARY KEY (owner, name)
) STRICT;

INSERT INTO secrets_by_owner (owner, name, sealed, created_at, updated_at)
	SELECT owner, name, sealed, created_at, updated_at FROM secrets;

DROP TABLE secrets;
ALTER TABLE secrets_by_owner RENAME TO secrets;
