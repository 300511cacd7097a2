import ChurnModel
import Foundation
import Postgres

// MARK: - Column builders (struct of arrays for unnest)

struct SubscriptionColumns {
    var ids: [String] = [], productIds: [String] = [], groupIds: [String?] = [], states: [String?] = []
    var appleStatuses: [Int32?] = [], periodStarts: [Date?] = [], expiresAts: [Date?] = [], autoRenews: [Bool?] = []
    var autoRenewProducts: [String?] = [], inRetry: [Bool?] = [], graces: [Date?] = [], intents: [Int32?] = []
    var priceIncreases: [Int32?] = [], revocationDates: [Date?] = [], revocationReasons: [Int32?] = [], offerTypes: [Int32?] = []
    var latestTransactions: [String] = [], signedDates: [Date?] = [], snapshots: [PostgresJSON] = []
    var historyRevisions: [String?] = [], receiptLatests: [String?] = [], environments: [String] = []
    var observedAsOfs: [Date?] = [], named: [String?] = []
    /// The state version each write was decided from (``ClaimedItem/stateVersion``).
    var baseVersions: [Int64] = []

    mutating func append(_ p: PollWrite.Polled, _ item: ClaimedItem, _ encoder: JSONEncoder) throws {
        let s = p.snapshot
        ids.append(item.originalTransactionId)
        baseVersions.append(item.stateVersion)
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
        environments.append(p.environment.rawValue)
        observedAsOfs.append(p.observedAsOf)
        named.append(p.named?.rawValue)
    }
}

struct TransactionColumns {
    var ids: [String] = [], originalIds: [String] = [], productIds: [String] = [], groupIds: [String?] = []
    var webOrderIds: [String?] = [], purchaseDates: [Date?] = [], originalPurchaseDates: [Date?] = [], expiresDates: [Date?] = []
    var reasons: [String?] = [], offerTypes: [Int32?] = [], offerIds: [String?] = [], ownerships: [String?] = []
    var upgraded: [Bool] = [], revocationDates: [Date?] = [], revocationReasons: [Int32?] = [], prices: [Int64?] = []
    var currencies: [String?] = [], environments: [String?] = [], signedDates: [Date?] = [], payloads: [StoredJSON] = []
    /// The subscriptions of the free trials among them (an introductory offer at price 0): the
    /// fact a refund answer needs after prune has removed the trial's row.
    var trialOriginalIds: [String] = []

    mutating func append(_ r: TransactionRecord) {
        let f = r.facts
        if f.offerType == 1, f.price == 0 { trialOriginalIds.append(f.originalTransactionId) }
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

    mutating func append(_ id: String, _ event: ChurnEvent) {
        ids.append(id)
        types.append(event.type.rawValue)
        occurredAts.append(event.occurredAt)
        details.append(PostgresJSON(object: event.details))
    }
}

struct SegmentColumns {
    var ids: [String] = [], tokens: [UUID?] = [], refs: [String?] = [], productIds: [String?] = [], segments: [String] = []
    var sinces: [Date] = [], expiresAts: [Date?] = [], autoRenews: [Bool?] = [], inRetry: [Bool?] = [], graces: [Date?] = []
    var intents: [Int32?] = [], revocationReasons: [Int32?] = [], offerTypes: [Int32?] = []
    /// The next renewal's price (and its currency, only with a price).
    var renewalPrices: [Int64?] = [], renewalCurrencies: [String?] = []

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
        renewalPrices.append(s.renewalPrice)
        renewalCurrencies.append(s.renewalPrice == nil ? nil : s.renewalCurrency)
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

struct QuarantineColumns {
    var ids: [String?] = [], endpoints: [String] = [], reasons: [String] = [], payloads: [String] = []

    mutating func append(_ id: String?, _ q: QuarantinedPayload) {
        ids.append(id)
        endpoints.append(q.endpoint)
        reasons.append(q.reason)
        payloads.append(q.payload)
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
