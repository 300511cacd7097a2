-- churnwatch schema: the contracts of design.md §5 and the worker's own bookkeeping.
-- Applied by `churnwatch migrate` inside one transaction. Never edit once applied: add a file.

CREATE SCHEMA IF NOT EXISTS churnwatch;

-- Input: one row per subscription, inserted by the app backend (ON CONFLICT DO NOTHING) or by
-- `churnwatch import`. The app owns the first columns; the worker owns the rest.
CREATE TABLE churnwatch.subscriptions (
    original_transaction_id text PRIMARY KEY,
    app_account_token       uuid,
    customer_ref            text,
    environment             text NOT NULL DEFAULT 'Production'
                            CHECK (environment IN ('Production', 'Sandbox')),
    receipt_data            text,                 -- legacy verifyReceipt input (base64), optional
    registered_at           timestamptz NOT NULL DEFAULT now(),

    -- Worker-owned: the last verified state (NULL until the first successful poll).
    product_id              text,
    subscription_group_id   text,
    state                   text CHECK (state IN ('active', 'expired', 'billing_retry', 'grace_period', 'revoked')),
    apple_status            integer,              -- Apple's raw status (1..5, or a new value)
    period_start            timestamptz,          -- purchase/renewal date of the current period
    expires_at              timestamptz,          -- end of the current period
    auto_renew              boolean,
    auto_renew_product_id   text,
    in_billing_retry        boolean,
    grace_period_expires_at timestamptz,
    expiration_intent       integer,
    price_increase_status   integer,
    revocation_date         timestamptz,
    revocation_reason       integer,
    offer_type              integer,
    latest_transaction_id   text,
    signed_date             timestamptz,          -- Apple's signedDate of the stored state
    snapshot                jsonb,                -- the normalized snapshot (ChurnModel)
    history_revision        text,                 -- Apple's revision token for incremental history
    receipt_latest          text,                 -- newest latest_receipt from verifyReceipt

    -- Worker-owned: polling bookkeeping.
    last_polled_at          timestamptz,          -- last attempt
    last_success_at         timestamptz,          -- last verified answer
    last_outcome            text CHECK (last_outcome IN ('ok', 'failed')),
    last_error              text,
    consecutive_failures    integer NOT NULL DEFAULT 0,
    updated_at              timestamptz NOT NULL DEFAULT now()
);

-- The scheduler's window queries (design.md §1), each index-driven.
CREATE INDEX subscriptions_period_start_idx ON churnwatch.subscriptions (period_start);
CREATE INDEX subscriptions_expires_at_idx ON churnwatch.subscriptions (expires_at);
CREATE INDEX subscriptions_billing_trouble_idx ON churnwatch.subscriptions (expires_at)
    WHERE state IN ('billing_retry', 'grace_period');
CREATE INDEX subscriptions_at_risk_idx ON churnwatch.subscriptions (expires_at)
    WHERE state = 'active' AND (auto_renew = false OR price_increase_status = 0
                                OR auto_renew_product_id IS DISTINCT FROM product_id);
CREATE INDEX subscriptions_never_polled_idx ON churnwatch.subscriptions (registered_at)
    WHERE last_success_at IS NULL;
CREATE INDEX subscriptions_failed_idx ON churnwatch.subscriptions (last_polled_at)
    WHERE last_outcome = 'failed';
CREATE INDEX subscriptions_last_success_idx ON churnwatch.subscriptions (last_success_at);
CREATE INDEX subscriptions_product_idx ON churnwatch.subscriptions (product_id);
CREATE INDEX subscriptions_account_idx ON churnwatch.subscriptions (app_account_token)
    WHERE app_account_token IS NOT NULL;

-- Every verified transaction seen in history or status answers; idempotent on transaction_id.
CREATE TABLE churnwatch.transactions (
    transaction_id          text PRIMARY KEY,
    original_transaction_id text NOT NULL,
    product_id              text NOT NULL,
    subscription_group_id   text,
    web_order_line_item_id  text,
    purchase_date           timestamptz,
    original_purchase_date  timestamptz,
    expires_date            timestamptz,
    transaction_reason      text,
    offer_type              integer,
    offer_identifier        text,
    in_app_ownership_type   text,
    is_upgraded             boolean NOT NULL DEFAULT false,
    revocation_date         timestamptz,
    revocation_reason       integer,
    price                   bigint,               -- milliunits
    currency                text,
    environment             text,
    signed_date             timestamptz,
    payload                 jsonb NOT NULL,       -- the verified, decoded payload
    first_seen_at           timestamptz NOT NULL DEFAULT now(),
    updated_at              timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX transactions_original_idx ON churnwatch.transactions (original_transaction_id, purchase_date DESC);

-- Runs: one per nightly run or backfill.
CREATE TABLE churnwatch.runs (
    id              bigserial PRIMARY KEY,
    kind            text NOT NULL CHECK (kind IN ('nightly', 'backfill')),
    as_of           timestamptz NOT NULL,
    started_at      timestamptz NOT NULL DEFAULT now(),
    finished_at     timestamptz,
    status          text NOT NULL DEFAULT 'running'
                    CHECK (status IN ('planning', 'running', 'interrupted', 'done', 'failed')),
    params          jsonb NOT NULL DEFAULT '{}',  -- windows, cohort selectors, flags
    due             integer NOT NULL DEFAULT 0,
    polled          integer NOT NULL DEFAULT 0,
    failed          integer NOT NULL DEFAULT 0,
    events          integer NOT NULL DEFAULT 0,
    enqueued        integer NOT NULL DEFAULT 0,
    obsoleted       integer NOT NULL DEFAULT 0,
    counts          jsonb NOT NULL DEFAULT '{}'   -- by reason, by event type, failures by reason
);
CREATE INDEX runs_unfinished_idx ON churnwatch.runs (kind, id) WHERE finished_at IS NULL;

-- The run's work items: planned by one INSERT ... SELECT per reason, claimed with
-- FOR UPDATE SKIP LOCKED under a lease.
CREATE TABLE churnwatch.run_items (
    run_id                  bigint NOT NULL REFERENCES churnwatch.runs (id) ON DELETE CASCADE,
    original_transaction_id text NOT NULL,
    reason                  text NOT NULL,
    priority                smallint NOT NULL DEFAULT 5,  -- lower is sooner
    status                  text NOT NULL DEFAULT 'pending'
                            CHECK (status IN ('pending', 'claimed', 'done', 'failed')),
    attempts                integer NOT NULL DEFAULT 0,
    claimed_by              text,
    lease_until             timestamptz,
    outcome                 text,                 -- ok, or the failure reason
    finished_at             timestamptz,
    PRIMARY KEY (run_id, original_transaction_id)
);
CREATE INDEX run_items_claim_idx ON churnwatch.run_items (run_id, priority, original_transaction_id)
    WHERE status = 'pending';
CREATE INDEX run_items_lease_idx ON churnwatch.run_items (run_id, lease_until)
    WHERE status = 'claimed';

-- Append-only churn event log.
CREATE TABLE churnwatch.churn_events (
    id                      bigserial PRIMARY KEY,
    original_transaction_id text NOT NULL,
    event                   text NOT NULL CHECK (event IN (
        'auto_renew_disabled', 'auto_renew_enabled', 'billing_retry_started', 'grace_period_started',
        'grace_period_expired', 'billing_recovered', 'renewed', 'expired', 'refunded',
        'refund_reversed', 'plan_change_scheduled', 'plan_change_cancelled', 'plan_changed',
        'price_increase_pending', 'price_increase_accepted', 'resubscribed')),
    occurred_at             timestamptz NOT NULL,
    detected_at             timestamptz NOT NULL,
    run_id                  bigint REFERENCES churnwatch.runs (id),
    details                 jsonb NOT NULL DEFAULT '{}'
);
-- Belt and braces for idempotency: the same change is never logged twice.
CREATE UNIQUE INDEX churn_events_dedupe_idx ON churnwatch.churn_events (original_transaction_id, event, occurred_at);
CREATE INDEX churn_events_detected_idx ON churnwatch.churn_events (detected_at);
CREATE INDEX churn_events_run_idx ON churnwatch.churn_events (run_id);

-- The current segment of every subscription (design.md §5), written by the worker.
CREATE TABLE churnwatch.subscription_segments (
    original_transaction_id text PRIMARY KEY,
    app_account_token       uuid,
    customer_ref            text,
    product_id              text,
    segment                 text NOT NULL CHECK (segment IN (
        'refunded', 'churned_voluntary', 'churned_billing', 'churned_price_increase',
        'churned_product_unavailable', 'churned_other', 'grace_period', 'billing_retry',
        'will_not_renew', 'price_increase_pending', 'plan_change_pending', 'active', 'unknown')),
    segment_since           timestamptz NOT NULL,
    expires_at              timestamptz,
    auto_renew              boolean,
    in_billing_retry        boolean,
    grace_period_expires_at timestamptz,
    expiration_intent       integer,
    revocation_reason       integer,
    offer_type              integer,
    last_polled_at          timestamptz
);
CREATE INDEX subscription_segments_segment_idx ON churnwatch.subscription_segments (segment, product_id);

-- Daily segment sizes (history).
CREATE TABLE churnwatch.segment_daily (
    day             date NOT NULL,
    segment         text NOT NULL,
    product_id      text NOT NULL DEFAULT '',     -- '' when unknown (never polled)
    subscriptions   integer NOT NULL,
    PRIMARY KEY (day, segment, product_id)
);

-- Win-back queues drained by a messaging system.
CREATE TABLE churnwatch.winback_queue (
    id                      bigserial PRIMARY KEY,
    original_transaction_id text NOT NULL,
    app_account_token       uuid,
    customer_ref            text,
    campaign                text NOT NULL CHECK (campaign IN ('save_offer', 'billing_fix', 'winback_offer', 'resubscribe_prompt')),
    episode                 text NOT NULL,        -- one continuous stretch of the same risk
    product_id              text,
    reason                  text NOT NULL,
    offer_ids               text[] NOT NULL DEFAULT '{}',
    not_before              timestamptz NOT NULL,
    expires_at              timestamptz,
    status                  text NOT NULL DEFAULT 'pending'
                            CHECK (status IN ('pending', 'claimed', 'done', 'obsolete', 'expired')),
    claimed_by              text,
    claimed_at              timestamptz,
    claim_expires_at        timestamptz,
    created_at              timestamptz NOT NULL DEFAULT now(),
    updated_at              timestamptz NOT NULL DEFAULT now(),
    run_id                  bigint REFERENCES churnwatch.runs (id)
);
-- At most one entry per subscription, campaign and episode, ever.
CREATE UNIQUE INDEX winback_queue_episode_idx ON churnwatch.winback_queue (original_transaction_id, campaign, episode);
CREATE INDEX winback_queue_claim_idx ON churnwatch.winback_queue (campaign, not_before, id) WHERE status = 'pending';
CREATE INDEX winback_queue_claimed_idx ON churnwatch.winback_queue (claim_expires_at) WHERE status = 'claimed';

-- Payloads that failed verification: kept for inspection, never trusted.
CREATE TABLE churnwatch.quarantine (
    id                      bigserial PRIMARY KEY,
    original_transaction_id text,
    run_id                  bigint REFERENCES churnwatch.runs (id),
    endpoint                text NOT NULL,
    reason                  text NOT NULL,
    payload                 text NOT NULL,        -- the raw signed payload or response body
    received_at             timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX quarantine_otid_idx ON churnwatch.quarantine (original_transaction_id);
