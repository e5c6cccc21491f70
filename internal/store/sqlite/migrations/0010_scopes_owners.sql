-- Key scopes and owners, so an API key can be limited to what it created.
--
-- scope: 'own' (the key sees only what it created) or 'all' (everything).
-- Keys made before this migration get 'all': an upgraded daemon lets them
-- do what they did before. New keys are written with their scope.
--
-- owner: the caller that created the row, an API key id or 'local' for
-- the unix socket (sandboxes have it as key_id since 0007). Rows made
-- before this migration belong to no one (''): only callers that see
-- everything (the unix socket, keys of scope 'all') see them.

ALTER TABLE api_keys ADD COLUMN scope TEXT NOT NULL DEFAULT 'all' CHECK (scope IN ('own', 'all'));
ALTER TABLE snapshots ADD COLUMN owner TEXT NOT NULL DEFAULT '';
ALTER TABLE backups ADD COLUMN owner TEXT NOT NULL DEFAULT '';
ALTER TABLE secrets ADD COLUMN owner TEXT NOT NULL DEFAULT '';
