/// A subscription at a moment T: the fold of its timeline's events at or before T. Pure: the same
/// timeline and T always give the same state.
public struct SubscriptionState: Sendable, Hashable {
    /// The moment this state describes (ms since 1970).
    public private(set) var at: Int64
    /// False before the first purchase.
    public private(set) var exists = false
    /// The transaction in effect (the latest one).
    public private(set) var latest = SimTransaction(
        index: 0, purchaseDate: 0, expiresDate: 0, product: 0, offer: .none, priceTier: 0, isRenewal: false,
        revocation: nil, upgradedAt: nil, modifiedAt: 0)
    public private(set) var transactionCount = 0
    public private(set) var originalPurchaseDate: Int64 = 0
    /// What the customer chose; Apple reports 0 after expiry or a refund whatever this says.
    public private(set) var autoRenew = true
    public private(set) var autoRenewProduct = 0
    public private(set) var phase: SubscriptionPhase = .active
    public private(set) var priceIncrease: PriceIncreaseState = .none
    /// A promotional offer that applies at the next renewal.
    public private(set) var pendingOffer: SimOffer = .none
    /// Start of the current run of paid periods, ignoring gaps of 60 days or less.
    public private(set) var recentStart: Int64 = 0
    public private(set) var segment: Segment = .active
    /// When ``segment`` last changed.
    public private(set) var segmentSince: Int64 = 0
    /// Number of events applied: a payload version (the state changes only with it).
    public private(set) var version = 0

    init(at: Int64) { self.at = at }

    /// The state of a timeline at `t`, and optionally every transaction as of `t`.
    static func fold(_ events: ArraySlice<TimelineEvent>, at t: Int64, catalog: Catalog) -> SubscriptionState {
        var none: [SimTransaction]? = nil
        return fold(events, at: t, catalog: catalog, transactions: &none)
    }

    /// The state at `t`; `transactions`, when not nil, receives every transaction as of `t`.
    static func fold(
        _ events: ArraySlice<TimelineEvent>, at t: Int64, catalog: Catalog, transactions: inout [SimTransaction]?
    ) -> SubscriptionState {
        var s = SubscriptionState(at: t)
        for e in events {
            if e.time > t { break }
            _ = s.apply(e, catalog: catalog, transactions: &transactions, truth: false)
        }
        s.at = t
        return s
    }

    /// Apple's subscription `status` at ``at``: 1 active, 2 expired, 3 billing retry,
    /// 4 grace period, 5 revoked.
    public var status: Int32 {
        if latest.revocation != nil { return 5 }
        switch phase {
        case .active: return 1
        case .expired: return 2
        case .billingRetry(_, let graceEnd): return (graceEnd ?? .min) > at ? 4 : 3
        }
    }

    public var expirationIntent: Int? {
        if case .expired(let intent, _) = phase { return intent }
        return nil
    }

    public var isInBillingRetry: Bool {
        if case .billingRetry = phase { return true }
        return false
    }

    public var gracePeriodExpiresDate: Int64? {
        if case .billingRetry(_, let graceEnd) = phase { return graceEnd }
        return nil
    }

    /// `autoRenewStatus` as Apple reports it.
    public var reportedAutoRenew: Bool {
        if latest.revocation != nil { return false }
        if case .expired = phase { return false }
        return autoRenew
    }

    /// The segment of docs/contracts.md at `t` (first match wins).
    func segment(at t: Int64) -> Segment {
        if latest.revocation != nil { return .refunded }
        switch phase {
        case .expired(let intent, _):
            switch intent {
            case 1: return .churnedVoluntary
            case 2: return .churnedBilling
            case 3: return .churnedPriceIncrease
            case 4: return .churnedProductUnavailable
            default: return .churnedOther
            }
        case .billingRetry(_, let graceEnd):
            return (graceEnd ?? .min) > t ? .gracePeriod : .billingRetry
        case .active:
            if !autoRenew { return .willNotRenew }
            if priceIncrease == .pending { return .priceIncreasePending }
            if autoRenewProduct != latest.product { return .planChangePending }
            return .active
        }
    }

    /// A detail of a true churn event.
    typealias TruthDetail = (key: String, value: TruthEvent.DetailValue)
    /// A true churn event an applied event is: its kind and details.
    typealias TruthItem = (TruthEventKind, [TruthDetail])

    /// Applies one event; returns the true churn events it is (only when `truth`).
    mutating func apply(
        _ e: TimelineEvent, catalog: Catalog, transactions: inout [SimTransaction]?, truth: Bool
    ) -> [TruthItem] {
        // A refund request and its decline change nothing (no version, no segment).
        guard !e.isRefundRequest else { return truth ? refundRequestTruth(e) : [] }
        version += 1
        at = e.time
        let out: [TruthItem]
        switch e.kind {
        case .purchase, .renewal, .recovery, .upgrade, .resubscribe:
            out = applyTransaction(e, catalog: catalog, transactions: &transactions, truth: truth)
        case .billingFailure, .graceExpired, .expire:
            out = applyBilling(e, truth: truth)
        case .refund, .familyRevoke, .refundReversed:
            out = applyRevocation(e, transactions: &transactions, truth: truth)
        case .autoRenewOff, .autoRenewOn, .planChangeScheduled, .planChangeCancelled, .priceIncreaseNotified,
             .priceIncreaseAccepted:
            out = applyRenewalChoice(e, catalog: catalog, truth: truth)
        case .consumptionRequest, .refundDeclined:
            out = []  // returned above
        }
        let seg = segment(at: e.time)
        if seg != segment || version == 1 {
            segment = seg
            segmentSince = e.time
        }
        return out
    }

    /// A new transaction: a purchase, renewal, recovery, upgrade or resubscription.
    private mutating func applyTransaction(
        _ e: TimelineEvent, catalog: Catalog, transactions: inout [SimTransaction]?, truth: Bool
    ) -> [TruthItem] {
        let t = e.time
        let previousProduct = latest.product
        let wasExpiredAt: Int64? = { if case .expired(_, let at) = phase { return at } else { return nil } }()
        if e.kind == .upgrade {
            latest.upgradedAt = t
            latest.modifiedAt = t
            transactions?[latest.index] = latest
        }
        let product = Int(e.a)
        let offer = SimOffer(rawValue: e.b) ?? .none
        let tx = SimTransaction(
            index: transactionCount, purchaseDate: t,
            expiresDate: SimSchedule.expires(purchase: t, unit: catalog.products[product].unit, offer: offer),
            product: product, offer: offer, priceTier: Int(e.c),
            isRenewal: e.kind == .renewal || e.kind == .recovery,
            revocation: nil, upgradedAt: nil, modifiedAt: t)
        transactions?.append(tx)
        transactionCount += 1
        latest = tx
        if e.kind == .purchase {
            exists = true
            originalPurchaseDate = t
            recentStart = t
        }
        if e.kind == .resubscribe, let wasExpiredAt, t - wasExpiredAt > 60 * SimTime.day {
            recentStart = t
        }
        phase = .active
        autoRenew = true
        autoRenewProduct = product
        priceIncrease = .none
        pendingOffer = .none
        guard truth else { return [] }
        return Self.transactionTruth(e.kind, tx, from: previousProduct, catalog: catalog)
    }

    /// The true churn events a new transaction is.
    private static func transactionTruth(
        _ kind: TimelineEvent.Kind, _ tx: SimTransaction, from previousProduct: Int, catalog: Catalog
    ) -> [TruthItem] {
        let txid: TruthDetail = ("transaction_index", .int(Int64(tx.index)))
        let pid: TruthDetail = ("product_id", .string(catalog.products[tx.product].id))
        let planChanged: TruthItem = (.planChanged, [
            ("from_product_id", .string(catalog.products[previousProduct].id)),
            ("to_product_id", .string(catalog.products[tx.product].id)),
        ])
        switch kind {
        case .renewal:
            return tx.product != previousProduct ? [(.renewed, [pid, txid]), planChanged] : [(.renewed, [pid, txid])]
        case .recovery:
            return [(.billingRecovered, [pid, txid])]
        case .upgrade:
            return [planChanged]
        case .resubscribe:
            var d = [pid, txid]
            if let ot = tx.offer.offerType { d.append(("offer_type", .int(Int64(ot)))) }
            return [(.resubscribed, d)]
        default:
            return []
        }
    }

    /// A failed charge (billing retry, with or without grace), the end of a grace period, or expiry.
    private mutating func applyBilling(_ e: TimelineEvent, truth: Bool) -> [TruthItem] {
        let t = e.time
        switch e.kind {
        case .billingFailure:
            let graceEnd: Int64? = e.d > 0 ? t + Int64(e.d) * SimTime.day : nil
            phase = .billingRetry(since: t, graceEnd: graceEnd)
            guard truth else { return [] }
            if let graceEnd { return [(.gracePeriodStarted, [("grace_period_expires_at", .string(SimTime.format(graceEnd)))])] }
            return [(.billingRetryStarted, [])]
        case .graceExpired:
            return truth ? [(.gracePeriodExpired, [])] : []
        default:  // .expire
            phase = .expired(intent: Int(e.a), at: t)
            priceIncrease = .none
            pendingOffer = .none
            return truth ? [(.expired, [("expiration_intent", .int(Int64(e.a)))])] : []
        }
    }

    /// A refund or family revoke of the latest transaction, or a refund reversed.
    private mutating func applyRevocation(
        _ e: TimelineEvent, transactions: inout [SimTransaction]?, truth: Bool
    ) -> [TruthItem] {
        let t = e.time
        guard e.kind != .refundReversed else {
            latest.revocation = nil
            latest.modifiedAt = t
            transactions?[latest.index] = latest
            return truth ? [(.refundReversed, [("transaction_index", .int(Int64(latest.index)))])] : []
        }
        let rev: SimTransaction.Revocation =
            e.kind == .familyRevoke
            ? .init(date: t, reason: 0, type: "FAMILY_REVOKE", percentage: 100_000)
            : .init(
                date: t, reason: Int32(e.a), type: e.b == 1 ? "REFUND_PRORATED" : "REFUND_FULL",
                percentage: Int32(e.c) * 1000)
        latest.revocation = rev
        latest.modifiedAt = t
        transactions?[latest.index] = latest
        guard truth else { return [] }
        return [(.refunded, [
            ("revocation_reason", .int(Int64(rev.reason))), ("revocation_type", .string(rev.type)),
            ("transaction_index", .int(Int64(latest.index))),
        ])]
    }

    /// The true event of a refund request (`refund_requested` [reason, transaction, answer
    /// deadline]) or its decline (`refund_declined` [transaction]), about the latest transaction.
    private func refundRequestTruth(_ e: TimelineEvent) -> [TruthItem] {
        let txid: TruthDetail = ("transaction_index", .int(Int64(latest.index)))
        guard e.kind == .consumptionRequest else { return [(.refundDeclined, [txid])] }
        let reason = ConsumptionRequestReason(rawValue: e.a)?.apple ?? "OTHER"
        let deadline = SimTime.format(e.time + SimRefundRequest.answerWindow)
        return [(.refundRequested, [("reason", .string(reason)), txid, ("deadline", .string(deadline))])]
    }

    /// A choice about the next renewal: auto-renew, a plan change, a price increase.
    private mutating func applyRenewalChoice(_ e: TimelineEvent, catalog: Catalog, truth: Bool) -> [TruthItem] {
        func current() -> TruthDetail { ("product_id", .string(catalog.products[latest.product].id)) }
        switch e.kind {
        case .autoRenewOff:
            autoRenew = false
            return truth ? [(.autoRenewDisabled, [])] : []
        case .autoRenewOn:
            autoRenew = true
            pendingOffer = SimOffer(rawValue: e.b) ?? .none
            var d: [TruthDetail] = []
            if let ot = pendingOffer.offerType { d.append(("offer_type", .int(Int64(ot)))) }
            return truth ? [(.autoRenewEnabled, d)] : []
        case .planChangeScheduled:
            autoRenewProduct = Int(e.a)
            return truth ? [(.planChangeScheduled, [("auto_renew_product_id", .string(catalog.products[Int(e.a)].id)), current()])] : []
        case .planChangeCancelled:
            autoRenewProduct = latest.product
            return truth ? [(.planChangeCancelled, [])] : []
        case .priceIncreaseNotified:
            priceIncrease = e.a == 1 ? .pending : .accepted
            return truth ? [(e.a == 1 ? .priceIncreasePending : .priceIncreaseAccepted, [current()])] : []
        default:  // .priceIncreaseAccepted
            priceIncrease = .accepted
            return truth ? [(.priceIncreaseAccepted, [current()])] : []
        }
    }

    /// Every true churn event of a timeline, in time order.
    static func truthEvents(_ events: ArraySlice<TimelineEvent>, subscriber: Int, catalog: Catalog) -> [TruthEvent] {
        var s = SubscriptionState(at: .min)
        var none: [SimTransaction]? = nil
        var out: [TruthEvent] = []
        for (k, e) in events.enumerated() {
            for (kind, details) in s.apply(e, catalog: catalog, transactions: &none, truth: true) {
                out.append(TruthEvent(subscriber: subscriber, time: e.time, kind: kind, details: details, eventIndex: k))
            }
        }
        return out
    }
}
