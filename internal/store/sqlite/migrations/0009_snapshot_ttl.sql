-- A snapshot's time to live, kept apart from its expiry: a restore renews
-- the expiry to now + ttl_ns, and `snapshot ttl` sets both. 0 = never
-- (expires_at is NULL then).
--
-- Rows written before this migration only know created_at and expires_at.
-- Their difference is the TTL they were given, unless a restore or a TTL
-- change moved the expiry since; that is the best the row tells, bounded
-- to the TTLs a caller may ask for (1 second to 10 years). A row with an
-- expiry but no creation time gets the default of 30 days.

ALTER TABLE snapshots ADD COLUMN ttl_ns INTEGER NOT NULL DEFAULT 0 CHECK (ttl_ns >= 0);

UPDATE snapshots
SET ttl_ns = CASE
	WHEN created_at IS NULL THEN 2592000000000000
	ELSE max(1000000000, min(315360000000000000, expires_at - created_at))
END
WHERE expires_at IS NOT NULL;
