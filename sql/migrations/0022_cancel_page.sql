-- Issue 38: the cancel page (docs/contracts.md "Cancel page"). `churnwatch serve` answers Apple's
-- Get Retention Message request with a choice made by rules that are data, and records each
-- request with what it answered.

-- The rules, per app, tried by priority then name; the first that matches answers. An empty
-- product, group or array matches anything; NULL tenure bounds are open.
CREATE TABLE churnwatch.retention_rules (
    bundle_id             text NOT NULL,
    name                  text NOT NULL CHECK (length(name) BETWEEN 1 AND 100),
    priority              integer NOT NULL DEFAULT 100,
    product_id            text NOT NULL DEFAULT '',
    subscription_group_id text NOT NULL DEFAULT '',
    segments              text[] NOT NULL DEFAULT '{}',
    min_tenure_days       integer CHECK (min_tenure_days >= 0),
    max_tenure_days       integer CHECK (max_tenure_days >= 0),
    locales               text[] NOT NULL DEFAULT '{}',
    kind                  text NOT NULL CHECK (kind IN ('message', 'alternate_product', 'promotional_offer')),
    message_id            uuid NOT NULL,
    alternate_product_id  text,
    billing_plan_type     text,
    offer_id              text,
    holdout               double precision NOT NULL DEFAULT 0 CHECK (holdout >= 0 AND holdout < 1),
    updated_at            timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (bundle_id, name),
    CHECK (kind <> 'alternate_product' OR alternate_product_id IS NOT NULL),
    CHECK (kind <> 'promotional_offer' OR offer_id IS NOT NULL)
);

-- The default message per product and locale ('' : every product, every locale): answered to
-- the holdout and when no rule matches.
CREATE TABLE churnwatch.retention_defaults (
    bundle_id  text NOT NULL,
    product_id text NOT NULL DEFAULT '',
    locale     text NOT NULL DEFAULT '',
    message_id uuid NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (bundle_id, product_id, locale)
);

-- Every request answered, once per requestIdentifier (Apple's retry finds its row and is
-- answered the same). `answer` is the body sent (NULL: none, Apple showed its default).
CREATE TABLE churnwatch.retention_message_requests (
    request_identifier      uuid PRIMARY KEY,
    bundle_id               text NOT NULL,
    original_transaction_id text NOT NULL,
    product_id              text NOT NULL,
    user_locale             text NOT NULL,
    environment             text NOT NULL CHECK (environment IN ('Production', 'Sandbox')),
    signed_at               timestamptz NOT NULL,
    received_at             timestamptz NOT NULL DEFAULT now(),
    arm                     text NOT NULL CHECK (arm IN ('treated', 'holdout', 'no_rule')),
    rule_name               text,
    -- The matched rule's kind, for the holdout too (who would have been shown it).
    rule_kind               text CHECK (rule_kind IN ('message', 'alternate_product', 'promotional_offer')),
    answer_kind             text CHECK (answer_kind IN ('message', 'alternate_product', 'promotional_offer')),
    message_id              uuid,
    segment                 text,
    tenure_days             integer,
    -- The end of the period the subscriber was in at the view, as stored then (the outcome's
    -- horizon: the next renewal after the view).
    period_ends_at          timestamptz,
    facts_known             boolean NOT NULL,
    answer                  jsonb
);
CREATE INDEX retention_message_requests_subscription_idx
    ON churnwatch.retention_message_requests (original_transaction_id, signed_at);
-- The report's window and prune's age (400 days by default, docs/contracts.md "Retention").
CREATE INDEX retention_message_requests_signed_idx ON churnwatch.retention_message_requests (signed_at);

-- The view is logged as an event. NOT VALID, then validated: the check of the rows already there
-- does not hold the writers' lock.
ALTER TABLE churnwatch.churn_events DROP CONSTRAINT churn_events_event_check;
ALTER TABLE churnwatch.churn_events ADD CONSTRAINT churn_events_event_check CHECK (event IN (
    'auto_renew_disabled', 'auto_renew_enabled', 'billing_retry_started', 'grace_period_started',
    'grace_period_expired', 'billing_recovered', 'renewed', 'expired', 'refunded',
    'refund_reversed', 'plan_change_scheduled', 'plan_change_cancelled', 'plan_changed',
    'price_increase_pending', 'price_increase_accepted', 'resubscribed', 'cancel_page_viewed')) NOT VALID;
ALTER TABLE churnwatch.churn_events VALIDATE CONSTRAINT churn_events_event_check;
