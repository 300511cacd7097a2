import AppStoreModels
import Foundation

/// Turns the difference between the stored snapshot and a new one into churn events
/// (docs/contracts.md, "Events are changes"). Pure: no clock, no I/O.
///
/// Polls are roughly nightly, so several things may have happened between two snapshots; every
/// event the difference proves is emitted. Rules, in short (docs/churn-model.md has the table):
/// - No previous snapshot: baseline, no events. A current snapshot older than the previous one
///   (by `signedDate`) is stale: no events. An unknown status on either side: no events.
/// - A new transaction is a renewal (`renewed`), a resubscribe after churn (`resubscribed`),
///   the end of billing trouble (`billing_recovered`, which is not also reported as `renewed`),
///   or an immediate upgrade or crossgrade (`plan_changed`, not a churn). A product change at a
///   renewal adds `plan_changed`.
/// - `auto_renew_disabled` only while the subscription is still active: an expiry, a refund or
///   a billing failure is not a customer turning auto-renew off.
public enum ChangeDetector {
    /// A new period must start more than this after the previous period ended to count as a
    /// lapse in between (a resubscribe or a recovery, depending on `transactionReason`).
    public static let lapseTolerance: TimeInterval = 3600

    /// The events that lead from `previous` to `current`, detected at `asOf`.
    public static func events(
        previous: SubscriptionSnapshot?,
        current: SubscriptionSnapshot,
        asOf: Date
    ) -> DetectionResult {
        let unknown = current.unknownValues
        guard let previous, previous.originalTransactionId == current.originalTransactionId else {
            return DetectionResult(events: [], stale: false, isBaseline: true, unknownValues: unknown)
        }
        if isStale(current, comparedTo: previous) {
            return DetectionResult(events: [], stale: true, isBaseline: false, unknownValues: unknown)
        }
        guard previous.state != .unknown, current.state != .unknown else {
            return DetectionResult(events: [], stale: false, isBaseline: false, unknownValues: unknown)
        }
        var diff = Diff(p: previous, c: current, asOf: asOf)
        diff.detect()
        let events = diff.events.sorted { a, b in
            a.occurredAt != b.occurredAt ? a.occurredAt < b.occurredAt : a.type.rank < b.type.rank
        }
        return DetectionResult(events: events, stale: false, isBaseline: false, unknownValues: unknown)
    }

    /// True when both snapshots are signed and `current` was signed before `previous`.
    public static func isStale(_ current: SubscriptionSnapshot, comparedTo previous: SubscriptionSnapshot?) -> Bool {
        guard let old = previous?.signedDate, let new = current.signedDate else { return false }
        return new < old
    }

    /// True when `current`'s transaction is a later one than `previous`'s: a renewal, a
    /// resubscribe, a recovery or an upgrade.
    public static func hasNewTransaction(_ current: SubscriptionSnapshot, since previous: SubscriptionSnapshot) -> Bool {
        guard current.transactionId != previous.transactionId else { return false }
        if let new = current.webOrderLineItemId, let old = previous.webOrderLineItemId, new == old { return false }
        if let new = current.periodStart, let old = previous.periodStart { return new > old }
        if let new = current.periodEnd, let old = previous.periodEnd { return new > old }
        return true
    }
}

/// One comparison; collects events.
private struct Diff {
    let p: SubscriptionSnapshot
    let c: SubscriptionSnapshot
    let asOf: Date
    var events: [ChurnEvent] = []

    init(p: SubscriptionSnapshot, c: SubscriptionSnapshot, asOf: Date) {
        self.p = p
        self.c = c
        self.asOf = asOf
    }

    var newTransaction: Bool { ChangeDetector.hasNewTransaction(c, since: p) }
    var productChanged: Bool { c.productId != p.productId }

    /// The new period started clearly after the previous period ended.
    var startsAfterPreviousEnd: Bool {
        guard newTransaction, let start = c.periodStart, let end = p.periodEnd else { return false }
        return start > end.addingTimeInterval(ChangeDetector.lapseTolerance)
    }

    /// There was a gap without a paid period: the new period started after the previous one
    /// ended, sooner than a chain of missed renewals could explain (less than one period).
    var provenLapse: Bool {
        guard startsAfterPreviousEnd, let start = c.periodStart, let end = p.periodEnd, let newEnd = c.periodEnd else {
            return false
        }
        return start.timeIntervalSince(end) < newEnd.timeIntervalSince(start) - ChangeDetector.lapseTolerance
    }

    mutating func detect() {
        detectNewTransaction()
        detectRevocation()
        detectBillingTrouble()
        detectExpiry()
        detectAutoRenew()
        detectPlanChange()
        detectPriceIncrease()
    }

    // MARK: New period

    private mutating func detectNewTransaction() {
        guard newTransaction else {
            if p.state.isBillingTrouble && c.state == .active {
                // Apple reports active again without a new transaction (e.g. a renewal date extension).
                emit(.billingRecovered, at: nil, basis: "detected", transition())
            }
            return
        }
        var details = transition()
        details["old_transaction_id"] = p.transactionId
        details["new_transaction_id"] = c.transactionId
        details["old_period_end"] = text(p.periodEnd)
        details["new_period_start"] = text(c.periodStart)
        details["new_period_end"] = text(c.periodEnd)
        details["old_product_id"] = p.productId
        details["new_product_id"] = c.productId
        details["transaction_reason"] = c.rawTransactionReason
        details["offer_type"] = c.rawOfferType.map(String.init)
        details["offer_identifier"] = c.offerIdentifier
        details["offer_discount_type"] = c.rawOfferDiscountType
        details["price"] = c.price.map(String.init)
        details["currency"] = c.currency

        // A customer-initiated purchase after the period ended is a resubscribe; with another
        // product it could also be an upgrade after renewals we didn't see, unless the gap is
        // proven or the history shows no upgrade.
        let purchasedAfterEnd = c.transactionReason == .purchase && c.upgradedFromProductId == nil
            && (productChanged ? provenLapse : startsAfterPreviousEnd)
        if p.state.isChurned || purchasedAfterEnd {
            details["old_expiration_intent"] = p.rawExpirationIntent.map(String.init)
            emit(.resubscribed, at: c.periodStart, basis: "purchaseDate", details)
            return
        }
        let recovery = p.state.isBillingTrouble || (c.transactionReason == .renewal && provenLapse)
        let immediateChange = !recovery && productChanged
            && (c.upgradedFromProductId != nil || c.transactionReason == .purchase)
        if immediateChange {
            details["kind"] = "immediate"
            emit(.planChanged, at: c.periodStart, basis: "purchaseDate", details)
            return
        }
        emit(recovery ? .billingRecovered : .renewed, at: c.periodStart, basis: "purchaseDate", details)
        if productChanged {
            details["kind"] = "at_renewal"
            emit(.planChanged, at: c.periodStart, basis: "purchaseDate", details)
        }
    }

    // MARK: Refunds

    private func isRevoked(_ s: SubscriptionSnapshot) -> Bool { s.state == .revoked || s.revocationDate != nil }

    private mutating func detectRevocation() {
        let sameTransaction = c.transactionId == p.transactionId
        if isRevoked(c) && !(isRevoked(p) && sameTransaction) {
            var details = transition()
            details["transaction_id"] = c.transactionId
            details["revocation_date"] = text(c.revocationDate)
            details["revocation_reason"] = c.rawRevocationReason.map(String.init)
            details["revocation_type"] = c.rawRevocationType
            details["in_app_ownership_type"] = c.rawOwnershipType
            emit(.refunded, at: c.revocationDate, basis: "revocationDate", details)
        }
        if isRevoked(p) && !isRevoked(c) && sameTransaction {
            var details = transition()
            details["transaction_id"] = c.transactionId
            details["old_revocation_date"] = text(p.revocationDate)
            details["old_revocation_reason"] = p.rawRevocationReason.map(String.init)
            details["old_revocation_type"] = p.rawRevocationType
            emit(.refundReversed, at: nil, basis: "detected", details)
        }
    }

    // MARK: Billing retry and grace

    private mutating func detectBillingTrouble() {
        let newSpell = c.state.isBillingTrouble && (!p.state.isBillingTrouble || newTransaction)
        var details = transition()
        details["period_end"] = text(c.periodEnd)
        details["grace_period_expires_date"] = text(c.gracePeriodExpiresDate)
        // One event per failure: a spell with a grace period starts as `grace_period_started`
        // (Apple's DID_FAIL_TO_RENEW/GRACE_PERIOD), one without as `billing_retry_started`.
        if newSpell && c.gracePeriodExpiresDate == nil {
            emit(.billingRetryStarted, at: c.periodEnd, basis: "expiresDate", details)
        }
        if c.state.isBillingTrouble, c.gracePeriodExpiresDate != nil,
           newSpell || (p.state != .gracePeriod && p.gracePeriodExpiresDate == nil) {
            emit(.gracePeriodStarted, at: c.periodEnd, basis: "expiresDate", details)
        }
        let graceEnd = p.gracePeriodExpiresDate ?? c.gracePeriodExpiresDate
        if !newTransaction, p.state == .gracePeriod, c.state == .billingRetry || c.state == .expired,
           graceEnd.map({ $0 <= asOf }) ?? true {
            // A cancel during grace ends it early: that is an expiry (intent 1), not this.
            details["grace_period_expires_date"] = text(graceEnd)
            emit(.gracePeriodExpired, at: graceEnd, basis: "gracePeriodExpiresDate", details)
        } else if newSpell, c.state == .billingRetry, let grace = c.gracePeriodExpiresDate, grace <= asOf {
            // Grace began and ended between two polls.
            emit(.gracePeriodExpired, at: grace, basis: "gracePeriodExpiresDate", details)
        }
    }

    // MARK: Expiry

    private mutating func detectExpiry() {
        guard c.state == .expired, p.state != .expired || newTransaction else { return }
        var details = transition()
        details["expiration_intent"] = c.expirationIntent?.name ?? (c.rawExpirationIntent == nil ? nil : "unknown")
        details["expiration_intent_raw"] = c.rawExpirationIntent.map(String.init)
        details["period_end"] = text(c.periodEnd)
        details["auto_renew_product_id"] = c.autoRenewProductId
        details["offer_discount_type"] = c.rawOfferDiscountType
        if p.state == .active || newTransaction {
            emit(.expired, at: c.periodEnd, basis: "expiresDate", details)
        } else {
            // Out of billing retry (or a revocation undone): Apple gives no end-of-retry time.
            emit(.expired, at: nil, basis: "detected", details)
        }
    }

    // MARK: Auto-renew

    private mutating func detectAutoRenew() {
        var details = transition()
        details["old_auto_renew_status"] = p.rawAutoRenewStatus.map(String.init)
        details["new_auto_renew_status"] = c.rawAutoRenewStatus.map(String.init)
        details["period_end"] = text(c.periodEnd)
        details["auto_renew_product_id"] = c.autoRenewProductId
        details["offer_discount_type"] = c.rawOfferDiscountType
        if p.autoRenew == true, c.autoRenew == false, c.state == .active {
            emit(.autoRenewDisabled, at: nil, basis: "detected", details)
        }
        if p.autoRenew == false, c.autoRenew == true, !p.state.isChurned, !c.state.isChurned {
            emit(.autoRenewEnabled, at: nil, basis: "detected", details)
        }
    }

    // MARK: Pending plan changes

    private mutating func detectPlanChange() {
        guard !c.state.isChurned else { return }
        var details = transition()
        details["old_auto_renew_product_id"] = p.autoRenewProductId
        details["new_auto_renew_product_id"] = c.autoRenewProductId
        details["period_end"] = text(c.periodEnd)
        if let next = c.pendingProductId, next != p.pendingProductId || productChanged {
            emit(.planChangeScheduled, at: nil, basis: "detected", details)
        } else if p.pendingProductId != nil, c.pendingProductId == nil, !productChanged {
            emit(.planChangeCancelled, at: nil, basis: "detected", details)
        }
    }

    // MARK: Price increases

    private mutating func detectPriceIncrease() {
        guard !c.state.isChurned else { return }
        var details = transition()
        details["old_price_increase_status"] = p.rawPriceIncreaseStatus.map(String.init)
        details["new_price_increase_status"] = c.rawPriceIncreaseStatus.map(String.init)
        details["renewal_price"] = c.renewalPrice.map(String.init)
        details["currency"] = c.renewalCurrency
        let pending = PriceIncreaseStatus.customerHasNotResponded.rawInt
        let accepted = PriceIncreaseStatus.customerConsentedOrWasNotifiedWithoutClaimingConsent.rawInt
        if c.rawPriceIncreaseStatus == pending, p.rawPriceIncreaseStatus != pending {
            emit(.priceIncreasePending, at: nil, basis: "detected", details)
        } else if c.rawPriceIncreaseStatus == accepted, p.rawPriceIncreaseStatus != accepted {
            emit(.priceIncreaseAccepted, at: nil, basis: "detected", details)
        } else if p.rawPriceIncreaseStatus == pending, c.rawPriceIncreaseStatus == nil,
                  newTransaction, c.state == .active, c.productId == p.productId {
            // It renewed at the new price: consent was given before the renewal. (A move to
            // another product also ends the increase, without consent to it.)
            emit(.priceIncreaseAccepted, at: c.periodStart, basis: "purchaseDate", details)
        }
    }

    // MARK: Helpers

    private func transition() -> EventDetails {
        var details: EventDetails = ["product_id": c.productId, "old_state": p.state.rawValue, "new_state": c.state.rawValue]
        details["in_app_ownership_type"] = c.rawOwnershipType
        return details
    }

    private func text(_ date: Date?) -> String? { date.map(EpochMilliseconds.text) }

    /// Records an event at `date` (capped at `asOf`), or at `asOf` when Apple gives no date.
    private mutating func emit(_ type: ChurnEventType, at date: Date?, basis: String, _ details: EventDetails) {
        var details = details
        let occurredAt: Date
        if let date, date <= asOf {
            occurredAt = date
            details["occurred_at_basis"] = basis
        } else {
            occurredAt = asOf
            details["occurred_at_basis"] = "detected"
        }
        events.append(ChurnEvent(type: type, occurredAt: occurredAt, details: details))
    }
}
