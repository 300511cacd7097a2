"""What the world signs and sends (fact sheet §5, §7, §8): transaction and renewal info,
notification payloads, the legacy verifyReceipt fields. A mixin of World (world.py): it reads
the world's bundle id, app Apple id, clock and randomness."""
from __future__ import annotations

import datetime as dt
import random

from model import PRODUCTS, Notification, Subscription, Txn
from pki import PKI


class Payloads:
    def notification_payload(self, n: Notification, pki: PKI) -> dict:
        data = {"bundleId": self.bundle_id, "bundleVersion": "4.2.1", "environment": n.environment,
                "signedTransactionInfo": pki.sign_jws(n.transaction)}
        if n.environment == "Production":  # Apple: appAppleId isn't present in the sandbox environment
            data["appAppleId"] = self.app_apple_id
        if n.renewal is not None:
            data["signedRenewalInfo"] = pki.sign_jws(n.renewal)
        if n.status is not None:
            data["status"] = n.status
        data.update(n.extra)
        p = {"notificationType": n.notification_type, "notificationUUID": n.uuid, "version": "2.0",
             "signedDate": n.signed_ms, "data": self._shuffle(data, self.note_rng)}
        if n.subtype:
            p["subtype"] = n.subtype
        return self._shuffle(p, self.note_rng)

    # ---- payloads (JWS content, fields exactly as the fact sheet's section 5) ----
    def transaction_payload(self, sub: Subscription, t: Txn, at_ms: int | None = None,
                            rng: random.Random | None = None) -> dict:
        """As signed at `at_ms` (default: now)."""
        p = {
            "transactionId": t.transaction_id, "originalTransactionId": t.original_transaction_id,
            "bundleId": self.bundle_id, "productId": t.product_id,
            "purchaseDate": t.purchase_ms, "originalPurchaseDate": sub.txns[0].purchase_ms,
            "quantity": 1, "type": t.product_type,
            "inAppOwnershipType": sub.ownership, "signedDate": self.now_ms if at_ms is None else at_ms,
            "environment": sub.environment,
            "transactionReason": t.reason, "storefront": "AUT", "storefrontId": "143445",
            "price": t.price, "currency": "EUR", "appTransactionId": "70" + sub.otid[-12:],
            # Fields no version of churnwatch can know (future API versions): must be ignored.
            "storefrontDisplayName": "Österreich — Wien",
            "futureExperiment": {"bucket": 3, "labels": ["ß", "日本"], "nested": {"x": None}},
        }
        if t.product_type == "Auto-Renewable Subscription":
            p["webOrderLineItemId"] = t.web_order_line_item_id
            p["subscriptionGroupIdentifier"] = PRODUCTS[t.product_id][0]
            p["expiresDate"] = t.expires_ms
        else:
            p["originalPurchaseDate"] = t.purchase_ms
            if t.product_type == "Consumable":
                p["quantity"] = 3
        if sub.app_account_token:
            p["appAccountToken"] = sub.app_account_token
        if t.revocation_ms is not None:
            p["revocationDate"] = t.revocation_ms
            p["revocationReason"] = t.revocation_reason
            p["revocationType"] = t.revocation_type
            p["revocationPercentage"] = 100000
        if t.offer_type is not None:
            p["offerType"] = t.offer_type
            if t.offer_identifier:
                p["offerIdentifier"] = t.offer_identifier
            if t.offer_discount_type:
                p["offerDiscountType"] = t.offer_discount_type
            p["offerPeriod"] = "P1M"
        if t.is_upgraded:
            p["isUpgraded"] = True
        return self._shuffle(p, rng)

    def renewal_payload(self, sub: Subscription, at_ms: int | None = None, rng: random.Random | None = None) -> dict:
        at_ms = self.now_ms if at_ms is None else at_ms
        last = sub.latest
        p = {
            "originalTransactionId": sub.otid, "productId": last.product_id,
            "autoRenewProductId": sub.auto_renew_product, "autoRenewStatus": sub.auto_renew,
            "renewalDate": last.expires_ms, "signedDate": at_ms, "environment": sub.environment,
            "recentSubscriptionStartDate": sub.txns[0].purchase_ms, "currency": "EUR",
            "renewalPrice": PRODUCTS[sub.auto_renew_product][2] + (1000 if sub.price_increase_status is not None else 0),
            "appTransactionId": "70" + sub.otid[-12:],
            "renewalBillingPlanType": "BILLED_UPFRONT",
            "somethingNew": "ünïcödé",
        }
        if sub.expiration_intent is not None:
            p["expirationIntent"] = sub.expiration_intent
        if sub.in_retry:
            p["isInBillingRetryPeriod"] = True
        elif sub.retry_gave_up:
            p["isInBillingRetryPeriod"] = False
        if sub.grace_expires_ms is not None and sub.in_retry:
            p["gracePeriodExpiresDate"] = sub.grace_expires_ms
        if sub.price_increase_status is not None:
            p["priceIncreaseStatus"] = sub.price_increase_status
        if sub.app_account_token:
            p["appAccountToken"] = sub.app_account_token
        if sub.renewal_offer:
            p["offerType"], p["offerIdentifier"] = sub.renewal_offer
        if sub.winback_offer_ids is not None and sub.status(at_ms) == 2 and not sub.retry_gave_up:
            p["eligibleWinBackOfferIds"] = sub.winback_offer_ids
        return self._shuffle(p, rng)

    def _shuffle(self, p: dict, rng: random.Random | None = None) -> dict:
        keys = list(p)
        (rng or self.rng).shuffle(keys)
        return {k: p[k] for k in keys}

    # ---- legacy verifyReceipt (fact sheet §7): every value a string, dates three ways ----
    @staticmethod
    def _dates(out: dict, name: str, ms: int):
        t = dt.datetime.fromtimestamp(ms / 1000, tz=dt.timezone.utc)
        pst = t - dt.timedelta(hours=8)
        out[f"{name}_ms"] = str(ms)
        out[name] = t.strftime("%Y-%m-%d %H:%M:%S Etc/GMT")
        out[f"{name}_pst"] = pst.strftime("%Y-%m-%d %H:%M:%S America/Los_Angeles")

    def legacy_transaction(self, sub: Subscription, t: Txn) -> dict:
        p = {"quantity": "1", "product_id": t.product_id, "transaction_id": t.transaction_id,
             "original_transaction_id": sub.otid, "web_order_line_item_id": t.web_order_line_item_id,
             "is_trial_period": "true" if t.offer_discount_type == "FREE_TRIAL" else "false",
             "is_in_intro_offer_period": "false", "in_app_ownership_type": sub.ownership,
             "subscription_group_identifier": PRODUCTS[t.product_id][0]}
        self._dates(p, "purchase_date", t.purchase_ms)
        self._dates(p, "original_purchase_date", sub.txns[0].purchase_ms)
        self._dates(p, "expires_date", t.expires_ms)
        if t.revocation_ms is not None:
            self._dates(p, "cancellation_date", t.revocation_ms)
            p["cancellation_reason"] = str(t.revocation_reason)
        if t.is_upgraded:
            p["is_upgraded"] = "true"
        if sub.app_account_token:
            p["app_account_token"] = sub.app_account_token
        return p

    def legacy_pending(self, sub: Subscription) -> dict | None:
        if sub.renewal_removed:
            return None
        p = {"auto_renew_product_id": sub.auto_renew_product, "product_id": sub.product,
             "original_transaction_id": sub.otid, "auto_renew_status": str(sub.auto_renew)}
        if sub.expiration_intent is not None:
            p["expiration_intent"] = str(sub.expiration_intent)
        if sub.in_retry:
            p["is_in_billing_retry_period"] = "1"
        elif sub.retry_gave_up:
            p["is_in_billing_retry_period"] = "0"
        if sub.in_retry and sub.grace_expires_ms is not None:
            self._dates(p, "grace_period_expires_date", sub.grace_expires_ms)
        if sub.price_increase_status is not None:
            p["price_increase_status"] = str(sub.price_increase_status)
            p["price_consent_status"] = str(sub.price_increase_status)
        return p
