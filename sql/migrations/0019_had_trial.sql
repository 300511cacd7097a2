-- Issue 40: a refund answer's sampleContentProvided, when the app leaves it unset, says whether
-- the subscriber had a free trial. It was read from churnwatch.transactions, whose rows prune
-- removes after the retention period: a trial older than that was forgotten and the answer said
-- false although Apple holds the trial. The fact is now kept on the subscription (set when a
-- free trial's transaction is first stored: an introductory offer at price 0), and prune never
-- removes subscriptions.
--
-- A constant default: PostgreSQL stores it in the catalogue and rewrites no row. The update
-- touches only the subscriptions with a trial still on record.
ALTER TABLE churnwatch.subscriptions ADD COLUMN had_trial boolean NOT NULL DEFAULT false;

UPDATE churnwatch.subscriptions s SET had_trial = true
WHERE EXISTS (SELECT 1 FROM churnwatch.transactions t
              WHERE t.original_transaction_id = s.original_transaction_id AND t.offer_type = 1 AND t.price = 0);
