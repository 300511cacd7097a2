-- Issue 28: Apple's refund requests (CONSUMPTION_REQUEST) and churnwatch's answers
-- (docs/contracts.md, "Refund requests").

-- Written by the app's backend: whether each customer agreed to share consumption data with
-- Apple, and what churnwatch cannot know itself. A customer is named by the app account token
-- the app gave its purchases, or by the subscription's original transaction id (that row wins).
CREATE TABLE churnwatch.refund_consent (
    app_account_token       uuid,
    original_transaction_id text,
    customer_consented      boolean NOT NULL,
    -- NULL: DELIVERED.
    delivery_status         text CHECK (delivery_status IN ('DELIVERED', 'UNDELIVERED_QUALITY_ISSUE',
                                'UNDELIVERED_WRONG_ITEM', 'UNDELIVERED_SERVER_OUTAGE', 'UNDELIVERED_OTHER')),
    -- NULL: churnwatch says whether a free trial of the subscription is on record.
    sample_content_provided boolean,
    updated_at              timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT refund_consent_one_key CHECK ((app_account_token IS NULL) <> (original_transaction_id IS NULL))
);
CREATE UNIQUE INDEX refund_consent_token_idx ON churnwatch.refund_consent (app_account_token)
    WHERE app_account_token IS NOT NULL;
CREATE UNIQUE INDEX refund_consent_otid_idx ON churnwatch.refund_consent (original_transaction_id)
    WHERE original_transaction_id IS NOT NULL;

-- One row per CONSUMPTION_REQUEST read by the change feed, with its answer and Apple's decision.
CREATE TABLE churnwatch.refund_requests (
    notification_uuid       uuid PRIMARY KEY,
    original_transaction_id text NOT NULL,
    transaction_id          text NOT NULL,
    environment             text NOT NULL CHECK (environment IN ('Production', 'Sandbox')),
    reason                  text,                 -- Apple's consumptionRequestReason, as sent
    requested_at            timestamptz NOT NULL, -- the notification's signedDate
    deadline                timestamptz NOT NULL, -- requested_at + 12 hours
    period_start            timestamptz,          -- the transaction's purchaseDate
    period_end              timestamptz,          -- and expiresDate
    received_at             timestamptz NOT NULL, -- when churnwatch read it
    state                   text NOT NULL DEFAULT 'pending' CHECK (state IN (
                                'pending', 'sending', 'answered', 'not_sent', 'failed')),
    policy_branch           text CHECK (policy_branch IN (
                                'no_consent', 'expired', 'undelivered', 'decline_consumed', 'no_preference')),
    attempts                integer NOT NULL DEFAULT 0,
    lease_until             timestamptz,          -- while 'sending': another sync waits until then
    sent                    jsonb,                -- the body sent (or about to be)
    answered_at             timestamptz,
    apple_status            integer,              -- Apple's HTTP status for the last attempt
    last_error              text,
    decision                text CHECK (decision IN ('refunded', 'declined')),
    decided_at              timestamptz,
    CONSTRAINT refund_requests_answered_in_time CHECK (answered_at IS NULL OR answered_at < deadline)
);
CREATE INDEX refund_requests_open_idx ON churnwatch.refund_requests (deadline) WHERE state IN ('pending', 'sending');
CREATE INDEX refund_requests_transaction_idx ON churnwatch.refund_requests (transaction_id);
CREATE INDEX refund_requests_requested_idx ON churnwatch.refund_requests (requested_at);
