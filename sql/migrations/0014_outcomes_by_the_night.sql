-- Issue 30: outcomes that hold up against the truth.
-- opened_at: the moment an entry was opened, the run's or the sync's (--as-of), never the wall
-- clock: days to save count from it and `outcomes --since` filters by it. Entries written before
-- this migration take their run's as-of, else their insert time (what `outcomes` read before).
-- good_sign_at: on an open save offer, when the customer first showed they would stay (auto-renew
-- back on, price increase accepted, another plan chosen) since the last sign they would not; the
-- period's end decides the outcome, this dates the save (docs/churn-model.md, "Outcomes").
ALTER TABLE churnwatch.winback_queue
    ADD COLUMN opened_at timestamptz,
    ADD COLUMN good_sign_at timestamptz;
UPDATE churnwatch.winback_queue w
SET opened_at = coalesce((SELECT r.as_of FROM churnwatch.runs r WHERE r.id = w.run_id), w.created_at);
ALTER TABLE churnwatch.winback_queue
    ALTER COLUMN opened_at SET DEFAULT now(),
    ALTER COLUMN opened_at SET NOT NULL;
