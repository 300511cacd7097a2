-- Issue 48 (decision Y on the cancel page): the view in the segment tables and in the rules
-- (docs/contracts.md "subscription_segments" and "The cancel page").
--
-- The last cancel-page view of a subscriber, set when serve records a view (the request's
-- signedDate; the latest of them when several). Segment values do not change with it. NULL:
-- never viewed, or viewed only before churnwatch had a segment row for the subscription.
ALTER TABLE churnwatch.subscription_segments ADD COLUMN last_cancel_page_view_at timestamptz;

UPDATE churnwatch.subscription_segments AS g SET last_cancel_page_view_at = v.at
FROM (SELECT bundle_id, original_transaction_id, max(occurred_at) AS at FROM churnwatch.churn_events
      WHERE event = 'cancel_page_viewed' AND superseded_at IS NULL GROUP BY 1, 2) AS v
WHERE g.original_transaction_id = v.original_transaction_id AND g.bundle_id = v.bundle_id;

-- A rule for a first visit (`never`: no view recorded before the request), a repeated one
-- (`within:N`: a view recorded within the N days before it), or any (the default, every rule
-- written before this migration).
ALTER TABLE churnwatch.retention_rules ADD COLUMN viewed_before text NOT NULL DEFAULT 'any'
    CHECK (viewed_before ~ '^(any|never|within:[1-9][0-9]{0,3})$');
