import AppStoreModels

extension Population {
    /// The decoded transaction payload Apple would sign at `signedAt`.
    public func transactionPayload(_ i: Int, _ tx: SimTransaction, originalPurchaseDate: Int64, signedAt: Int64)
        -> JWSTransactionDecodedPayload
    {
        let record = records[i]
        let product = catalog.products[tx.product]
        let store = Storefronts.all[Int(record.storefront)]
        let group = catalog.groups[product.group]
        var p = JWSTransactionDecodedPayload(
            transactionId: transactionId(i, tx.index),
            originalTransactionId: originalTransactionId(i),
            webOrderLineItemId: webOrderLineItemId(i, tx.index),
            bundleId: config.bundleId,
            productId: product.id,
            subscriptionGroupIdentifier: group.id,
            purchaseDate: EpochMilliseconds(tx.purchaseDate),
            originalPurchaseDate: EpochMilliseconds(originalPurchaseDate),
            expiresDate: EpochMilliseconds(tx.expiresDate),
            quantity: 1,
            rawType: ProductType.autoRenewableSubscription.rawValue,
            appAccountToken: appAccountToken(i),
            rawInAppOwnershipType: (record.flags.contains(.familyShared)
                ? InAppOwnershipType.familyShared : .purchased).rawValue,
            signedDate: EpochMilliseconds(signedAt),
            rawEnvironment: environment(i),
            storefront: store.code,
            storefrontId: store.id,
            rawTransactionReason: (tx.isRenewal ? TransactionReason.renewal : .purchase).rawValue,
            price: SimSchedule.price(full: Storefronts.localPrice(catalog.price(product: tx.product, tier: tx.priceTier),
                                                                  storefront: Int(record.storefront)), offer: tx.offer),
            currency: store.currency,
            appTransactionId: appTransactionId(i))
        if let rev = tx.revocation {
            p.revocationDate = EpochMilliseconds(rev.date)
            p.rawRevocationReason = rev.reason
            p.rawRevocationType = rev.type
            p.revocationPercentage = rev.percentage
        }
        if tx.upgradedAt != nil { p.isUpgraded = true }
        if let type = tx.offer.offerType {
            p.rawOfferType = type
            p.offerIdentifier = tx.offer.identifier(group: group.name)
            p.rawOfferDiscountType = tx.offer.discountType
            p.offerPeriod = SimSchedule.offerPeriod(unit: product.unit, offer: tx.offer)
        }
        return p
    }

    /// The decoded renewal info Apple would sign at the state's moment.
    public func renewalPayload(_ i: Int, _ s: SubscriptionState) -> JWSRenewalInfoDecodedPayload {
        let record = records[i]
        let store = Storefronts.all[Int(record.storefront)]
        let product = catalog.products[s.latest.product]
        let next = catalog.products[s.autoRenewProduct]
        let group = catalog.groups[product.group]
        var tier = s.latest.priceTier
        if s.priceIncrease != .none { tier += 1 }
        if s.autoRenewProduct != s.latest.product { tier = 0 }
        var p = JWSRenewalInfoDecodedPayload(
            originalTransactionId: originalTransactionId(i),
            productId: product.id,
            autoRenewProductId: next.id,
            rawAutoRenewStatus: s.reportedAutoRenew ? 1 : 0,
            isInBillingRetryPeriod: s.isInBillingRetry,
            renewalDate: EpochMilliseconds(s.latest.expiresDate),
            renewalPrice: SimSchedule.price(full: Storefronts.localPrice(catalog.price(product: s.autoRenewProduct, tier: tier),
                                                                         storefront: Int(record.storefront)), offer: s.pendingOffer),
            currency: store.currency,
            recentSubscriptionStartDate: EpochMilliseconds(s.recentStart),
            signedDate: EpochMilliseconds(s.at),
            rawEnvironment: environment(i),
            appAccountToken: appAccountToken(i),
            appTransactionId: appTransactionId(i))
        switch s.phase {
        case .expired(let intent, let at):
            p.rawExpirationIntent = Int32(intent)
            if intent == 1 && s.at - at < 180 * SimTime.day && s.latest.revocation == nil {
                p.eligibleWinBackOfferIds = catalog.winBackOffers(group: product.group)
            }
        case .billingRetry(_, let graceEnd):
            p.gracePeriodExpiresDate = graceEnd.map { EpochMilliseconds($0) }
            p.eligibleWinBackOfferIds = []
        case .active:
            break
        }
        switch s.priceIncrease {
        case .none: break
        case .pending: p.rawPriceIncreaseStatus = 0
        case .accepted: p.rawPriceIncreaseStatus = 1
        }
        if let type = s.pendingOffer.offerType {
            p.rawOfferType = type
            p.offerIdentifier = s.pendingOffer.identifier(group: group.name)
            p.rawOfferDiscountType = s.pendingOffer.discountType
            p.offerPeriod = SimSchedule.offerPeriod(unit: next.unit, offer: s.pendingOffer)
        }
        return p
    }

    /// The legacy `verifyReceipt` answer for the customer of subscription `i` at `t`.
    public func verifyReceiptResponse(_ i: Int, at t: Int64, receiptData: String, excludeOld: Bool)
        -> VerifyReceiptResponse
    {
        var latestInfo: [LegacyReceiptTransaction] = []
        var pending: [LegacyPendingRenewalInfo] = []
        for sub in customerSubscriptions(i) where exists(sub, at: t) {
            let (s, txs) = stateAndTransactions(sub, at: t)
            let group = catalog.groups[Int(records[sub].group)]
            for tx in (excludeOld ? [s.latest] : txs) {
                let product = catalog.products[tx.product]
                latestInfo.append(LegacyReceiptTransaction(
                    originalTransactionId: originalTransactionId(sub),
                    transactionId: transactionId(sub, tx.index),
                    productId: product.id,
                    purchaseDate: EpochMilliseconds(tx.purchaseDate),
                    originalPurchaseDate: EpochMilliseconds(s.originalPurchaseDate),
                    expiresDate: EpochMilliseconds(tx.expiresDate),
                    cancellationDate: tx.revocation.map { EpochMilliseconds($0.date) },
                    rawCancellationReason: tx.revocation?.reason,
                    isTrialPeriod: tx.offer == .freeTrial,
                    isInIntroOfferPeriod: tx.offer == .introPayAsYouGo,
                    isUpgraded: tx.upgradedAt != nil ? true : nil,
                    promotionalOfferId: tx.offer == .promotional || tx.offer == .winBack
                        ? tx.offer.identifier(group: group.name) : nil,
                    offerCodeRefName: tx.offer == .offerCode ? tx.offer.identifier(group: group.name) : nil,
                    webOrderLineItemId: webOrderLineItemId(sub, tx.index),
                    subscriptionGroupIdentifier: group.id,
                    rawInAppOwnershipType: records[sub].flags.contains(.familyShared) ? "FAMILY_SHARED" : "PURCHASED",
                    appAccountToken: appAccountToken(sub),
                    quantity: 1))
            }
            // A customer who cancels during billing retry drops out of pending_renewal_info; we
            // model no such cancellation, so every subscription has its element.
            var info = LegacyPendingRenewalInfo(
                originalTransactionId: originalTransactionId(sub),
                productId: catalog.products[s.latest.product].id,
                autoRenewProductId: catalog.products[s.autoRenewProduct].id,
                rawAutoRenewStatus: s.reportedAutoRenew ? 1 : 0,
                rawExpirationIntent: s.expirationIntent.map(Int32.init),
                gracePeriodExpiresDate: s.gracePeriodExpiresDate.map { EpochMilliseconds($0) })
            if s.isInBillingRetry {
                info.isInBillingRetryPeriod = true
            } else if s.expirationIntent == 2 {
                info.isInBillingRetryPeriod = false
            }
            switch s.priceIncrease {
            case .none: break
            case .pending:
                info.priceConsentStatus = 0
                info.rawPriceIncreaseStatus = 0
            case .accepted:
                info.priceConsentStatus = 1
                info.rawPriceIncreaseStatus = 1
            }
            if s.pendingOffer == .promotional { info.promotionalOfferId = s.pendingOffer.identifier(group: group.name) }
            pending.append(info)
        }
        latestInfo.sort { ($0.purchaseDate?.rawValue ?? 0, $0.transactionId ?? "") > ($1.purchaseDate?.rawValue ?? 0, $1.transactionId ?? "") }
        let sandbox = isSandbox(i)
        let receipt = LegacyReceipt(
            receiptType: sandbox ? "ProductionSandbox" : "Production",
            bundleId: config.bundleId,
            appItemId: sandbox ? nil : config.appAppleId,
            applicationVersion: "1",
            originalApplicationVersion: "1",
            receiptCreationDate: EpochMilliseconds(state(i, at: t).originalPurchaseDate),
            requestDate: EpochMilliseconds(t),
            originalPurchaseDate: EpochMilliseconds(state(i, at: t).originalPurchaseDate),
            inApp: latestInfo)
        return VerifyReceiptResponse(
            status: 0, environment: sandbox ? "Sandbox" : "Production", receipt: receipt,
            latestReceipt: receiptData, latestReceiptInfo: latestInfo, pendingRenewalInfo: pending)
    }
}
