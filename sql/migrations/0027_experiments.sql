-- Issue 50: experiments with several arms on the cancel page (docs/contracts.md "Experiments").
-- An experiment takes the audience of one cancel-page rule (who the rule matches) and, while it
-- runs, answers that audience with one of its arms instead of the rule's own answer; a fixed
-- share is held out (shown the default). Weights are fixed, or moved nightly by Thompson
-- sampling (`churnwatch experiments update`); each allocation is a numbered period.

CREATE TABLE churnwatch.experiments (
    bundle_id        text NOT NULL,
    name             text NOT NULL CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$'),
    surface          text NOT NULL DEFAULT 'cancel_page' CHECK (surface IN ('cancel_page')),
    -- The cancel-page rule whose audience the experiment answers.
    rule_name        text NOT NULL,
    allocation       text NOT NULL CHECK (allocation IN ('fixed', 'adaptive')),
    -- Fixed for the experiment's life: never adaptive, never changed by `set`.
    holdout          double precision NOT NULL CHECK (holdout > 0 AND holdout < 1),
    -- Adaptive: matured first exposures every active arm needs before any reallocation.
    min_matured      integer NOT NULL DEFAULT 100 CHECK (min_matured >= 1),
    -- Adaptive: the least weight an active arm keeps.
    floor            double precision NOT NULL DEFAULT 0.05 CHECK (floor >= 0 AND floor <= 0.5),
    -- Adaptive: arms valued by saves times (1 - discount) rather than by saves.
    revenue_weighted boolean NOT NULL DEFAULT true,
    -- How long after a view its decision metric (auto-renew still on) matures.
    decision_hours   integer NOT NULL DEFAULT 24 CHECK (decision_hours BETWEEN 1 AND 720),
    -- Adaptive: the least time between two allocations.
    cadence_hours    integer NOT NULL DEFAULT 24 CHECK (cadence_hours BETWEEN 1 AND 720),
    state            text NOT NULL DEFAULT 'running' CHECK (state IN ('running', 'stopped')),
    started_at       timestamptz NOT NULL,
    stopped_at       timestamptz,
    updated_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (bundle_id, name)
);
-- One running experiment per rule.
CREATE UNIQUE INDEX experiments_running_rule_idx ON churnwatch.experiments (bundle_id, rule_name) WHERE state = 'running';

-- The arms, in the order given. A retired arm gets no new subscriber; its history stays.
CREATE TABLE churnwatch.experiment_arms (
    bundle_id            text NOT NULL,
    experiment           text NOT NULL,
    arm                  text NOT NULL CHECK (arm ~ '^[a-z0-9][a-z0-9_-]{0,39}$' AND arm <> 'holdout'),
    position             integer NOT NULL,
    kind                 text NOT NULL CHECK (kind IN ('message', 'alternate_product', 'promotional_offer')),
    message_id           uuid NOT NULL,
    alternate_product_id text,
    billing_plan_type    text,
    offer_id             text,
    -- The share of the next renewal's price the answer gives away (a 50 % offer: 0.5).
    discount             double precision NOT NULL DEFAULT 0 CHECK (discount >= 0 AND discount < 1),
    retired_at           timestamptz,
    PRIMARY KEY (bundle_id, experiment, arm),
    FOREIGN KEY (bundle_id, experiment) REFERENCES churnwatch.experiments ON DELETE CASCADE,
    CHECK (kind <> 'alternate_product' OR alternate_product_id IS NOT NULL),
    CHECK (kind <> 'promotional_offer' OR offer_id IS NOT NULL)
);

-- Every allocation: period 0 at `add`, one more at each reallocation, weight change, retirement
-- or revival. `weights` are the active arms' shares of the treated (they sum to 1); `previous`
-- those before; `posterior` what an adaptive one was computed from.
CREATE TABLE churnwatch.experiment_allocations (
    bundle_id   text NOT NULL,
    experiment  text NOT NULL,
    period      integer NOT NULL CHECK (period >= 0),
    at          timestamptz NOT NULL,
    recorded_at timestamptz NOT NULL DEFAULT now(),
    by          text NOT NULL,
    reason      text NOT NULL,
    weights     jsonb NOT NULL,
    previous    jsonb,
    posterior   jsonb,
    PRIMARY KEY (bundle_id, experiment, period),
    FOREIGN KEY (bundle_id, experiment) REFERENCES churnwatch.experiments ON DELETE CASCADE
);

-- A subscriber's arm, drawn at the first exposure and kept (sticky) whatever the weights do.
-- `period`: the allocation in force at that exposure (whose weights gave the draw its arm).
CREATE TABLE churnwatch.experiment_assignments (
    bundle_id               text NOT NULL,
    experiment              text NOT NULL,
    original_transaction_id text NOT NULL,
    arm                     text NOT NULL,
    period                  integer NOT NULL,
    assigned_at             timestamptz NOT NULL,
    PRIMARY KEY (bundle_id, original_transaction_id, experiment),
    FOREIGN KEY (bundle_id, experiment) REFERENCES churnwatch.experiments ON DELETE CASCADE
);

-- What each request showed within an experiment: its arm (or `holdout`) and period.
ALTER TABLE churnwatch.retention_message_requests
    ADD COLUMN experiment text,
    ADD COLUMN experiment_arm text,
    ADD COLUMN experiment_period integer;
CREATE INDEX retention_message_requests_experiment_idx
    ON churnwatch.retention_message_requests (bundle_id, experiment, original_transaction_id, signed_at) WHERE experiment IS NOT NULL;

-- The cancel page's outcome horizon (docs/contracts.md "The cancel page"): the end of the period
-- the subscriber was in at the view. When the period end stored at the view had already passed
-- (a renewal churnwatch had not seen yet), the period boundaries after it by the subscription's
-- period length (`period`, from its current snapshot) until one is past the view; 35 days after
-- the view when nothing is known.
CREATE FUNCTION churnwatch.cancel_page_horizon(signed_at timestamptz, period_ends_at timestamptz, period interval)
RETURNS timestamptz LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE
        WHEN period_ends_at > signed_at THEN period_ends_at
        WHEN period_ends_at IS NOT NULL AND period > interval '1 day' THEN
            period_ends_at + period * (floor(extract(epoch FROM signed_at - period_ends_at) / extract(epoch FROM period)) + 1)
        ELSE signed_at + interval '35 days'
    END
$$;
