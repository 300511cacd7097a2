import ChurnModel
import Foundation
import Postgres

/// What a batch commit wrote.
public struct BatchCounts: Sendable, Equatable {
    public var polled = 0
    public var failed = 0
    public var events = 0
    public var enqueued = 0
    public var obsoleted = 0
    public var quarantined = 0
}

extension ChurnStore {
    /// Commits a batch in one transaction: snapshots, new transactions, events, segments,
    /// win-back entries (created at most once per subscription, campaign and episode) and
    /// obsolete ones, quarantined payloads, and the items' outcomes. Idempotent: a batch
    /// written twice (a lease that expired under a slow worker) adds nothing the second time.
    @discardableResult
    public func pollResultsCommit(runId: Int64, worker: String, asOf: Date, detectedAt: Date, _ writes: [PollWrite]) async throws -> BatchCounts {
        guard !writes.isEmpty else { return BatchCounts() }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]

        // Everything is turned into column arrays before the transaction starts.
        var fresh: [(PollWrite.Polled, ClaimedItem)] = []
        var polledIds: [String] = [], polledEnvironments: [String] = [], polledItemIds: [String] = []
        var failedIds: [String] = [], failedReasons: [String] = []
        var renames: (from: [String], to: [String]) = ([], [])
        for w in writes {
            switch w.outcome {
            case .polled(let p):
                let item = w.subscriptionItem
                if item.originalTransactionId != w.item.originalTransactionId {
                    renames.from.append(w.item.originalTransactionId)
                    renames.to.append(item.originalTransactionId)
                }
                polledIds.append(item.originalTransactionId)
                polledItemIds.append(w.item.originalTransactionId)
                polledEnvironments.append(p.environment)
                if !p.stale { fresh.append((p, item)) }
            case .failed(let reason):
                failedIds.append(w.item.originalTransactionId)
                failedReasons.append(reason)
            }
        }
        var s = SubscriptionColumns()
        for (p, item) in fresh { try s.append(p, item.originalTransactionId, encoder) }
        var t = TransactionColumns()
        var e = EventColumns()
        var g = SegmentColumns()
        var q = WinbackColumns()
        var o = ObsoleteColumns()
        for (p, item) in fresh {
            for tx in p.transactions { t.append(tx) }
            for event in p.events { try e.append(item.originalTransactionId, event, encoder) }
            g.append(p, item)
            for entry in p.winback.entries { q.append(entry, item) }
            for gone in p.winback.obsolete { o.append(item.originalTransactionId, gone) }
        }
        var quarantine: (ids: [String], endpoints: [String], reasons: [String], payloads: [String]) = ([], [], [], [])
        for w in writes {
            for qp in w.quarantine {
                quarantine.ids.append(w.item.originalTransactionId)
                quarantine.endpoints.append(qp.endpoint)
                quarantine.reasons.append(qp.reason)
                quarantine.payloads.append(qp.payload)
            }
        }
        var r = RetentionColumns()
        for (p, item) in fresh { r.append(p, item.originalTransactionId) }
        let (sc, tc, ec, gc, qc, oc, rc) = (s, t, e, g, q, o, r)
        let quarantineColumns = quarantine
        let (polledIdsC, polledEnvC, failedIdsC, failedReasonsC) = (polledIds, polledEnvironments, failedIds, failedReasons)
        let (itemIdsC, renamesC) = (polledItemIds, renames)

        return try await pool.withTransaction { db in
            var counts = BatchCounts()
            try Self.adoptLearnedIds(db, placeholders: renamesC.from, learned: renamesC.to)
            if !polledIdsC.isEmpty {
                // One row version per polled subscription: the verified state and the polling
                // bookkeeping in one UPDATE (rows whose stored state is newer, or that were
                // answered stale, get the bookkeeping only).
                counts.polled = try db.query("""
                    WITH fresh AS (
                        UPDATE churnwatch.subscriptions AS s SET
                            product_id = u.product_id, subscription_group_id = u.group_id, state = u.state,
                            apple_status = u.apple_status, period_start = u.period_start, expires_at = u.expires_at,
                            auto_renew = u.auto_renew, auto_renew_product_id = u.auto_renew_product_id,
                            in_billing_retry = u.in_billing_retry, grace_period_expires_at = u.grace,
                            expiration_intent = u.intent, price_increase_status = u.price_increase,
                            revocation_date = u.revocation_date, revocation_reason = u.revocation_reason,
                            offer_type = u.offer_type, latest_transaction_id = u.latest_tx, signed_date = u.signed_date,
                            snapshot = u.snapshot, history_revision = coalesce(u.history_revision, s.history_revision),
                            receipt_latest = coalesce(u.receipt_latest, s.receipt_latest), updated_at = now(),
                            environment = u.environment, last_polled_at = \(detectedAt), last_success_at = \(detectedAt),
                            last_outcome = 'ok', last_error = NULL, consecutive_failures = 0
                        FROM unnest(\(sc.ids)::text[], \(sc.productIds)::text[], \(sc.groupIds)::text[], \(sc.states)::text[],
                                    \(sc.appleStatuses)::int[], \(sc.periodStarts)::timestamptz[], \(sc.expiresAts)::timestamptz[],
                                    \(sc.autoRenews)::bool[], \(sc.autoRenewProducts)::text[], \(sc.inRetry)::bool[],
                                    \(sc.graces)::timestamptz[], \(sc.intents)::int[], \(sc.priceIncreases)::int[],
                                    \(sc.revocationDates)::timestamptz[], \(sc.revocationReasons)::int[], \(sc.offerTypes)::int[],
                                    \(sc.latestTransactions)::text[], \(sc.signedDates)::timestamptz[], \(sc.snapshots)::jsonb[],
                                    \(sc.historyRevisions)::text[], \(sc.receiptLatests)::text[], \(sc.environments)::text[])
                             AS u(id, product_id, group_id, state, apple_status, period_start, expires_at, auto_renew,
                                  auto_renew_product_id, in_billing_retry, grace, intent, price_increase, revocation_date,
                                  revocation_reason, offer_type, latest_tx, signed_date, snapshot, history_revision, receipt_latest,
                                  environment)
                        WHERE s.original_transaction_id = u.id
                          AND (s.signed_date IS NULL OR u.signed_date IS NULL OR s.signed_date <= u.signed_date)
                        RETURNING s.original_transaction_id
                    ), rest AS (
                        UPDATE churnwatch.subscriptions AS s SET
                            environment = u.environment, last_polled_at = \(detectedAt), last_success_at = \(detectedAt),
                            last_outcome = 'ok', last_error = NULL, consecutive_failures = 0
                        FROM unnest(\(polledIdsC)::text[], \(polledEnvC)::text[]) AS u(id, environment)
                        WHERE s.original_transaction_id = u.id
                          AND NOT EXISTS (SELECT 1 FROM fresh f WHERE f.original_transaction_id = u.id)
                        RETURNING 1
                    )
                    SELECT (SELECT count(*) FROM fresh) + (SELECT count(*) FROM rest) AS n
                    """)[0].decode(Int.self, "n")
            }
            if !failedIdsC.isEmpty {
                counts.failed = try db.execute("""
                    UPDATE churnwatch.subscriptions AS s SET
                        last_polled_at = \(detectedAt), last_outcome = 'failed', last_error = u.reason,
                        consecutive_failures = s.consecutive_failures + 1
                    FROM unnest(\(failedIdsC)::text[], \(failedReasonsC)::text[]) AS u(id, reason)
                    WHERE s.original_transaction_id = u.id
                    """)
            }
            if !tc.ids.isEmpty {
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
            }
            if !ec.ids.isEmpty {
                counts.events = try db.execute("""
                    INSERT INTO churnwatch.churn_events (original_transaction_id, event, occurred_at, detected_at, run_id, details)
                    SELECT id, event, occurred_at, \(detectedAt), \(runId), details
                    FROM unnest(\(ec.ids)::text[], \(ec.types)::text[], \(ec.occurredAts)::timestamptz[], \(ec.details)::jsonb[])
                         AS u(id, event, occurred_at, details)
                    ON CONFLICT (original_transaction_id, event, occurred_at) DO NOTHING
                    """)
            }
            if !gc.ids.isEmpty {
                try db.execute("""
                    INSERT INTO churnwatch.subscription_segments (original_transaction_id, app_account_token, customer_ref,
                        product_id, segment, segment_since, expires_at, auto_renew, in_billing_retry, grace_period_expires_at,
                        expiration_intent, revocation_reason, offer_type, last_polled_at)
                    SELECT id, token, ref, product_id, segment, since, expires_at, auto_renew, in_retry, grace, intent,
                           revocation_reason, offer_type, \(detectedAt)
                    FROM unnest(\(gc.ids)::text[], \(gc.tokens)::uuid[], \(gc.refs)::text[], \(gc.productIds)::text[],
                                \(gc.segments)::text[], \(gc.sinces)::timestamptz[], \(gc.expiresAts)::timestamptz[],
                                \(gc.autoRenews)::bool[], \(gc.inRetry)::bool[], \(gc.graces)::timestamptz[], \(gc.intents)::int[],
                                \(gc.revocationReasons)::int[], \(gc.offerTypes)::int[])
                         AS u(id, token, ref, product_id, segment, since, expires_at, auto_renew, in_retry, grace, intent,
                              revocation_reason, offer_type)
                    ON CONFLICT (original_transaction_id) DO UPDATE SET
                        app_account_token = excluded.app_account_token, customer_ref = excluded.customer_ref,
                        product_id = excluded.product_id, segment = excluded.segment, segment_since = excluded.segment_since,
                        expires_at = excluded.expires_at, auto_renew = excluded.auto_renew,
                        in_billing_retry = excluded.in_billing_retry, grace_period_expires_at = excluded.grace_period_expires_at,
                        expiration_intent = excluded.expiration_intent, revocation_reason = excluded.revocation_reason,
                        offer_type = excluded.offer_type, last_polled_at = excluded.last_polled_at
                    """)
            }
            try Self.retentionRecord(db, rc, asOf: asOf)
            if !oc.ids.isEmpty {
                counts.obsoleted = try db.execute("""
                    UPDATE churnwatch.winback_queue AS w SET status = 'obsolete', obsoleted_run_id = \(runId),
                        reason = w.reason || ' (obsolete: ' || u.why || ')', updated_at = now()
                    FROM unnest(\(oc.ids)::text[], \(oc.campaigns)::text[], \(oc.episodes)::text[], \(oc.reasons)::text[])
                         AS u(id, campaign, episode, why)
                    WHERE w.original_transaction_id = u.id AND w.campaign = u.campaign AND w.episode = u.episode
                      AND w.status IN ('pending', 'claimed')
                    """)
            }
            if !qc.ids.isEmpty {
                counts.enqueued = try db.execute("""
                    INSERT INTO churnwatch.winback_queue (original_transaction_id, app_account_token, customer_ref, campaign,
                        episode, product_id, reason, offer_ids, not_before, expires_at, run_id)
                    SELECT id, token, ref, campaign, episode, product_id, reason,
                           coalesce((SELECT array_agg(x) FROM jsonb_array_elements_text(offers) AS x), '{}'),
                           not_before, expires_at, \(runId)
                    FROM unnest(\(qc.ids)::text[], \(qc.tokens)::uuid[], \(qc.refs)::text[], \(qc.campaigns)::text[],
                                \(qc.episodes)::text[], \(qc.productIds)::text[], \(qc.reasons)::text[], \(qc.offerIds)::jsonb[],
                                \(qc.notBefores)::timestamptz[], \(qc.expiresAts)::timestamptz[])
                         AS u(id, token, ref, campaign, episode, product_id, reason, offers, not_before, expires_at)
                    ON CONFLICT (original_transaction_id, campaign, episode) DO NOTHING
                    """)
                try Self.winbackAssignOffers(db, qc)
            }
            if !quarantineColumns.ids.isEmpty {
                counts.quarantined = try db.execute("""
                    INSERT INTO churnwatch.quarantine (original_transaction_id, run_id, endpoint, reason, payload)
                    SELECT id, \(runId), endpoint, reason, payload
                    FROM unnest(\(quarantineColumns.ids)::text[], \(quarantineColumns.endpoints)::text[],
                                \(quarantineColumns.reasons)::text[], \(quarantineColumns.payloads)::text[])
                         AS u(id, endpoint, reason, payload)
                    """)
            }
            let outcomeIds = itemIdsC + failedIdsC
            let outcomes = Array(repeating: "ok", count: itemIdsC.count) + failedReasonsC
            let statuses = Array(repeating: "done", count: polledIdsC.count) + Array(repeating: "failed", count: failedIdsC.count)
            try db.execute("""
                UPDATE churnwatch.run_items AS i SET status = u.status, outcome = u.outcome, finished_at = now(),
                    lease_until = NULL
                FROM unnest(\(outcomeIds)::text[], \(statuses)::text[], \(outcomes)::text[]) AS u(id, status, outcome)
                WHERE i.run_id = \(runId) AND i.original_transaction_id = u.id
                """)
            return counts
        }
    }
}

// MARK: - Column builders (struct of arrays for unnest)

struct SubscriptionColumns {
    var ids: [String] = [], productIds: [String] = [], groupIds: [String?] = [], states: [String?] = []
    var appleStatuses: [Int32?] = [], periodStarts: [Date?] = [], expiresAts: [Date?] = [], autoRenews: [Bool?] = []
    var autoRenewProducts: [String?] = [], inRetry: [Bool?] = [], graces: [Date?] = [], intents: [Int32?] = []
    var priceIncreases: [Int32?] = [], revocationDates: [Date?] = [], revocationReasons: [Int32?] = [], offerTypes: [Int32?] = []
    var latestTransactions: [String] = [], signedDates: [Date?] = [], snapshots: [PostgresJSON] = []
    var historyRevisions: [String?] = [], receiptLatests: [String?] = [], environments: [String] = []

    mutating func append(_ p: PollWrite.Polled, _ id: String, _ encoder: JSONEncoder) throws {
        let s = p.snapshot
        ids.append(id)
        productIds.append(s.productId)
        groupIds.append(s.subscriptionGroupIdentifier)
        states.append(s.state == .unknown ? nil : s.state.rawValue)
        appleStatuses.append(s.rawStatus.map { Int32(clamping: $0) })
        periodStarts.append(s.periodStart)
        expiresAts.append(s.periodEnd)
        autoRenews.append(s.autoRenew)
        autoRenewProducts.append(s.autoRenewProductId)
        inRetry.append(s.isInBillingRetryPeriod)
        graces.append(s.gracePeriodExpiresDate)
        intents.append(s.rawExpirationIntent.map { Int32(clamping: $0) })
        priceIncreases.append(s.rawPriceIncreaseStatus.map { Int32(clamping: $0) })
        revocationDates.append(s.revocationDate)
        revocationReasons.append(s.rawRevocationReason.map { Int32(clamping: $0) })
        offerTypes.append(s.rawOfferType.map { Int32(clamping: $0) })
        latestTransactions.append(s.transactionId)
        signedDates.append(s.signedDate)
        snapshots.append(PostgresJSON(data: try encoder.encode(s)))
        historyRevisions.append(p.historyRevision)
        receiptLatests.append(p.receiptLatest)
        environments.append(p.environment)
    }
}

struct TransactionColumns {
    var ids: [String] = [], originalIds: [String] = [], productIds: [String] = [], groupIds: [String?] = []
    var webOrderIds: [String?] = [], purchaseDates: [Date?] = [], originalPurchaseDates: [Date?] = [], expiresDates: [Date?] = []
    var reasons: [String?] = [], offerTypes: [Int32?] = [], offerIds: [String?] = [], ownerships: [String?] = []
    var upgraded: [Bool] = [], revocationDates: [Date?] = [], revocationReasons: [Int32?] = [], prices: [Int64?] = []
    var currencies: [String?] = [], environments: [String?] = [], signedDates: [Date?] = [], payloads: [StoredJSON] = []

    mutating func append(_ r: TransactionRecord) {
        let f = r.facts
        ids.append(f.transactionId)
        originalIds.append(f.originalTransactionId)
        productIds.append(f.productId)
        groupIds.append(f.subscriptionGroupIdentifier)
        webOrderIds.append(f.webOrderLineItemId)
        purchaseDates.append(f.purchaseDate)
        originalPurchaseDates.append(f.originalPurchaseDate)
        expiresDates.append(f.expiresDate)
        reasons.append(f.transactionReason)
        offerTypes.append(f.offerType.map { Int32(clamping: $0) })
        offerIds.append(f.offerIdentifier)
        ownerships.append(f.inAppOwnershipType)
        upgraded.append(f.isUpgraded ?? false)
        revocationDates.append(f.revocationDate)
        revocationReasons.append(f.revocationReason.map { Int32(clamping: $0) })
        prices.append(f.price)
        currencies.append(f.currency)
        environments.append(f.environment)
        signedDates.append(f.signedDate)
        payloads.append(r.payload)
    }
}

struct EventColumns {
    var ids: [String] = [], types: [String] = [], occurredAts: [Date] = [], details: [PostgresJSON] = []

    mutating func append(_ id: String, _ event: ChurnEvent, _ encoder: JSONEncoder) throws {
        ids.append(id)
        types.append(event.type.rawValue)
        occurredAts.append(event.occurredAt)
        details.append(PostgresJSON(data: try encoder.encode(event.details)))
    }
}

struct SegmentColumns {
    var ids: [String] = [], tokens: [UUID?] = [], refs: [String?] = [], productIds: [String?] = [], segments: [String] = []
    var sinces: [Date] = [], expiresAts: [Date?] = [], autoRenews: [Bool?] = [], inRetry: [Bool?] = [], graces: [Date?] = []
    var intents: [Int32?] = [], revocationReasons: [Int32?] = [], offerTypes: [Int32?] = []

    mutating func append(_ p: PollWrite.Polled, _ item: ClaimedItem) {
        let s = p.snapshot
        ids.append(item.originalTransactionId)
        tokens.append(item.appAccountToken ?? s.appAccountToken.flatMap(UUID.init(uuidString:)))
        refs.append(item.customerRef)
        productIds.append(s.productId)
        segments.append(p.segment.segment.rawValue)
        sinces.append(p.segment.since)
        expiresAts.append(s.periodEnd)
        autoRenews.append(s.autoRenew)
        inRetry.append(s.isInBillingRetryPeriod)
        graces.append(s.gracePeriodExpiresDate)
        intents.append(s.rawExpirationIntent.map { Int32(clamping: $0) })
        revocationReasons.append(s.rawRevocationReason.map { Int32(clamping: $0) })
        offerTypes.append(s.rawOfferType.map { Int32(clamping: $0) })
    }
}

struct WinbackColumns {
    var ids: [String] = [], tokens: [UUID?] = [], refs: [String?] = [], campaigns: [String] = [], episodes: [String] = []
    var productIds: [String] = [], reasons: [String] = [], offerIds: [PostgresJSON] = [], notBefores: [Date] = []
    var expiresAts: [Date?] = []

    mutating func append(_ e: WinbackEntry, _ item: ClaimedItem) {
        ids.append(item.originalTransactionId)
        tokens.append(item.appAccountToken ?? item.snapshot?.appAccountToken.flatMap(UUID.init(uuidString:)))
        refs.append(item.customerRef)
        campaigns.append(e.campaign.rawValue)
        episodes.append(e.episode)
        productIds.append(e.productId)
        reasons.append(e.reason)
        offerIds.append((try? PostgresJSON(encoding: e.offerIds)) ?? PostgresJSON(text: "[]"))
        notBefores.append(e.notBefore)
        expiresAts.append(e.expiresAt)
    }
}

struct ObsoleteColumns {
    var ids: [String] = [], campaigns: [String] = [], episodes: [String] = [], reasons: [String] = []

    mutating func append(_ id: String, _ o: ObsoleteEpisode) {
        ids.append(id)
        campaigns.append(o.campaign.rawValue)
        episodes.append(o.episode)
        reasons.append(o.reason)
    }
}
