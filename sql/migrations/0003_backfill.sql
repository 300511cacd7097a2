-- Backfill cohorts (churnwatch backfill --purchased-from/--purchased-to).
--
-- A cohort by original purchase date is read from the verified transactions, the only place
-- that keeps Apple's originalPurchaseDate as a column (never-polled subscriptions have none, so
-- that selector leaves them out). This index keeps the selection index-driven on large tables
-- (design.md §7) instead of one probe per subscription.
CREATE INDEX transactions_original_purchase_idx ON churnwatch.transactions (original_purchase_date, original_transaction_id);
