-- The retention loop (issue 15): which promotional offer a campaign gives, a holdout group that
-- never gets it, and what happened to every win-back entry afterwards.

-- Offers per campaign, configured with `churnwatch offers set|list|remove`. product_id '' means
-- every product of the campaign's entries; a row for the entry's own product wins over it.
CREATE TABLE churnwatch.offers (
    campaign    text NOT NULL CHECK (campaign IN ('save_offer', 'billing_fix', 'winback_offer', 'resubscribe_prompt')),
    product_id  text NOT NULL DEFAULT '',
    offer_id    text NOT NULL CHECK (offer_id <> ''),  -- a promotional offer id of the subscription group
    holdout     double precision NOT NULL DEFAULT 0 CHECK (holdout >= 0 AND holdout < 1),
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (campaign, product_id)
);

-- The holdout draw of an entry: the first 52 bits of SHA-256("<otid>\n<campaign>\n<episode>")
-- as a number in [0, 1). The same entry always draws the same number; it is held out when the
-- number is below the offer's holdout share. Anyone can recompute it.
CREATE FUNCTION churnwatch.holdout_draw(otid text, campaign text, episode text) RETURNS double precision
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT ('x' || substr(encode(sha256(convert_to(otid || chr(10) || campaign || chr(10) || episode, 'UTF8')), 'hex'), 1, 13))::bit(52)::bigint
           / 4503599627370496.0::double precision
$$;

-- Win-back entries: the offer each was given (or would have been, when held out), the holdout
-- flag, and the outcome. A held-out entry has status 'held_out': never claimable, by churnwatch
-- or by a consumer that claims 'pending' rows with SQL.
ALTER TABLE churnwatch.winback_queue DROP CONSTRAINT winback_queue_status_check;
ALTER TABLE churnwatch.winback_queue ADD CONSTRAINT winback_queue_status_check
    CHECK (status IN ('pending', 'claimed', 'done', 'obsolete', 'expired', 'held_out'));
ALTER TABLE churnwatch.winback_queue
    ADD COLUMN offer_id          text,                -- from churnwatch.offers when the entry was created
    ADD COLUMN holdout           boolean NOT NULL DEFAULT false,
    ADD COLUMN outcome           text CHECK (outcome IN ('saved', 'lost')),
    ADD COLUMN outcome_reason    text,                -- the event that decided it (auto_renew_enabled, expired, ...)
    ADD COLUMN outcome_at        timestamptz,         -- when it happened (Apple's time)
    ADD COLUMN outcome_price     bigint,              -- renewal price at the outcome, milliunits
    ADD COLUMN outcome_currency  text;                -- ISO 4217 code of outcome_price
CREATE INDEX winback_queue_open_outcome_idx ON churnwatch.winback_queue (original_transaction_id)
    WHERE outcome IS NULL;

-- Revenue at risk: the next renewal's price as Apple signs it in the renewal info.
ALTER TABLE churnwatch.subscription_segments
    ADD COLUMN renewal_price     bigint,              -- milliunits
    ADD COLUMN renewal_currency  text;                -- ISO 4217
