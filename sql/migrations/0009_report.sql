-- `churnwatch report`: moves between segments, for its flows panel (who moved into
-- will_not_renew, who came back).
--
-- subscription_segments keeps only the current segment, and segment_daily only sizes, so a move
-- from one segment to another was nowhere to be read. A trigger records each move as the row
-- changes, whichever statement changes it (a night's batch upsert, a backfill): nothing in the
-- worker's code paths has to remember to write it. It fires only when the segment differs
-- (WHEN clause), so a night that changes nothing writes nothing. A subscription's first segment
-- (an INSERT) is not a move. History starts when this migration is applied.
CREATE TABLE churnwatch.segment_changes (
    id                      bigserial PRIMARY KEY,
    original_transaction_id text NOT NULL,
    from_segment            text NOT NULL,
    to_segment              text NOT NULL,
    changed_at              timestamptz NOT NULL  -- the new segment's segment_since: the run's as-of time
);
CREATE INDEX segment_changes_changed_idx ON churnwatch.segment_changes (changed_at);

CREATE FUNCTION churnwatch.segment_changes_record() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO churnwatch.segment_changes (original_transaction_id, from_segment, to_segment, changed_at)
    VALUES (NEW.original_transaction_id, OLD.segment, NEW.segment, NEW.segment_since);
    RETURN NULL;
END;
$$;

CREATE TRIGGER subscription_segments_changes
    AFTER UPDATE OF segment ON churnwatch.subscription_segments
    FOR EACH ROW WHEN (OLD.segment IS DISTINCT FROM NEW.segment)
    EXECUTE FUNCTION churnwatch.segment_changes_record();

-- The report's billing panel pairs each start of billing trouble with the first recovery or
-- expiry after it, per subscription: the dedupe index (original_transaction_id, event,
-- occurred_at) serves those look-ups. Its events-per-day panel reads churn_events by
-- detected_at (churn_events_detected_idx).
