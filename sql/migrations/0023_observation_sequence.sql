-- The event log as a function of the observations, whatever order they arrive in (issue 47).
--
-- Each subscription's recent observations, besides the current one in `subscriptions`: when an
-- observation becomes the current one, the one it replaces is kept here, so a notification
-- signed before the stored state (Apple's retry of a failed delivery, a history read after
-- serve applied what came next) is placed between its neighbours by its signedDate. A row goes
-- (prune) 7 days after its successor was signed: Apple's last retry comes within about 6.5.
CREATE TABLE churnwatch.observations (
    original_transaction_id text NOT NULL,
    signed_date             timestamptz NOT NULL,   -- its place in the sequence
    as_of                   timestamptz NOT NULL,   -- the moment its undated events are dated at
    named                   text,                   -- the change its notification names (NULL: a poll)
    next_signed_date        timestamptz NOT NULL,   -- its successor's, when it was kept
    snapshot                jsonb,                  -- NULL: the same state as its successor's (more than half are)
    bundle_id               text NOT NULL,
    PRIMARY KEY (original_transaction_id, signed_date)
);
CREATE INDEX observations_prune_idx ON churnwatch.observations (next_signed_date);

-- The current observation's own two facts (the rest is the stored snapshot).
ALTER TABLE churnwatch.subscriptions ADD COLUMN observed_as_of timestamptz, ADD COLUMN observed_named text;

-- Observations whose successor was signed before this were pruned: a late one signed before it,
-- with no kept predecessor, cannot be placed (it is stale, as before the sequence was kept).
ALTER TABLE churnwatch.apps ADD COLUMN observations_pruned_before timestamptz;

-- An event is never deleted. One a late observation shows was derived from the wrong neighbours
-- (the change happened at another moment, or not at all) is marked superseded, once; the events
-- the right neighbours show are new rows. Unique among the live events only, so an event
-- superseded and shown again later is a new row too. A cancel-page view is not a change: each
-- recorded request is one event (kept once by its request identifier), even two of one
-- subscriber signed in the same millisecond.
ALTER TABLE churnwatch.churn_events ADD COLUMN superseded_at timestamptz;
DROP INDEX churnwatch.churn_events_dedupe_idx;
CREATE UNIQUE INDEX churn_events_dedupe_idx ON churnwatch.churn_events (original_transaction_id, event, occurred_at)
    WHERE superseded_at IS NULL AND event <> 'cancel_page_viewed';
CREATE INDEX churn_events_superseded_idx ON churnwatch.churn_events (superseded_at) WHERE superseded_at IS NOT NULL;
