import ChurnModel
import Foundation
import Postgres

/// The statements of ``ChurnStore/pollResultsCommit(runId:asOf:detectedAt:_:)``, one per table
/// and each over a whole batch, run inside its transaction. Each does nothing for empty columns.
extension ChurnStore {
    /// One row version per polled subscription: the verified state and the polling bookkeeping in
    /// one UPDATE (rows answered stale get the bookkeeping only). `ids` and `environments` are
    /// every polled subscription; `sc` the fresh ones, each written only where the row still
    /// holds the state version it was decided from. Returns how many subscriptions were written,
    /// and the fresh ones whose row another writer changed meanwhile (`conflicted`: their
    /// observations must not be written; the caller decides them again).
    static func subscriptionsWritePolled(_ db: PostgresConnection, _ sc: SubscriptionColumns, ids: [String],
                                         environments: [String], detectedAt: Date, polled: Bool = true,
                                         established: [String] = []) throws -> (written: Int, conflicted: Set<String>) {
        guard !ids.isEmpty else { return (0, []) }
        // The change feed's observations count as a verified answer but not as a poll:
        // last_polled_at stays the poller's, and so does established_at but where the first
        // sync establishes a state (`established`); a poll clears it.
        let polledAt: PostgresQuery = polled ? "\(detectedAt)" : "s.last_polled_at"
        let establishedAt: PostgresQuery = polled ? "NULL"
            : "CASE WHEN s.original_transaction_id = ANY(\(established)::text[]) THEN \(detectedAt) ELSE s.established_at END"
        let rows = try db.query("""
            WITH prior AS (
                -- The state each fresh write replaces, as it was when the statement began.
                SELECT s.original_transaction_id, s.signed_date, coalesce(s.observed_as_of, s.signed_date) AS as_of,
                       s.observed_named, s.snapshot, s.bundle_id
                FROM churnwatch.subscriptions s WHERE s.original_transaction_id = ANY(\(sc.ids)::text[])
                  AND s.snapshot IS NOT NULL AND s.signed_date IS NOT NULL
            ), fresh AS (
                UPDATE churnwatch.subscriptions AS s SET state_version = s.state_version + 1,
                    product_id = u.product_id, subscription_group_id = u.group_id, state = u.state,
                    apple_status = u.apple_status, period_start = u.period_start, expires_at = u.expires_at,
                    auto_renew = u.auto_renew, auto_renew_product_id = u.auto_renew_product_id,
                    in_billing_retry = u.in_billing_retry, grace_period_expires_at = u.grace,
                    expiration_intent = u.intent, price_increase_status = u.price_increase,
                    revocation_date = u.revocation_date, revocation_reason = u.revocation_reason,
                    offer_type = u.offer_type, latest_transaction_id = u.latest_tx, signed_date = u.signed_date,
                    snapshot = u.snapshot, history_revision = coalesce(u.history_revision, s.history_revision),
                    receipt_latest = coalesce(u.receipt_latest, s.receipt_latest), updated_at = now(),
                    environment = u.environment, last_polled_at = \(polledAt), last_success_at = \(detectedAt),
                    last_outcome = 'ok', last_error = NULL, consecutive_failures = 0, established_at = \(establishedAt),
                    observed_as_of = u.observed_as_of, observed_named = u.named
                FROM unnest(\(sc.ids)::text[], \(sc.productIds)::text[], \(sc.groupIds)::text[], \(sc.states)::text[],
                            \(sc.appleStatuses)::int[], \(sc.periodStarts)::timestamptz[], \(sc.expiresAts)::timestamptz[],
                            \(sc.autoRenews)::bool[], \(sc.autoRenewProducts)::text[], \(sc.inRetry)::bool[],
                            \(sc.graces)::timestamptz[], \(sc.intents)::int[], \(sc.priceIncreases)::int[],
                            \(sc.revocationDates)::timestamptz[], \(sc.revocationReasons)::int[], \(sc.offerTypes)::int[],
                            \(sc.latestTransactions)::text[], \(sc.signedDates)::timestamptz[], \(sc.snapshots)::jsonb[],
                            \(sc.historyRevisions)::text[], \(sc.receiptLatests)::text[], \(sc.environments)::text[],
                            \(sc.baseVersions)::bigint[], \(sc.observedAsOfs)::timestamptz[], \(sc.named)::text[])
                     AS u(id, product_id, group_id, state, apple_status, period_start, expires_at, auto_renew,
                          auto_renew_product_id, in_billing_retry, grace, intent, price_increase, revocation_date,
                          revocation_reason, offer_type, latest_tx, signed_date, snapshot, history_revision, receipt_latest,
                          environment, base_version, observed_as_of, named)
                WHERE s.original_transaction_id = u.id AND (s.state_version = u.base_version OR u.base_version < 0)
                  AND (s.signed_date IS NULL OR u.signed_date IS NULL OR s.signed_date <= u.signed_date)
                RETURNING s.original_transaction_id, s.signed_date, s.snapshot
            ), kept AS (
                -- The replaced state joins the subscription's sequence (ObservationSequence); the
                -- same state as the new one is kept without its snapshot.
                INSERT INTO churnwatch.observations (original_transaction_id, signed_date, as_of, named, next_signed_date, snapshot, bundle_id)
                SELECT p.original_transaction_id, p.signed_date, p.as_of, p.observed_named, f.signed_date,
                       CASE WHEN p.snapshot - 'signed_date_ms' = f.snapshot - 'signed_date_ms' THEN NULL ELSE p.snapshot END, p.bundle_id
                FROM prior p JOIN fresh f USING (original_transaction_id)
                WHERE p.signed_date < f.signed_date
                ON CONFLICT DO NOTHING
            ), rest AS (
                UPDATE churnwatch.subscriptions AS s SET
                    environment = u.environment, last_polled_at = \(polledAt), last_success_at = \(detectedAt),
                    last_outcome = 'ok', last_error = NULL, consecutive_failures = 0
                FROM unnest(\(ids)::text[], \(environments)::text[]) AS u(id, environment)
                WHERE s.original_transaction_id = u.id
                  AND NOT EXISTS (SELECT 1 FROM fresh f WHERE f.original_transaction_id = u.id)
                RETURNING 1
            )
            SELECT (SELECT count(*) FROM fresh) + (SELECT count(*) FROM rest) AS n,
                   (SELECT coalesce(array_agg(c.id), '{}') FROM unnest(\(sc.ids)::text[]) AS c(id)
                    WHERE EXISTS (SELECT 1 FROM churnwatch.subscriptions s WHERE s.original_transaction_id = c.id)
                      AND NOT EXISTS (SELECT 1 FROM fresh f WHERE f.original_transaction_id = c.id)) AS conflicted
            """)
        return (try rows[0].decode(Int.self, "n"), Set(try rows[0].decode([String].self, "conflicted")))
    }

    /// Failed polls: the subscription keeps its state and records the failure. Returns how many.
    static func subscriptionsWriteFailed(_ db: PostgresConnection, ids: [String], reasons: [String], detectedAt: Date) throws -> Int {
        guard !ids.isEmpty else { return 0 }
        return try db.execute("""
            UPDATE churnwatch.subscriptions AS s SET
                last_polled_at = \(detectedAt), last_outcome = 'failed', last_error = u.reason,
                consecutive_failures = s.consecutive_failures + 1
            FROM unnest(\(ids)::text[], \(reasons)::text[]) AS u(id, reason)
            WHERE s.original_transaction_id = u.id
            """)
    }

    /// New transactions, and newer versions of known ones (an older signed version never
    /// replaces a newer one). A transaction twice in one batch is written in its newest version.
    static func transactionsUpsert(_ db: PostgresConnection, _ tc: TransactionColumns) throws {
        guard !tc.ids.isEmpty else { return }
        try db.execute("""
            INSERT INTO churnwatch.transactions (transaction_id, original_transaction_id, product_id,
                subscription_group_id, web_order_line_item_id, purchase_date, original_purchase_date, expires_date,
                transaction_reason, offer_type, offer_identifier, in_app_ownership_type, is_upgraded,
                revocation_date, revocation_reason, price, currency, environment, signed_date, payload)
            SELECT DISTINCT ON (id) * FROM unnest(\(tc.ids)::text[], \(tc.originalIds)::text[], \(tc.productIds)::text[],
                \(tc.groupIds)::text[], \(tc.webOrderIds)::text[], \(tc.purchaseDates)::timestamptz[],
                \(tc.originalPurchaseDates)::timestamptz[], \(tc.expiresDates)::timestamptz[], \(tc.reasons)::text[],
                \(tc.offerTypes)::int[], \(tc.offerIds)::text[], \(tc.ownerships)::text[], \(tc.upgraded)::bool[],
                \(tc.revocationDates)::timestamptz[], \(tc.revocationReasons)::int[], \(tc.prices)::bigint[],
                \(tc.currencies)::text[], \(tc.environments)::text[], \(tc.signedDates)::timestamptz[], \(tc.payloads)::jsonb[])
                AS u(id, otid, product_id, group_id, web_order_id, purchase_date, original_purchase_date, expires_date,
                     reason, offer_type, offer_id, ownership, upgraded, revocation_date, revocation_reason, price,
                     currency, environment, signed_date, payload)
            ORDER BY id, signed_date DESC NULLS LAST
            ON CONFLICT (transaction_id) DO UPDATE SET
                expires_date = excluded.expires_date, is_upgraded = excluded.is_upgraded,
                revocation_date = excluded.revocation_date, revocation_reason = excluded.revocation_reason,
                signed_date = excluded.signed_date, payload = excluded.payload, updated_at = now()
            WHERE churnwatch.transactions.signed_date IS NULL OR excluded.signed_date IS NULL
               OR churnwatch.transactions.signed_date <= excluded.signed_date
            """)
        // Kept on the subscription, which prune never removes (the trial's row it does).
        if !tc.trialOriginalIds.isEmpty {
            try db.execute("""
                UPDATE churnwatch.subscriptions SET had_trial = true
                WHERE original_transaction_id = ANY(\(Array(Set(tc.trialOriginalIds)))::text[]) AND NOT had_trial
                """)
        }
    }

    /// Appends detected events; one already recorded (same subscription, event and moment) is
    /// not added again. Returns how many were added.
    static func churnEventsInsert(_ db: PostgresConnection, app: String, _ ec: EventColumns, runId: Int64?, detectedAt: Date) throws -> Int {
        guard !ec.ids.isEmpty else { return 0 }
        return try db.execute("""
            INSERT INTO churnwatch.churn_events (bundle_id, original_transaction_id, event, occurred_at, detected_at, run_id, details)
            SELECT \(app), id, event, occurred_at, \(detectedAt), \(runId), details
            FROM unnest(\(ec.ids)::text[], \(ec.types)::text[], \(ec.occurredAts)::timestamptz[], \(ec.details)::jsonb[])
                 AS u(id, event, occurred_at, details)
            ON CONFLICT (original_transaction_id, event, occurred_at) WHERE superseded_at IS NULL AND event <> 'cancel_page_viewed' DO NOTHING
            """)
    }

    /// Each fresh subscription's current segment row (with its next renewal's price), inserted or replaced.
    static func segmentsUpsert(_ db: PostgresConnection, app: String, _ gc: SegmentColumns, detectedAt: Date) throws {
        guard !gc.ids.isEmpty else { return }
        try db.execute("""
            INSERT INTO churnwatch.subscription_segments (bundle_id, original_transaction_id, app_account_token, customer_ref,
                product_id, segment, segment_since, expires_at, auto_renew, in_billing_retry, grace_period_expires_at,
                expiration_intent, revocation_reason, offer_type, last_polled_at, renewal_price, renewal_currency)
            SELECT \(app), id, token, ref, product_id, segment, since, expires_at, auto_renew, in_retry, grace, intent,
                   revocation_reason, offer_type, \(detectedAt), renewal_price, renewal_currency
            FROM unnest(\(gc.ids)::text[], \(gc.tokens)::uuid[], \(gc.refs)::text[], \(gc.productIds)::text[],
                        \(gc.segments)::text[], \(gc.sinces)::timestamptz[], \(gc.expiresAts)::timestamptz[],
                        \(gc.autoRenews)::bool[], \(gc.inRetry)::bool[], \(gc.graces)::timestamptz[], \(gc.intents)::int[],
                        \(gc.revocationReasons)::int[], \(gc.offerTypes)::int[], \(gc.renewalPrices)::bigint[],
                        \(gc.renewalCurrencies)::text[])
                 AS u(id, token, ref, product_id, segment, since, expires_at, auto_renew, in_retry, grace, intent,
                      revocation_reason, offer_type, renewal_price, renewal_currency)
            ON CONFLICT (original_transaction_id) DO UPDATE SET
                app_account_token = excluded.app_account_token, customer_ref = excluded.customer_ref,
                product_id = excluded.product_id, segment = excluded.segment, segment_since = excluded.segment_since,
                expires_at = excluded.expires_at, auto_renew = excluded.auto_renew,
                in_billing_retry = excluded.in_billing_retry, grace_period_expires_at = excluded.grace_period_expires_at,
                expiration_intent = excluded.expiration_intent, revocation_reason = excluded.revocation_reason,
                offer_type = excluded.offer_type, last_polled_at = excluded.last_polled_at,
                renewal_price = excluded.renewal_price, renewal_currency = excluded.renewal_currency
            """)
    }

    /// Win-back entries (pending or claimed) whose reason no longer holds become obsolete, with
    /// why appended to their reason. Returns how many.
    static func winbackObsolete(_ db: PostgresConnection, _ oc: ObsoleteColumns, runId: Int64?) throws -> Int {
        guard !oc.ids.isEmpty else { return 0 }
        return try db.execute("""
            UPDATE churnwatch.winback_queue AS w SET status = 'obsolete', obsoleted_run_id = \(runId),
                reason = w.reason || ' (obsolete: ' || u.why || ')', updated_at = now()
            FROM unnest(\(oc.ids)::text[], \(oc.campaigns)::text[], \(oc.episodes)::text[], \(oc.reasons)::text[])
                 AS u(id, campaign, episode, why)
            WHERE w.original_transaction_id = u.id AND w.campaign = u.campaign AND w.episode = u.episode
              AND w.status IN ('pending', 'claimed')
            """)
    }

    /// New win-back entries, at most one per subscription, campaign and episode, opened at
    /// `openedAt` (the run's or the sync's moment). Returns how many were created.
    static func winbackInsert(_ db: PostgresConnection, app: String, _ qc: WinbackColumns, runId: Int64?, openedAt: Date) throws -> Int {
        guard !qc.ids.isEmpty else { return 0 }
        return try db.execute("""
            INSERT INTO churnwatch.winback_queue (bundle_id, original_transaction_id, app_account_token, customer_ref, campaign,
                episode, product_id, reason, offer_ids, not_before, expires_at, run_id, opened_at)
            SELECT \(app), id, token, ref, campaign, episode, product_id, reason,
                   coalesce((SELECT array_agg(x) FROM jsonb_array_elements_text(offers) AS x), '{}'),
                   not_before, expires_at, \(runId), \(openedAt)
            FROM unnest(\(qc.ids)::text[], \(qc.tokens)::uuid[], \(qc.refs)::text[], \(qc.campaigns)::text[],
                        \(qc.episodes)::text[], \(qc.productIds)::text[], \(qc.reasons)::text[], \(qc.offerIds)::jsonb[],
                        \(qc.notBefores)::timestamptz[], \(qc.expiresAts)::timestamptz[])
                 AS u(id, token, ref, campaign, episode, product_id, reason, offers, not_before, expires_at)
            ON CONFLICT (original_transaction_id, campaign, episode) DO NOTHING
            """)
    }

    /// Payloads that failed verification, kept for diagnosis. Returns how many.
    static func quarantineInsert(_ db: PostgresConnection, app: String, _ qc: QuarantineColumns, runId: Int64?) throws -> Int {
        guard !qc.ids.isEmpty else { return 0 }
        return try db.execute("""
            INSERT INTO churnwatch.quarantine (bundle_id, original_transaction_id, run_id, endpoint, reason, payload)
            SELECT \(app), id, \(runId), endpoint, reason, payload
            FROM unnest(\(qc.ids)::text[], \(qc.endpoints)::text[],
                        \(qc.reasons)::text[], \(qc.payloads)::text[])
                 AS u(id, endpoint, reason, payload)
            """)
    }

    /// The batch's run items are finished: polled ones `done` with outcome `ok`, failed ones
    /// `failed` with their failure class and the reason's prose as outcome.
    static func runItemsFinish(_ db: PostgresConnection, _ b: PollBatch, runId: Int64) throws {
        let outcomeIds = b.polledItemIds + b.failedIds
        guard !outcomeIds.isEmpty else { return }
        let outcomes = Array(repeating: "ok", count: b.polledItemIds.count) + b.failedReasons
        let statuses = Array(repeating: "done", count: b.polledIds.count) + Array(repeating: "failed", count: b.failedIds.count)
        let classes: [String?] = Array(repeating: nil, count: b.polledItemIds.count) + b.failedClasses.map(\.rawValue)
        try db.execute("""
            UPDATE churnwatch.run_items AS i SET status = u.status, outcome = u.outcome, failure_class = u.failure_class,
                finished_at = now(), lease_until = NULL
            FROM unnest(\(outcomeIds)::text[], \(statuses)::text[], \(outcomes)::text[], \(classes)::text[])
                 AS u(id, status, outcome, failure_class)
            WHERE i.run_id = \(runId) AND i.original_transaction_id = u.id
            """)
    }
}
