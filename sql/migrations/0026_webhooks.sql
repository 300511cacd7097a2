-- Issue 49: signed webhooks (Standard Webhooks) to the team's tools (docs/contracts.md "Webhooks").
--
-- An endpoint belongs to one app. Once an app has an endpoint (enabled or not), every fact
-- churnwatch writes for that app also writes a message, in the same transaction, by the
-- triggers below: whichever code path writes the fact, the message cannot be forgotten, and a
-- fact rolled back takes its message with it. A sender (serve's service, or `churnwatch webhooks
-- send`) numbers the committed messages in the order they became visible (`seq`, so a
-- subscription's messages are numbered in commit order, whatever order their transactions
-- started in), and writes one delivery per matching enabled endpoint.

CREATE TABLE churnwatch.webhook_endpoints (
    name                 text PRIMARY KEY CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$'),
    bundle_id            text NOT NULL,
    url                  text NOT NULL CHECK (length(url) BETWEEN 8 AND 2000),
    types                text[] NOT NULL DEFAULT '{}',          -- empty: every type
    allow_http           boolean NOT NULL DEFAULT false,
    allow_private        boolean NOT NULL DEFAULT false,
    max_in_flight        integer NOT NULL DEFAULT 8 CHECK (max_in_flight BETWEEN 1 AND 64),
    enabled              boolean NOT NULL DEFAULT true,
    disabled_reason      text,
    -- The endpoint's health, kept by the senders: while it fails, one request at a time.
    consecutive_failures integer NOT NULL DEFAULT 0,
    failing_since        timestamptz,
    paused_until         timestamptz,                           -- a Retry-After it asked for
    created_at           timestamptz NOT NULL DEFAULT now(),
    updated_at           timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX webhook_endpoints_app_idx ON churnwatch.webhook_endpoints (bundle_id);

-- The signing secrets, apart from the endpoints: readers of churnwatch's tables get no grant on
-- this one (docs/operations.md "Webhooks"). `previous` keeps signing beside `secret` until
-- `previous_until` after a rotation.
CREATE TABLE churnwatch.webhook_secrets (
    endpoint        text PRIMARY KEY REFERENCES churnwatch.webhook_endpoints (name) ON DELETE CASCADE,
    secret          text NOT NULL CHECK (secret ~ '^whsec_[A-Za-z0-9+/=]{32,}$'),
    previous        text CHECK (previous ~ '^whsec_[A-Za-z0-9+/=]{32,}$'),
    previous_until  timestamptz,
    rotated_at      timestamptz
);

-- An endpoint that names a campaign is its consumer: at most one per app and campaign.
CREATE TABLE churnwatch.webhook_consumers (
    bundle_id  text NOT NULL,
    campaign   text NOT NULL,
    endpoint   text NOT NULL REFERENCES churnwatch.webhook_endpoints (name) ON DELETE CASCADE,
    PRIMARY KEY (bundle_id, campaign)
);
CREATE INDEX webhook_consumers_endpoint_idx ON churnwatch.webhook_consumers (endpoint);

-- This database's prefix of message ids (msg_<instance>_<seq>): two deployments sending to one
-- receiver never share an id.
CREATE TABLE churnwatch.webhook_instance (
    one       boolean PRIMARY KEY DEFAULT true CHECK (one),
    instance  text NOT NULL CHECK (instance ~ '^[0-9a-f]{8}$')
);
INSERT INTO churnwatch.webhook_instance (instance) VALUES (substr(replace(gen_random_uuid()::text, '-', ''), 1, 8));

CREATE SEQUENCE churnwatch.webhook_message_seq;

-- Messages: the exact body sent on every attempt. `endpoint` set: for that endpoint only
-- (winback.ready to its campaign's consumer); NULL: every enabled endpoint of the app that takes
-- the type. `original_transaction_id` is the order key ('' for none).
CREATE TABLE churnwatch.webhook_messages (
    id                      bigserial PRIMARY KEY,
    seq                     bigint UNIQUE,                      -- NULL until a sender numbers it
    bundle_id               text NOT NULL,
    original_transaction_id text NOT NULL DEFAULT '',
    type                    text NOT NULL,
    endpoint                text,
    winback_id              bigint,
    created_at              timestamptz NOT NULL DEFAULT now(),
    body                    text NOT NULL
);
CREATE INDEX webhook_messages_unnumbered_idx ON churnwatch.webhook_messages (id) WHERE seq IS NULL;
CREATE INDEX webhook_messages_app_created_idx ON churnwatch.webhook_messages (bundle_id, created_at);  -- replay
CREATE INDEX webhook_messages_created_idx ON churnwatch.webhook_messages (created_at);                  -- prune

CREATE TABLE churnwatch.webhook_deliveries (
    endpoint                text NOT NULL REFERENCES churnwatch.webhook_endpoints (name) ON DELETE CASCADE,
    message_id              bigint NOT NULL REFERENCES churnwatch.webhook_messages (id) ON DELETE CASCADE,
    seq                     bigint NOT NULL,
    original_transaction_id text NOT NULL,
    state                   text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'delivered', 'dead')),
    attempts                integer NOT NULL DEFAULT 0,
    next_attempt_at         timestamptz NOT NULL DEFAULT now(),
    lease_until             timestamptz,
    leased_by               text,
    last_status             integer,
    last_error              text,
    created_at              timestamptz NOT NULL DEFAULT now(),
    first_attempt_at        timestamptz,
    finished_at             timestamptz,                        -- delivered or dead
    PRIMARY KEY (endpoint, message_id)
);
-- The head of each subscription's line per endpoint: the pending delivery of lowest seq.
CREATE INDEX webhook_deliveries_line_idx ON churnwatch.webhook_deliveries (endpoint, original_transaction_id, seq)
    WHERE state = 'pending';
-- What falls due first, for the claim's walk.
CREATE INDEX webhook_deliveries_due_idx ON churnwatch.webhook_deliveries (endpoint, next_attempt_at, seq)
    WHERE state = 'pending';
CREATE INDEX webhook_deliveries_message_idx ON churnwatch.webhook_deliveries (message_id);  -- prune's cascade
CREATE INDEX webhook_deliveries_finished_idx ON churnwatch.webhook_deliveries (endpoint, finished_at) WHERE state = 'delivered';
CREATE INDEX webhook_deliveries_dead_idx ON churnwatch.webhook_deliveries (endpoint) WHERE state = 'dead';
-- A queue: every delivery becomes a dead index entry in the partial indexes above when it is
-- settled. Vacuumed after every 2,000 of them, not a fifth of the table, so a claim's walk does
-- not step over a burst's worth of them.
ALTER TABLE churnwatch.webhook_deliveries SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 2000,
    autovacuum_vacuum_insert_scale_factor = 0, autovacuum_vacuum_insert_threshold = 2000, autovacuum_vacuum_cost_delay = 0);

CREATE FUNCTION churnwatch.webhook_time(t timestamptz) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT to_char(t AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')
$$;

-- Whether the app has an endpoint: no messages are written before it does.
CREATE FUNCTION churnwatch.webhook_app(app text) RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT EXISTS (SELECT 1 FROM churnwatch.webhook_endpoints WHERE bundle_id = app)
$$;

CREATE FUNCTION churnwatch.webhook_write(app text, otid text, kind text, data json) RETURNS void
LANGUAGE sql AS $$
    INSERT INTO churnwatch.webhook_messages (bundle_id, original_transaction_id, type, body)
    VALUES (app, coalesce(otid, ''), kind,
            json_build_object('type', kind, 'timestamp', churnwatch.webhook_time(now()), 'data', data)::text)
$$;

-- The subscriber's identity as the app knows it, on every message of a subscription.
CREATE FUNCTION churnwatch.webhook_who(otid text) RETURNS TABLE (app_account_token uuid, customer_ref text, product_id text, segment text)
LANGUAGE sql STABLE AS $$
    SELECT s.app_account_token, s.customer_ref, coalesce(g.product_id, s.product_id), g.segment
    FROM (SELECT 1) AS one
    LEFT JOIN churnwatch.subscriptions s ON s.original_transaction_id = otid
    LEFT JOIN churnwatch.subscription_segments g ON g.original_transaction_id = otid
$$;

-- Every message is written at commit (deferred triggers, in the order the facts were written
-- in the transaction), so `segment` is the segment after the fact's transaction.
-- churn_event.created: every event but a cancel-page view, which is its own type below.
CREATE FUNCTION churnwatch.webhook_on_event() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.event = 'cancel_page_viewed' OR NOT churnwatch.webhook_app(NEW.bundle_id) THEN RETURN NULL; END IF;
    PERFORM churnwatch.webhook_write(NEW.bundle_id, NEW.original_transaction_id, 'churn_event.created', json_build_object(
        'event_id', NEW.id, 'event', NEW.event, 'occurred_at', churnwatch.webhook_time(NEW.occurred_at),
        'detected_at', churnwatch.webhook_time(NEW.detected_at), 'bundle_id', NEW.bundle_id,
        'original_transaction_id', NEW.original_transaction_id, 'app_account_token', w.app_account_token,
        'customer_ref', w.customer_ref, 'product_id', w.product_id, 'segment', w.segment, 'details', NEW.details))
    FROM churnwatch.webhook_who(NEW.original_transaction_id) AS w;
    RETURN NULL;
END;
$$;
CREATE CONSTRAINT TRIGGER churn_events_webhook AFTER INSERT ON churnwatch.churn_events
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION churnwatch.webhook_on_event();

-- churn_event.superseded: a late observation showed the event was derived from the wrong
-- neighbours (docs/contracts.md "churn_events").
CREATE FUNCTION churnwatch.webhook_on_superseded() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.event = 'cancel_page_viewed' OR NOT churnwatch.webhook_app(NEW.bundle_id) THEN RETURN NULL; END IF;
    PERFORM churnwatch.webhook_write(NEW.bundle_id, NEW.original_transaction_id, 'churn_event.superseded', json_build_object(
        'event_id', NEW.id, 'event', NEW.event, 'occurred_at', churnwatch.webhook_time(NEW.occurred_at),
        'superseded_at', churnwatch.webhook_time(NEW.superseded_at), 'bundle_id', NEW.bundle_id,
        'original_transaction_id', NEW.original_transaction_id));
    RETURN NULL;
END;
$$;
CREATE CONSTRAINT TRIGGER churn_events_superseded_webhook AFTER UPDATE OF superseded_at ON churnwatch.churn_events
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW WHEN (OLD.superseded_at IS NULL AND NEW.superseded_at IS NOT NULL)
    EXECUTE FUNCTION churnwatch.webhook_on_superseded();

CREATE FUNCTION churnwatch.webhook_on_segment_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NOT churnwatch.webhook_app(NEW.bundle_id) THEN RETURN NULL; END IF;
    PERFORM churnwatch.webhook_write(NEW.bundle_id, NEW.original_transaction_id, 'segment.changed', json_build_object(
        'bundle_id', NEW.bundle_id, 'original_transaction_id', NEW.original_transaction_id,
        'app_account_token', w.app_account_token, 'customer_ref', w.customer_ref, 'product_id', w.product_id,
        'from', NEW.from_segment, 'to', NEW.to_segment, 'changed_at', churnwatch.webhook_time(NEW.changed_at)))
    FROM churnwatch.webhook_who(NEW.original_transaction_id) AS w;
    RETURN NULL;
END;
$$;
CREATE CONSTRAINT TRIGGER segment_changes_webhook AFTER INSERT ON churnwatch.segment_changes
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION churnwatch.webhook_on_segment_change();

CREATE FUNCTION churnwatch.webhook_on_cancel_page() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NOT churnwatch.webhook_app(NEW.bundle_id) THEN RETURN NULL; END IF;
    PERFORM churnwatch.webhook_write(NEW.bundle_id, NEW.original_transaction_id, 'cancel_page.viewed', json_build_object(
        'request_identifier', NEW.request_identifier, 'bundle_id', NEW.bundle_id,
        'original_transaction_id', NEW.original_transaction_id, 'app_account_token', w.app_account_token,
        'customer_ref', w.customer_ref, 'product_id', NEW.product_id, 'user_locale', NEW.user_locale,
        'environment', NEW.environment, 'signed_at', churnwatch.webhook_time(NEW.signed_at), 'arm', NEW.arm,
        'rule', NEW.rule_name, 'answer_kind', NEW.answer_kind, 'message_id', NEW.message_id,
        'segment', NEW.segment, 'answer', NEW.answer))
    FROM churnwatch.webhook_who(NEW.original_transaction_id) AS w;
    RETURN NULL;
END;
$$;
CREATE CONSTRAINT TRIGGER retention_message_requests_webhook AFTER INSERT ON churnwatch.retention_message_requests
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION churnwatch.webhook_on_cancel_page();
