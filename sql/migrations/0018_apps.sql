-- Issue 26: several apps in one database (docs/contracts.md "apps" and "Which app").
--
-- churnwatch.apps lists the apps a deployment polls. A setting left NULL is the deployment's
-- (APPSTORE_*): one In-App Purchase key serves every app of a team, so an app usually needs only
-- its bundle id and app Apple id. Where a private key is, never the key itself: a file path or
-- the name of an environment variable. The default app is the deployment's APPSTORE_BUNDLE_ID:
-- `churnwatch migrate` passes it as the setting churnwatch.default_bundle_id, and every command
-- that writes keeps it marked (a deployment whose bundle id changes moves the mark).
CREATE TABLE churnwatch.apps (
    bundle_id       text PRIMARY KEY CHECK (bundle_id ~ '^[A-Za-z0-9][A-Za-z0-9.-]{0,154}$'),
    is_default      boolean NOT NULL DEFAULT false,
    app_apple_id    bigint CHECK (app_apple_id > 0),
    environment     text CHECK (environment IN ('Production', 'Sandbox')),
    issuer_id       text,
    key_id          text,
    key_file        text,
    key_env         text,
    status_rate     double precision CHECK (status_rate > 0),
    history_rate    double precision CHECK (history_rate > 0),
    notifications   boolean,
    added_at        timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT apps_key_in_one_place CHECK (key_file IS NULL OR key_env IS NULL),
    CONSTRAINT apps_key_whole CHECK (
        (issuer_id IS NULL) = (key_id IS NULL) AND (key_id IS NULL) = (key_file IS NULL AND key_env IS NULL))
);
CREATE UNIQUE INDEX apps_one_default_idx ON churnwatch.apps (is_default) WHERE is_default;

INSERT INTO churnwatch.apps (bundle_id, is_default)
SELECT current_setting('churnwatch.default_bundle_id', true), true
WHERE coalesce(current_setting('churnwatch.default_bundle_id', true), '') <> '';

-- The default app's bundle id: what a row written without one belongs to (an app's backend
-- inserting subscriptions as it always has, a consumer's own rows), and what every row already
-- here belongs to.
CREATE FUNCTION churnwatch.default_bundle_id() RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT bundle_id FROM churnwatch.apps WHERE is_default
$$;

DO $$
BEGIN
    IF churnwatch.default_bundle_id() IS NULL
       AND (EXISTS (SELECT 1 FROM churnwatch.subscriptions) OR EXISTS (SELECT 1 FROM churnwatch.runs)
            OR EXISTS (SELECT 1 FROM churnwatch.notifications) OR EXISTS (SELECT 1 FROM churnwatch.offers)) THEN
        RAISE EXCEPTION 'migration 0018 gives every row already here its app, and no app is configured: set APPSTORE_BUNDLE_ID to the bundle id of the app this database holds and run churnwatch migrate again (migration 0018 changed nothing)';
    END IF;
END $$;

-- Every contract table says which app. The default is evaluated once (a stable function), stored
-- in the catalogue and not written into any existing row: no table is rewritten, however large.
-- churnwatch's own statements always name the app.
ALTER TABLE churnwatch.subscriptions ADD COLUMN bundle_id text NOT NULL DEFAULT churnwatch.default_bundle_id();
ALTER TABLE churnwatch.subscription_segments ADD COLUMN bundle_id text NOT NULL DEFAULT churnwatch.default_bundle_id();
ALTER TABLE churnwatch.segment_changes ADD COLUMN bundle_id text NOT NULL DEFAULT churnwatch.default_bundle_id();
ALTER TABLE churnwatch.churn_events ADD COLUMN bundle_id text NOT NULL DEFAULT churnwatch.default_bundle_id();
ALTER TABLE churnwatch.winback_queue ADD COLUMN bundle_id text NOT NULL DEFAULT churnwatch.default_bundle_id();
ALTER TABLE churnwatch.notifications ADD COLUMN bundle_id text NOT NULL DEFAULT churnwatch.default_bundle_id();
ALTER TABLE churnwatch.runs ADD COLUMN bundle_id text NOT NULL DEFAULT churnwatch.default_bundle_id();
ALTER TABLE churnwatch.refund_requests ADD COLUMN bundle_id text NOT NULL DEFAULT churnwatch.default_bundle_id();
ALTER TABLE churnwatch.quarantine ADD COLUMN bundle_id text NOT NULL DEFAULT churnwatch.default_bundle_id();

-- Keys that were one per deployment are one per app.
ALTER TABLE churnwatch.segment_daily ADD COLUMN bundle_id text NOT NULL DEFAULT churnwatch.default_bundle_id();
ALTER TABLE churnwatch.segment_daily DROP CONSTRAINT segment_daily_pkey;
ALTER TABLE churnwatch.segment_daily ADD PRIMARY KEY (bundle_id, day, segment, product_id);
ALTER TABLE churnwatch.offers ADD COLUMN bundle_id text NOT NULL DEFAULT churnwatch.default_bundle_id();
ALTER TABLE churnwatch.offers DROP CONSTRAINT offers_pkey;
ALTER TABLE churnwatch.offers ADD PRIMARY KEY (bundle_id, campaign, product_id);
ALTER TABLE churnwatch.notification_feed ADD COLUMN bundle_id text NOT NULL DEFAULT churnwatch.default_bundle_id();
ALTER TABLE churnwatch.notification_feed DROP CONSTRAINT notification_feed_pkey;
ALTER TABLE churnwatch.notification_feed ADD PRIMARY KEY (bundle_id, environment);

-- A run is one app's: its lookups (the unfinished run, the last nightly run) are per app.
DROP INDEX churnwatch.runs_unfinished_idx;
CREATE INDEX runs_unfinished_idx ON churnwatch.runs (bundle_id, kind, id) WHERE finished_at IS NULL;

-- A move between segments belongs to the subscription's app.
CREATE OR REPLACE FUNCTION churnwatch.segment_changes_record() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO churnwatch.segment_changes (original_transaction_id, from_segment, to_segment, changed_at, bundle_id)
    VALUES (NEW.original_transaction_id, OLD.segment, NEW.segment, NEW.segment_since, NEW.bundle_id);
    RETURN NULL;
END;
$$;
