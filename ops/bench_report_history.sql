-- History for `ops/bench report`, on top of ops/bench_plan_population.sql (shape=steady): what
-- 30 nights of churnwatch leave behind for the report to read.
--
--   psql -v as_of=2026-11-01T02:00:00Z -f ops/bench_report_history.sql
--
--   subscription_segments  one row per subscription, its segment from the stored state
--   segment_daily          31 days by segment and product, sizes drifting a little per day
--   churn_events           30 nights: about 3.3 % of subscriptions renew each night, 0.5 % switch
--                          auto-renew off and 0.1 % back on, 0.2 % start billing trouble
--                          (60 % of those recover within 1-10 days, 25 % expire), 0.1 % expire
--   segment_changes        the moves those events imply (about 10,000 a night)
--   winback_queue          an entry per subscription at risk or churned, in every status
--   runs, run_workers      30 finished nightly runs with their workers' call counts
-- Deterministic (hashes of row numbers), so two runs compare.
\set ON_ERROR_STOP on

INSERT INTO churnwatch.subscription_segments (original_transaction_id, app_account_token, customer_ref, product_id, segment,
    segment_since, expires_at, auto_renew, in_billing_retry, grace_period_expires_at, expiration_intent, last_polled_at)
SELECT original_transaction_id, app_account_token, customer_ref, product_id,
       CASE WHEN state IS NULL THEN 'unknown'
            WHEN state = 'billing_retry' THEN 'billing_retry'
            WHEN state = 'grace_period' THEN 'grace_period'
            WHEN state = 'expired' THEN CASE expiration_intent WHEN 1 THEN 'churned_voluntary' ELSE 'churned_billing' END
            WHEN auto_renew = false THEN 'will_not_renew'
            WHEN price_increase_status = 0 THEN 'price_increase_pending'
            WHEN auto_renew_product_id IS DISTINCT FROM product_id THEN 'plan_change_pending'
            ELSE 'active' END,
       coalesce(period_start, registered_at), expires_at, auto_renew, in_billing_retry, grace_period_expires_at,
       expiration_intent, last_polled_at
FROM churnwatch.subscriptions;

INSERT INTO churnwatch.segment_daily (day, segment, product_id, subscriptions)
SELECT (:'as_of'::timestamptz - d * interval '1 day')::date, segment, coalesce(product_id, ''),
       greatest(0, round(count(*) * (1 + 0.002 * d * CASE WHEN segment = 'active' THEN 1 ELSE -1 END)))::int
FROM churnwatch.subscription_segments, generate_series(0, 30) AS d
GROUP BY d, segment, coalesce(product_id, '');

-- Events: night d (1..30 days before as-of) touches subscriptions by hash.
INSERT INTO churnwatch.churn_events (original_transaction_id, event, occurred_at, detected_at, details)
SELECT (2000000000000000 + i)::text, kind,
       night - interval '5 hours' - (h * 1000)::int * interval '1 second',
       night + (h * 3600)::int * interval '1 second', '{}'
FROM (
    SELECT i, d, (:'as_of'::timestamptz - d * interval '1 day') AS night,
           (hashint8(i * 31 + d) & 2147483647)::float8 / 2147483648 AS h
    FROM generate_series(1, (SELECT count(*) FROM churnwatch.subscriptions)) AS i, generate_series(0, 29) AS d
) AS draws
CROSS JOIN LATERAL (SELECT CASE WHEN h < 0.033 THEN 'renewed'
                                WHEN h < 0.038 THEN 'auto_renew_disabled'
                                WHEN h < 0.039 THEN 'auto_renew_enabled'
                                WHEN h < 0.041 THEN CASE WHEN h < 0.040 THEN 'billing_retry_started' ELSE 'grace_period_started' END
                                WHEN h < 0.042 THEN 'expired' END AS kind) AS k
WHERE h < 0.042;

-- Billing outcomes: 60 % recover within 1-10 days, 25 % expire after 10-40 days (if before as-of).
INSERT INTO churnwatch.churn_events (original_transaction_id, event, occurred_at, detected_at, details)
SELECT original_transaction_id, ending, occurred_at + lag, detected_at + lag, '{}'
FROM (
    SELECT original_transaction_id, occurred_at, detected_at,
           (hashint8(id) & 2147483647)::float8 / 2147483648 AS r
    FROM churnwatch.churn_events WHERE event IN ('billing_retry_started', 'grace_period_started')
) AS s
CROSS JOIN LATERAL (SELECT CASE WHEN r < 0.6 THEN 'billing_recovered' WHEN r < 0.85 THEN 'expired' END AS ending,
                           CASE WHEN r < 0.6 THEN (1 + r * 15)::int ELSE (10 + r * 30)::int END * interval '1 day' AS lag) AS o
WHERE ending IS NOT NULL AND detected_at + lag <= :'as_of'::timestamptz
ON CONFLICT DO NOTHING;

INSERT INTO churnwatch.segment_changes (original_transaction_id, from_segment, to_segment, changed_at)
SELECT original_transaction_id,
       CASE event WHEN 'auto_renew_disabled' THEN 'active' WHEN 'auto_renew_enabled' THEN 'will_not_renew'
                  WHEN 'billing_recovered' THEN 'billing_retry' WHEN 'expired' THEN 'will_not_renew' ELSE 'active' END,
       CASE event WHEN 'auto_renew_disabled' THEN 'will_not_renew' WHEN 'auto_renew_enabled' THEN 'active'
                  WHEN 'billing_recovered' THEN 'active' WHEN 'expired' THEN 'churned_voluntary'
                  WHEN 'grace_period_started' THEN 'grace_period' ELSE 'billing_retry' END,
       date_trunc('day', detected_at) + interval '2 hours'
FROM churnwatch.churn_events WHERE event <> 'renewed';

INSERT INTO churnwatch.winback_queue (original_transaction_id, app_account_token, customer_ref, campaign, episode, product_id,
    reason, not_before, expires_at, status, created_at)
SELECT original_transaction_id, app_account_token, customer_ref,
       CASE WHEN segment IN ('will_not_renew', 'price_increase_pending') THEN 'save_offer'
            WHEN segment IN ('grace_period', 'billing_retry') THEN 'billing_fix'
            WHEN segment = 'churned_voluntary' THEN 'winback_offer' ELSE 'resubscribe_prompt' END,
       'bench', product_id, segment, segment_since, segment_since + interval '30 days',
       (ARRAY['pending', 'claimed', 'done', 'obsolete', 'expired'])[1 + (hashtext(original_transaction_id) & 2147483647) % 5],
       segment_since
FROM churnwatch.subscription_segments
WHERE segment IN ('will_not_renew', 'price_increase_pending', 'grace_period', 'billing_retry', 'churned_voluntary', 'churned_billing');

INSERT INTO churnwatch.runs (kind, as_of, started_at, finished_at, status, due, polled, failed, events, counts)
SELECT 'nightly', :'as_of'::timestamptz - d * interval '1 day', :'as_of'::timestamptz - d * interval '1 day',
       :'as_of'::timestamptz - d * interval '1 day' + interval '160 seconds', 'done', 366000, 365800, 200, 40000, '{}'
FROM generate_series(29, 0, -1) AS d;

INSERT INTO churnwatch.run_workers (run_id, worker, started_at, seen_at, stats)
SELECT id, 'bench:' || w, started_at, finished_at,
       jsonb_build_object('calls', jsonb_build_object('status', 182900, 'history', 6000, 'receipt', 1800), 'http_429', 0)
FROM churnwatch.runs, generate_series(1, 2) AS w;

ANALYZE;
