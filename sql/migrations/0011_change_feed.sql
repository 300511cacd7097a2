-- The change feed (docs/contracts.md "Change feed"): Apple's notification history and the V2
-- notifications an app's own server received, applied as observations of the subscriptions
-- they are about.

-- Every notification churnwatch was given, once: what it was about, how it came and what
-- became of it. Verified notifications are keyed by Apple's notificationUUID (a repeat is
-- counted as a duplicate and not stored again). A payload that failed verification is kept in
-- churnwatch.quarantine and recorded here as 'quarantined' without a uuid: a claim nobody
-- verified must not take the key of a genuine notification that comes later.
CREATE TABLE churnwatch.notifications (
    id                      bigserial PRIMARY KEY,
    notification_uuid       uuid,
    notification_type       text,
    subtype                 text,
    signed_date             timestamptz,
    original_transaction_id text,
    environment             text,
    source                  text NOT NULL CHECK (source IN ('history', 'ingest', 'inbox')),
    outcome                 text NOT NULL CHECK (outcome IN ('applied', 'stale', 'quarantined', 'ignored')),
    reason                  text,                 -- why stale, quarantined or ignored
    payload_sha256          text,                 -- a quarantined payload's SHA-256 (hex): read again, it is a duplicate
    received_at             timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT notifications_verified_have_keys CHECK (
        outcome = 'quarantined' OR (notification_uuid IS NOT NULL AND signed_date IS NOT NULL)),
    CONSTRAINT notifications_quarantined_have_no_uuid CHECK (
        outcome <> 'quarantined' OR notification_uuid IS NULL)
);
CREATE UNIQUE INDEX notifications_uuid_idx ON churnwatch.notifications (notification_uuid);
CREATE UNIQUE INDEX notifications_quarantined_payload_idx ON churnwatch.notifications (payload_sha256)
    WHERE payload_sha256 IS NOT NULL;
CREATE INDEX notifications_otid_idx ON churnwatch.notifications (original_transaction_id, signed_date);
CREATE INDEX notifications_received_idx ON churnwatch.notifications (received_at);

-- Where the sync of Apple's notification history stands, per environment: everything signed
-- up to synced_until was read by a finished sync; a sync cut short keeps its window and the
-- token of its next page, and the next sync resumes there with the same request body.
CREATE TABLE churnwatch.notification_feed (
    environment             text PRIMARY KEY CHECK (environment IN ('Production', 'Sandbox')),
    synced_until            timestamptz,
    window_start            timestamptz,
    window_end              timestamptz,
    pagination_token        text,
    last_sync_at            timestamptz,          -- when the last sync finished
    last_sync_records       integer NOT NULL DEFAULT 0,
    records_total           bigint NOT NULL DEFAULT 0,
    CONSTRAINT notification_feed_window CHECK (
        (pagination_token IS NULL) = (window_start IS NULL) AND (window_start IS NULL) = (window_end IS NULL))
);

-- The inbox: an app's backend that receives App Store Server Notifications itself may insert
-- each raw signedPayload here (INSERT INTO churnwatch.notification_inbox (signed_payload)
-- VALUES ($1)); the next `churnwatch run`, `notifications sync` or `notifications ingest`
-- verifies and applies it and sets processed_at. Rows are never deleted by churnwatch.
CREATE TABLE churnwatch.notification_inbox (
    id                      bigserial PRIMARY KEY,
    signed_payload          text NOT NULL,
    received_at             timestamptz NOT NULL DEFAULT now(),
    processed_at            timestamptz,
    outcome                 text CHECK (outcome IN ('applied', 'duplicate', 'stale', 'quarantined', 'ignored'))
);
CREATE INDEX notification_inbox_pending_idx ON churnwatch.notification_inbox (id) WHERE processed_at IS NULL;

-- A state the feed's first sync took from a subscription's newest notification, when churnwatch
-- had not polled it: the moment of that sync. A later poll of it writes no event dated at or
-- before this moment (what happened before churnwatch knew the subscription is no event, as
-- with a first poll); the first poll clears it.
ALTER TABLE churnwatch.subscriptions ADD COLUMN established_at timestamptz;
