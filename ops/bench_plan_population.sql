-- A population of registered subscriptions for `ops/bench plan`, in one statement.
--
--   psql -v n=1000000 -v as_of=2026-11-01T02:00:00Z -v shape=steady -f ops/bench_plan_population.sql
--
-- shape=steady: the table as it looks after many nightly runs (every column the worker owns
-- filled in as a poll leaves it, snapshot included, so rows are as wide as in production):
--   0.5 % never polled (state NULL, last_success_at NULL, registered since the last run)
--   2 % billing_retry (period ended within Apple's 60 days of retries), 1 % grace_period
--   4 % expired (ended within the last 120 days), the rest active:
--   of the active, 85 % monthly (period_start spread over the last 30 days, expires_at one month
--   later) and 15 % yearly (spread over the last year); 10 % with auto-renew off, 0.3 % with a
--   price increase not yet accepted (price_increase_status = 0), 1 % renewing into another
--   product (a downgrade or crossgrade pending)
--   last_success_at spread over the last 35 days (about 1 in 7 older than 30 days: stale)
--   0.5 % whose last poll failed (last_outcome 'failed', last attempt a day ago)
--   1 % legacy subscriptions with receipt data
-- shape=first: the first night: every subscription registered and never polled.
--
-- Deterministic: the "random" draws are hashes of the row number, so two runs compare.
-- Rows are written in a shuffled order, as the table's heap is after many nights of updates.
\set ON_ERROR_STOP on
INSERT INTO churnwatch.subscriptions (
    original_transaction_id, app_account_token, customer_ref, environment, receipt_data, registered_at,
    product_id, subscription_group_id, state, apple_status, period_start, expires_at, auto_renew,
    auto_renew_product_id, in_billing_retry, grace_period_expires_at, expiration_intent,
    price_increase_status, offer_type, latest_transaction_id, signed_date, snapshot, history_revision,
    last_polled_at, last_success_at, last_outcome, last_error, consecutive_failures, updated_at)
SELECT
    otid, token, 'cust-' || i, 'Production',
    CASE WHEN r5 >= 0.99 THEN 'MIIT' || repeat(md5(i::text), 150) END,
    CASE WHEN kind = 'new' THEN t - r2 * interval '1 day' ELSE t - (35 + r2 * 700) * interval '1 day' END,
    product, CASE WHEN kind <> 'new' THEN '21501453' END, state,
    CASE state WHEN 'active' THEN 1 WHEN 'expired' THEN 2 WHEN 'billing_retry' THEN 3 WHEN 'grace_period' THEN 4 END,
    period_start, expires_at, auto_renew, renews_into,
    CASE WHEN kind <> 'new' THEN state IN ('billing_retry', 'grace_period') END,
    CASE WHEN state = 'grace_period' THEN expires_at + interval '16 days' END,
    CASE WHEN state = 'expired' THEN CASE WHEN r3 < 0.7 THEN 1 ELSE 2 END END,
    price_increase, CASE WHEN kind <> 'new' AND r6 < 0.05 THEN 1 END,
    CASE WHEN kind <> 'new' THEN (2000000100000000 + i * 7)::text END,
    last_success,
    CASE WHEN kind <> 'new' THEN jsonb_build_object(
        'version', 1, 'original_transaction_id', otid, 'transaction_id', (2000000100000000 + i * 7)::text,
        'web_order_line_item_id', (2000000050000000 + i * 7)::text, 'bundle_id', 'com.example.churnwatch',
        'product_id', product, 'subscription_group_identifier', '21501453', 'type', 'Auto-Renewable Subscription',
        'state', state, 'status', CASE state WHEN 'active' THEN 1 WHEN 'expired' THEN 2 WHEN 'billing_retry' THEN 3 ELSE 4 END,
        'original_purchase_date_ms', (extract(epoch FROM t - (35 + r2 * 700) * interval '1 day') * 1000)::bigint,
        'period_start_ms', (extract(epoch FROM period_start) * 1000)::bigint,
        'period_end_ms', (extract(epoch FROM expires_at) * 1000)::bigint,
        'auto_renew_status', CASE WHEN auto_renew THEN 1 ELSE 0 END, 'auto_renew_product_id', renews_into,
        'is_in_billing_retry_period', state IN ('billing_retry', 'grace_period'),
        'price_increase_status', price_increase,
        'renewal_date_ms', (extract(epoch FROM expires_at) * 1000)::bigint,
        'renewal_price', CASE WHEN product LIKE '%yearly' THEN 99990 ELSE 9990 END, 'renewal_currency', 'USD',
        'eligible_win_back_offer_ids', '[]'::jsonb,
        'recent_subscription_start_date_ms', (extract(epoch FROM t - (35 + r2 * 700) * interval '1 day') * 1000)::bigint,
        'has_renewal_info', true, 'transaction_reason', 'RENEWAL', 'in_app_ownership_type', 'PURCHASED',
        'environment', 'Production', 'price', CASE WHEN product LIKE '%yearly' THEN 99990 ELSE 9990 END,
        'currency', 'USD', 'app_account_token', token::text,
        'signed_date_ms', (extract(epoch FROM last_success) * 1000)::bigint,
        'unknown_values', '[]'::jsonb) END,
    CASE WHEN kind <> 'new' THEN md5('rev' || i) END,
    CASE WHEN failed THEN t - interval '1 day' ELSE last_success END,
    last_success,
    CASE WHEN kind = 'new' THEN NULL WHEN failed THEN 'failed' ELSE 'ok' END,
    CASE WHEN failed THEN 'unavailable: HTTP 503' END,
    CASE WHEN failed THEN 1 ELSE 0 END,
    coalesce(last_success, t)
FROM (
    SELECT i, t, r2, r3, r5, r6, otid, token, kind,
           CASE kind WHEN 'new' THEN NULL WHEN 'active' THEN 'active' ELSE kind END AS state,
           CASE WHEN kind = 'new' THEN NULL WHEN r6 < 0.15 THEN 'com.example.premium.yearly' ELSE 'com.example.premium.monthly' END AS product,
           CASE WHEN kind = 'active' THEN anchor ELSE anchor - len END AS period_start,
           CASE WHEN kind = 'active' THEN anchor + len ELSE anchor END AS expires_at,
           CASE WHEN kind = 'new' THEN NULL WHEN kind = 'expired' THEN false
                WHEN kind = 'active' THEN r3 >= 0.10 ELSE true END AS auto_renew,
           CASE WHEN kind = 'new' THEN NULL
                WHEN r6 >= 0.15 AND r6 < 0.16 THEN 'com.example.basic.monthly'
                WHEN r6 < 0.15 THEN 'com.example.premium.yearly' ELSE 'com.example.premium.monthly' END AS renews_into,
           CASE WHEN kind <> 'active' THEN NULL WHEN r3 >= 0.10 AND r3 < 0.103 THEN 0
                WHEN r3 < 0.3 THEN 1 END AS price_increase,
           CASE WHEN kind = 'new' THEN NULL ELSE t - interval '2 hours' - r4 * interval '35 days' END AS last_success,
           kind <> 'new' AND r5 < 0.005 AS failed
    FROM (
        SELECT i, t, r2, r3, r4, r5, r6, otid, token, kind, len,
               CASE kind
                   WHEN 'new' THEN NULL
                   -- active: the start of the current period, within the last 30 days (monthly)
                   -- or year (yearly); it ends one period later
                   WHEN 'active' THEN t - r2 * CASE WHEN r6 < 0.15 THEN interval '365 days' ELSE interval '30 days' END
                   -- the others: the end of the last period, within Apple's 60 days of billing
                   -- retries, 16 days of grace, or 120 days ago (expired)
                   WHEN 'billing_retry' THEN t - r2 * interval '60 days'
                   WHEN 'grace_period' THEN t - r2 * interval '16 days'
                   ELSE t - r2 * interval '120 days'
               END AS anchor
        FROM (
            SELECT i, t, r2, r3, r4, r5, r6,
                   (2000000000000000 + i)::text AS otid, md5('token' || i)::uuid AS token,
                   CASE WHEN :'shape' = 'first' OR r1 < 0.005 THEN 'new'
                        WHEN r1 < 0.025 THEN 'billing_retry'
                        WHEN r1 < 0.035 THEN 'grace_period'
                        WHEN r1 < 0.075 THEN 'expired'
                        ELSE 'active' END AS kind,
                   CASE WHEN r6 < 0.15 THEN interval '1 year' ELSE interval '1 month' END AS len
            FROM (
                SELECT i, :'as_of'::timestamptz AS t,
                       (hashint8(i * 8 + 1) & 2147483647)::float8 / 2147483648 AS r1,
                       (hashint8(i * 8 + 2) & 2147483647)::float8 / 2147483648 AS r2,
                       (hashint8(i * 8 + 3) & 2147483647)::float8 / 2147483648 AS r3,
                       (hashint8(i * 8 + 4) & 2147483647)::float8 / 2147483648 AS r4,
                       (hashint8(i * 8 + 5) & 2147483647)::float8 / 2147483648 AS r5,
                       (hashint8(i * 8 + 6) & 2147483647)::float8 / 2147483648 AS r6
                FROM generate_series(1, :n) AS i
                -- Rows in no particular order, as after many nights of updates (and as an app
                -- registers them): neither the heap nor what is read from it follows the key.
                ORDER BY hashint8(i * 8 + 7)
            ) AS draws
        ) AS kinds
    ) AS periods
) AS population;
