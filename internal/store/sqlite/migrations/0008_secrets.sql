-- Secrets for credential injection. Values are sealed (AES-GCM) by the
-- daemon with a key kept outside the database, so a copied database alone
-- reveals nothing; the name is bound to the ciphertext as associated data.

CREATE TABLE secrets (
	name       TEXT    PRIMARY KEY CHECK (length(name) BETWEEN 1 AND 63),
	sealed     BLOB    NOT NULL CHECK (length(sealed) BETWEEN 29 AND 70000),
	created_at INTEGER NOT NULL,
	updated_at INTEGER NOT NULL
) STRICT;
