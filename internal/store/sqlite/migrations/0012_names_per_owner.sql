-- Sandbox and snapshot names are unique per owner, not across the daemon:
-- two API keys may each have a sandbox named 'dev', and a name another
-- owner holds no longer answers 'taken' (which told one tenant what
-- another has). Existing names were unique across owners, so they are
-- unique per owner too.

DROP INDEX sandboxes_live_name;
CREATE UNIQUE INDEX sandboxes_live_name ON sandboxes (key_id, name)
	WHERE name <> '' AND state <> 'destroyed';

DROP INDEX snapshots_name;
CREATE UNIQUE INDEX snapshots_name ON snapshots (owner, name) WHERE name <> '';
