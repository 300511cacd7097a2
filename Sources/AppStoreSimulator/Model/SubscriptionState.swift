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

    /// Applies one event; returns the true churn events it is (only when `truth`).
    mutating func apply(
        _ e: TimelineEvent, catalog: Catalog, transactions: inout [SimTransaction]?, truth: Bool
    ) -> [(TruthEventKind, [(key: String, value: TruthEvent.DetailValue)])] {
        var out: [(TruthEventKind, [(key: String, value: TruthEvent.DetailValue)])] = []
        version += 1
        at = e.time
        let t = e.time
        switch e.kind {
        case .purchase, .renewal, .recovery, .upgrade, .resubscribe:
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
            if truth {
                let txid: (key: String, value: TruthEvent.DetailValue) = ("transaction_index", .int(Int64(tx.index)))
                let pid: (key: String, value: TruthEvent.DetailValue) = ("product_id", .string(catalog.products[product].id))
                switch e.kind {
                case .renewal:
                    out.append((.renewed, [pid, txid]))
                    if product != previousProduct {
                        out.append((.planChanged, [
                            ("from_product_id", .string(catalog.products[previousProduct].id)),
                            ("to_product_id", .string(catalog.products[product].id)),
                        ]))
                    }
                case .recovery:
                    out.append((.billingRecovered, [pid, txid]))
                case .upgrade:
                    out.append((.planChanged, [
                        ("from_product_id", .string(catalog.products[previousProduct].id)),
                        ("to_product_id", .string(catalog.products[product].id)),
                    ]))
                case .resubscribe:
                    var d = [pid, txid]
                    if let ot = offer.offerType { d.append(("offer_type", .int(Int64(ot)))) }
                    out.append((.resubscribed, d))
                default:
                    break
                }
            }
        case .autoRenewOff:
            autoRenew = false
            if truth { out.append((.autoRenewDisabled, [])) }
        case .autoRenewOn:
            autoRenew = true
            pendingOffer = SimOffer(rawValue: e.b) ?? .none
            if truth {
                var d: [(key: String, value: TruthEvent.DetailValue)] = []
                if let ot = pendingOffer.offerType { d.append(("offer_type", .int(Int64(ot)))) }
                out.append((.autoRenewEnabled, d))
            }
        case .billingFailure:
            let graceEnd: Int64? = e.d > 0 ? t + Int64(e.d) * SimTime.day : nil
            phase = .billingRetry(since: t, graceEnd: graceEnd)
            if truth {
                if let graceEnd {
                    out.append((.gracePeriodStarted, [("grace_period_expires_at", .string(SimTime.format(graceEnd)))]))
                } else {
                    out.append((.billingRetryStarted, []))
                }
            }
        case .graceExpired:
            if truth { out.append((.gracePeriodExpired, [])) }
        case .expire:
            phase = .expired(intent: Int(e.a), at: t)
            priceIncrease = .none
            pendingOffer = .none
            if truth { out.append((.expired, [("expiration_intent", .int(Int64(e.a)))])) }
        case .refund, .familyRevoke:
            let rev: SimTransaction.Revocation =
                e.kind == .familyRevoke
                ? .init(date: t, reason: 0, type: "FAMILY_REVOKE", percentage: 100_000)
                : .init(
                    date: t, reason: Int32(e.a), type: e.b == 1 ? "REFUND_PRORATED" : "REFUND_FULL",
                    percentage: Int32(e.c) * 1000)
            latest.revocation = rev
            latest.modifiedAt = t
            transactions?[latest.index] = latest
            if truth {
                out.append((.refunded, [
                    ("revocation_reason", .int(Int64(rev.reason))), ("revocation_type", .string(rev.type)),
                    ("transaction_index", .int(Int64(latest.index))),
                ]))
            }
        case .refundReversed:
            latest.revocation = nil
            latest.modifiedAt = t
            transactions?[latest.index] = latest
            if truth { out.append((.refundReversed, [("transaction_index", .int(Int64(latest.index)))])) }
        case .planChangeScheduled:
            autoRenewProduct = Int(e.a)
            if truth {
                out.append((.planChangeScheduled, [
                    ("auto_renew_product_id", .string(catalog.products[Int(e.a)].id)),
                    ("product_id", .string(catalog.products[latest.product].id)),
                ]))
            }
        case .planChangeCancelled:
            autoRenewProduct = latest.product
            if truth { out.append((.planChangeCancelled, [])) }
        case .priceIncreaseNotified:
            priceIncrease = e.a == 1 ? .pending : .accepted
            if truth {
                out.append((e.a == 1 ? .priceIncreasePending : .priceIncreaseAccepted, [
                    ("product_id", .string(catalog.products[latest.product].id))
                ]))
            }
        case .priceIncreaseAccepted:
            priceIncrease = .accepted
            if truth {
                out.append((.priceIncreaseAccepted, [("product_id", .string(catalog.products[latest.product].id))]))
            }
        }
        let seg = segment(at: t)
        if seg != segment || version == 1 {
            segment = seg
            segmentSince = t
        }
        return out
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
