-- Issue 48: the inbox is per app in SQL (docs/contracts.md "Change feed", the inbox).
--
-- Each row says which app's feed applies it. `churnwatch serve` writes the app whose keys and
-- bundle id verified the notification. A row inserted without one (an app's backend, as the
-- contract has always allowed: INSERT INTO churnwatch.notification_inbox (signed_payload)
-- VALUES ($1)) gets, at insert, the app of the database its payload names (bundleId in data,
-- summary or externalPurchaseToken, compared without case), else the default app, whose feed
-- verifies it and quarantines what does not verify. Rows applied before this migration keep
-- NULL: they are never read again.

-- The bundle id a signed payload claims, read before verification and only to pick the app
-- whose keys verify it; NULL when the payload is not a JWS of JSON.
CREATE FUNCTION churnwatch.inbox_claimed_bundle_id(signed_payload text) RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    part text := translate(split_part(signed_payload, '.', 2), '-_', '+/');
    claim jsonb;
BEGIN
    part := part || repeat('=', (4 - length(part) % 4) % 4);
    claim := convert_from(decode(part, 'base64'), 'UTF8')::jsonb;
    RETURN coalesce(claim -> 'data' ->> 'bundleId', claim -> 'summary' ->> 'bundleId',
                    claim -> 'externalPurchaseToken' ->> 'bundleId');
EXCEPTION WHEN others THEN
    RETURN NULL;
END $$;

-- The app a row of the inbox belongs to: the app its payload names, else the default app.
CREATE FUNCTION churnwatch.inbox_app(signed_payload text) RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT coalesce(
        (SELECT a.bundle_id FROM churnwatch.apps a
         WHERE lower(a.bundle_id) = lower(churnwatch.inbox_claimed_bundle_id(signed_payload))),
        churnwatch.default_bundle_id())
$$;

ALTER TABLE churnwatch.notification_inbox ADD COLUMN bundle_id text;

CREATE FUNCTION churnwatch.notification_inbox_app() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    NEW.bundle_id := churnwatch.inbox_app(NEW.signed_payload);
    RETURN NEW;
END $$;

CREATE TRIGGER notification_inbox_app BEFORE INSERT ON churnwatch.notification_inbox
    FOR EACH ROW WHEN (NEW.bundle_id IS NULL) EXECUTE FUNCTION churnwatch.notification_inbox_app();

UPDATE churnwatch.notification_inbox SET bundle_id = churnwatch.inbox_app(signed_payload) WHERE processed_at IS NULL;

-- An app's pending rows, in id order (the applier's page and the backlog).
DROP INDEX churnwatch.notification_inbox_pending_idx;
CREATE INDEX notification_inbox_pending_idx ON churnwatch.notification_inbox (bundle_id, id) WHERE processed_at IS NULL;

-- Every row is updated once (processed), which leaves its pending index entry dead until the
-- table is vacuumed: vacuumed after every 2,000 such updates, not after a fifth of the table
-- (PostgreSQL's default), so the pending page does not step over tens of thousands of them.
ALTER TABLE churnwatch.notification_inbox SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 2000,
                                               autovacuum_vacuum_insert_scale_factor = 0, autovacuum_vacuum_insert_threshold = 10000);
