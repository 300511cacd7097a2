-- The failure class of a run item as a column the schema checks, next to the reason's prose in
-- `outcome`. Resume, the 429 retry rounds, the run summary, `status` and the metrics read the
-- class; no code matches reason text any more.
--
-- text with a CHECK rather than a PostgreSQL enum type: the values are the raw values of
-- ChurnStore's ItemFailureClass and travel as plain text (a batch writes them through
-- unnest(text[]) with no cast), and a later migration can change the set by replacing one named
-- constraint inside its transaction, where ALTER TYPE ... ADD VALUE cannot be used before commit.
--
-- A failed item always has a class and any other item has none (resetting an item to pending
-- clears it).
ALTER TABLE churnwatch.run_items ADD COLUMN failure_class text
    CONSTRAINT run_items_failure_class_check CHECK (failure_class IN (
        'not_found', 'bad_request', 'verification', 'malformed', 'rate_limited', 'unavailable',
        'unauthorized', 'untrusted_server', 'internal', 'unknown'));

-- Existing failures: the class from the prefix their reason begins with; a reason with another
-- prefix, or none, is 'unknown' (what `status` already counted a reason without a prefix as).
UPDATE churnwatch.run_items SET failure_class = CASE
        WHEN outcome LIKE 'not found:%' THEN 'not_found'
        WHEN outcome LIKE 'bad request:%' THEN 'bad_request'
        WHEN outcome LIKE 'verification:%' THEN 'verification'
        WHEN outcome LIKE 'malformed:%' THEN 'malformed'
        WHEN outcome LIKE 'rate limited:%' THEN 'rate_limited'
        WHEN outcome LIKE 'unavailable:%' THEN 'unavailable'
        WHEN outcome LIKE 'unauthorized:%' THEN 'unauthorized'
        WHEN outcome LIKE 'untrusted server:%' THEN 'untrusted_server'
        WHEN outcome LIKE 'internal:%' THEN 'internal'
        ELSE 'unknown'
    END
WHERE status = 'failed';

ALTER TABLE churnwatch.run_items ADD CONSTRAINT run_items_failure_class_failed_check
    CHECK ((status = 'failed') = (failure_class IS NOT NULL));
