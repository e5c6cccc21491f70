-- Who created each API key: an API key id, or 'local' for the unix socket.
-- A key of scope 'own' lists and deletes only the keys it created. Keys
-- made before this migration were created by no one (''): only callers
-- that see everything (the unix socket, keys of scope 'all') manage them.

ALTER TABLE api_keys ADD COLUMN created_by TEXT NOT NULL DEFAULT '';
