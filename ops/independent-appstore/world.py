"""The world of one app: customers, their subscriptions and transactions, a simulated clock,
and the changes a script makes (act). What it files as Apple would (V2 notifications, refund
requests) is recorded for the truth. Used by server.py (which serves it) and by the scripted
worlds (first_app.py, second_app.py)."""
from __future__ import annotations

import hashlib
import random
import threading
import uuid

from model import DAY_MS, EXPIRED_SUBTYPE, PRODUCTS, Notification, Subscription, Txn
from payloads import Payloads

# Send Consumption Information (fact sheet "Refund requests"): Apple weighs an answer for 12
# hours after its CONSUMPTION_REQUEST.
CONSUMPTION_WINDOW_MS = 12 * 3_600_000


class World(Payloads):
    def __init__(self, bundle_id: str, app_apple_id: int, seed: int = 7):
        self.bundle_id, self.app_apple_id = bundle_id, app_apple_id
        self.subs: dict[str, Subscription] = {}
        self.txn_index: dict[str, Subscription] = {}
        self.now_ms = 0
        self.lock = threading.RLock()
        self.rng = random.Random(seed)
        # Notifications get their own randomness, so the world's ids don't depend on them.
        self.note_rng = random.Random(seed + 1000)
        self.notifications: list[Notification] = []
        self.unnotified: list[dict] = []  # changes Apple never notified (the safety net's case)
        self._next_id = 420_000_000_100_000 + seed * 1_000_000
        self.shared_secret = hashlib.sha256(f"indie-{seed}".encode()).hexdigest()[:32]
        # Refund requests (fact sheet "Refund requests"): every CONSUMPTION_REQUEST filed, every
        # decision (REFUND / REFUND_DECLINED) on one, and every Send Consumption Information
        # PUT received (by the server's clock), whatever it was answered.
        self.refund_requests: list[dict] = []
        self.refund_decisions: list[dict] = []
        self.consumption_puts: list[dict] = []

    def new_id(self) -> str:
        self._next_id += self.rng.randint(1, 97)
        return str(self._next_id)

    def add(self, sub: Subscription, product: str, start_ms: int, offer: tuple | None = None):
        period = PRODUCTS[product][1]
        tid = sub.otid
        t = Txn(tid, sub.otid, product, start_ms, start_ms + period, self.new_id(), "PURCHASE", start_ms,
                price=PRODUCTS[product][2])
        if offer:
            t.offer_type, t.offer_identifier, t.offer_discount_type = offer
        sub.txns.append(t)
        sub.auto_renew_product = sub.auto_renew_product or product
        self.subs[sub.otid] = sub
        self.txn_index[tid] = sub
        self.notify(sub, "SUBSCRIBED", "INITIAL_BUY", start_ms)
        return sub

    def notify(self, sub: Subscription, ntype: str, subtype: str | None, at_ms: int, txn: Txn | None = None,
               extra: dict | None = None) -> Notification | None:
        """Apple files a V2 notification about `sub` as it is at `at_ms` (fact sheet §8)."""
        if not sub.notifications_on:
            self.unnotified.append({"originalTransactionId": sub.otid, "notificationType": ntype,
                                    "subtype": subtype, "at": at_ms})
            return None
        txn = txn or sub.latest
        renewable = txn.product_type == "Auto-Renewable Subscription"
        seq = len(self.notifications)
        # Delivery: most got through at once; some after a retry; a few are still failing (onlyFailures).
        if seq % 17 == 8:
            attempts = [(at_ms + 1500, "UNSUCCESSFUL_HTTP_RESPONSE_CODE"), (at_ms + 3_600_000, "NO_RESPONSE"),
                        (at_ms + 4 * 3_600_000, "TIMED_OUT")]
        elif seq % 9 == 4:
            attempts = [(at_ms + 2000, "TIMED_OUT"), (at_ms + 3_600_000, "SUCCESS")]
        else:
            attempts = [(at_ms + 1200, "SUCCESS")]
        self.notifications.append(Notification(
            uuid=str(uuid.uuid4()), seq=seq, otid=sub.otid, environment=sub.environment,
            notification_type=ntype, subtype=subtype, signed_ms=at_ms,
            status=sub.status(at_ms) if renewable else None, auto_renew=sub.auto_renew if renewable else None,
            transaction=self.transaction_payload(sub, txn, at_ms=at_ms, rng=self.note_rng),
            renewal=self.renewal_payload(sub, at_ms=at_ms, rng=self.note_rng) if renewable else None,
            attempts=attempts, extra=dict(extra or {})))
        return self.notifications[-1]

    def _renew(self, sub: Subscription, at_ms: int, product: str | None = None, subtype: str | None = None):
        product = product or sub.auto_renew_product
        period = PRODUCTS[product][1]
        price = PRODUCTS[product][2]
        if sub.price_increase_status == 1:
            price += 1000
        t = Txn(self.new_id(), sub.otid, product, at_ms, at_ms + period, self.new_id(), "RENEWAL", at_ms, price=price)
        sub.txns.append(t)
        self.txn_index[t.transaction_id] = sub
        self.notify(sub, "DID_RENEW", subtype, at_ms)

    def backfill_renewals(self, sub: Subscription, until_ms: int):
        """History: renew (auto-renew on, charges succeed) up to `until_ms`."""
        while sub.latest.expires_ms <= until_ms:
            self._renew(sub, sub.latest.expires_ms)

    def _advance_sub(self, sub: Subscription, now_ms: int):
        while True:
            last = sub.latest
            if last.revocation_ms is not None:
                return
            if sub.in_retry:
                # The next of: the grace period's end (notified), recovery, Apple giving up.
                due = []
                if sub.grace_expires_ms is not None and not sub.grace_expiry_notified and sub.grace_expires_ms <= now_ms:
                    due.append((sub.grace_expires_ms, 0))
                if sub.recover_at_ms is not None and sub.recover_at_ms <= now_ms:
                    due.append((sub.recover_at_ms, 1))
                if sub.give_up_at_ms is not None and sub.give_up_at_ms <= now_ms:
                    due.append((sub.give_up_at_ms, 2))
                if not due:
                    return
                at, what = min(due)
                if what == 0:
                    sub.grace_expiry_notified = True
                    self.notify(sub, "GRACE_PERIOD_EXPIRED", None, at)
                    continue
                if what == 1:
                    sub.in_retry, sub.grace_expires_ms, sub.recover_at_ms, sub.billing_fails = False, None, None, False
                    self._renew(sub, at, subtype="BILLING_RECOVERY")  # Apple starts the new period on the recovery date
                    continue
                sub.in_retry, sub.retry_gave_up, sub.expiration_intent = False, True, 2
                sub.auto_renew = 0  # Apple reports auto-renew off afterwards: not a customer flip
                self.notify(sub, "EXPIRED", "BILLING_RETRY", at)
                return
            if last.expires_ms > now_ms or sub.expiration_intent is not None:
                return
            # The period ended at last.expires_ms: renew, retry or expire.
            if sub.auto_renew == 0:
                sub.expiration_intent = 1
            elif sub.price_increase_status == 0:
                sub.expiration_intent, sub.auto_renew = 3, 0
            elif sub.forced_intent is not None:
                sub.expiration_intent, sub.auto_renew = sub.forced_intent, 0
            elif sub.not_for_sale:
                sub.expiration_intent, sub.auto_renew = 4, 0
            elif sub.billing_fails:
                sub.in_retry, sub.grace_expiry_notified = True, False
                if sub.grace_days:
                    sub.grace_expires_ms = last.expires_ms + sub.grace_days * DAY_MS
                self.notify(sub, "DID_FAIL_TO_RENEW", "GRACE_PERIOD" if sub.grace_days else None, last.expires_ms)
                continue
            else:
                self._renew(sub, last.expires_ms)
                continue
            self.notify(sub, "EXPIRED", EXPIRED_SUBTYPE.get(sub.expiration_intent), last.expires_ms)
            return

    def advance(self, now_ms: int):
        with self.lock:
            assert now_ms >= self.now_ms, "the clock only moves forward"
            for sub in self.subs.values():
                self._advance_sub(sub, now_ms)
            self.now_ms = now_ms

    # ---- scripted actions (the checker calls these at their simulated moment) ----
    def act(self, otid: str, action: str, at_ms: int, **kw):
        """The world moved to `at_ms`, then `action` done to the subscription `otid` (an
        `_act_<action>` method below)."""
        with self.lock:
            self.advance(at_ms)
            sub = self.subs[otid]
            change = getattr(self, "_act_" + action, None)
            if change is None:
                raise ValueError(action)
            change(sub, at_ms, **kw)

    def _act_auto_renew_off(self, sub: Subscription, at_ms: int, **kw):
        sub.auto_renew = 0
        stopped_retry = sub.in_retry
        if sub.in_retry:  # cancelled during grace/retry: retry stops, expired (intent 1)
            if sub.grace_expires_ms is not None and sub.grace_expires_ms > at_ms:
                sub.renewal_removed = True  # fact sheet §7: removed from pending_renewal_info
            sub.in_retry, sub.grace_expires_ms, sub.expiration_intent = False, None, 1
        self.notify(sub, "DID_CHANGE_RENEWAL_STATUS", "AUTO_RENEW_DISABLED", at_ms)
        if stopped_retry:
            self.notify(sub, "EXPIRED", "VOLUNTARY", at_ms)

    def _act_auto_renew_on(self, sub: Subscription, at_ms: int, **kw):
        sub.auto_renew = 1
        self.notify(sub, "DID_CHANGE_RENEWAL_STATUS", "AUTO_RENEW_ENABLED", at_ms)

    def _act_refund(self, sub: Subscription, at_ms: int, **kw):
        t = sub.latest
        t.revocation_ms, t.revocation_reason = at_ms, kw.get("reason", 1)
        t.revocation_type, t.modified_ms = kw.get("revocation_type", "REFUND_FULL"), at_ms
        if kw.get("auto_renew_off", True):
            sub.auto_renew = 0
        self.notify(sub, "REVOKE" if t.revocation_type == "FAMILY_REVOKE" else "REFUND", None, at_ms)

    def _act_refund_request(self, sub: Subscription, at_ms: int, **kw):
        """The customer asks Apple to refund the latest transaction: CONSUMPTION_REQUEST (no
        subtype), its reason in data; Apple listens for the answer for 12 hours."""
        t = sub.latest
        n = self.notify(sub, "CONSUMPTION_REQUEST", None, at_ms,
                        extra={"consumptionRequestReason": kw.get("reason", "UNSATISFIED_WITH_PURCHASE")})
        self.refund_requests.append({
            "notificationUUID": n.uuid if n else None, "originalTransactionId": sub.otid,
            "transactionId": t.transaction_id, "environment": sub.environment, "signedDate": at_ms,
            "deadline": at_ms + CONSUMPTION_WINDOW_MS, "reason": kw.get("reason", "UNSATISFIED_WITH_PURCHASE"),
            "purchaseDate": t.purchase_ms, "expiresDate": t.expires_ms})

    def _act_refund_decision(self, sub: Subscription, at_ms: int, **kw):
        """Apple decides a refund request about a transaction (the latest one asked about, by
        default): REFUND revokes it as any refund does; REFUND_DECLINED changes nothing."""
        tid = kw.get("transaction_id") or next(r["transactionId"] for r in reversed(self.refund_requests)
                                               if r["originalTransactionId"] == sub.otid)
        t = next(t for t in sub.txns if t.transaction_id == tid)
        decision = kw["decision"]
        if decision == "REFUND":
            t.revocation_ms, t.revocation_reason = at_ms, kw.get("reason", 1)
            t.revocation_type, t.modified_ms = "REFUND_FULL", at_ms
            if kw.get("auto_renew_off", True):
                sub.auto_renew = 0
        elif decision != "REFUND_DECLINED":
            raise ValueError(decision)
        n = self.notify(sub, decision, None, at_ms, txn=t)
        self.refund_decisions.append({"notificationUUID": n.uuid if n else None, "originalTransactionId": sub.otid,
                                      "transactionId": tid, "environment": sub.environment,
                                      "decision": decision, "signedDate": at_ms})

    def _act_refund_reversed(self, sub: Subscription, at_ms: int, **kw):
        t = sub.latest
        t.revocation_ms = t.revocation_reason = t.revocation_type = None
        t.modified_ms = at_ms
        self.notify(sub, "REFUND_REVERSED", None, at_ms)

    def _act_downgrade(self, sub: Subscription, at_ms: int, **kw):
        sub.auto_renew_product = kw["product"]
        self.notify(sub, "DID_CHANGE_RENEWAL_PREF", "DOWNGRADE", at_ms)

    def _act_cancel_downgrade(self, sub: Subscription, at_ms: int, **kw):
        sub.auto_renew_product = sub.product
        self.notify(sub, "DID_CHANGE_RENEWAL_PREF", None, at_ms)

    def _act_price_increase(self, sub: Subscription, at_ms: int, **kw):
        sub.price_increase_status = 0
        self.notify(sub, "PRICE_INCREASE", "PENDING", at_ms)

    def _act_price_consent(self, sub: Subscription, at_ms: int, **kw):
        sub.price_increase_status = 1
        self.notify(sub, "PRICE_INCREASE", "ACCEPTED", at_ms)

    def _act_notifications_lost(self, sub: Subscription, at_ms: int, **kw):
        sub.notifications_on = False  # from now on Apple's notifications about it never arrive

    def _act_billing_fails(self, sub: Subscription, at_ms: int, **kw):
        sub.billing_fails = True
        sub.grace_days = kw.get("grace_days", 0)
        sub.recover_at_ms = kw.get("recover_at")
        sub.give_up_at_ms = kw.get("give_up_at")

    def _act_not_for_sale(self, sub: Subscription, at_ms: int, **kw):
        sub.not_for_sale = True

    def _act_expire_with_intent(self, sub: Subscription, at_ms: int, **kw):
        sub.forced_intent = kw["intent"]

    def _purchase(self, sub: Subscription, product: str, at_ms: int) -> Txn:
        """A new PURCHASE transaction of `product` in the subscription, starting at `at_ms`."""
        return Txn(self.new_id(), sub.otid, product, at_ms, at_ms + PRODUCTS[product][1], self.new_id(), "PURCHASE",
                   at_ms, price=PRODUCTS[product][2])

    def _act_upgrade(self, sub: Subscription, at_ms: int, **kw):
        """Immediate, a PURCHASE; the old transaction is upgraded away."""
        old = sub.latest
        old.is_upgraded, old.modified_ms = True, at_ms
        product = kw["product"]
        t = self._purchase(sub, product, at_ms)
        sub.txns.append(t)
        self.txn_index[t.transaction_id] = sub
        sub.auto_renew_product, sub.auto_renew = product, 1  # the new product renews
        self.notify(sub, "DID_CHANGE_RENEWAL_PREF", "UPGRADE", at_ms)

    def _act_resubscribe(self, sub: Subscription, at_ms: int, **kw):
        """A new purchase in the same group after churn (same original id)."""
        product = kw.get("product") or sub.auto_renew_product
        t = self._purchase(sub, product, at_ms)
        if kw.get("offer"):
            t.offer_type, t.offer_identifier, t.offer_discount_type = kw["offer"]
        sub.txns.append(t)
        self.txn_index[t.transaction_id] = sub
        sub.auto_renew_product = product
        sub.auto_renew, sub.expiration_intent, sub.in_retry, sub.retry_gave_up = 1, None, False, False
        sub.forced_intent, sub.grace_expires_ms = None, None
        self.notify(sub, "SUBSCRIBED", "RESUBSCRIBE", at_ms)

    def _act_buy_one_off(self, sub: Subscription, at_ms: int, **kw):
        """A consumable or non-consumable: in history, never in statuses."""
        t = Txn(self.new_id(), "", kw["product"], at_ms, 0, "", "PURCHASE", at_ms, price=1990, product_type=kw["type"])
        t.original_transaction_id = t.transaction_id
        sub.one_offs.append(t)
        self.txn_index[t.transaction_id] = sub
        self.notify(sub, "ONE_TIME_CHARGE", None, at_ms, txn=t)

    def truth(self) -> dict:
        with self.lock:
            now = self.now_ms
            out = {}
            for s in self.subs.values():
                last = s.latest
                out[s.otid] = {
                    "status": s.status(now), "productId": last.product_id, "autoRenewProductId": s.auto_renew_product,
                    "autoRenewStatus": s.auto_renew, "expirationIntent": s.expiration_intent,
                    "inBillingRetry": s.in_retry, "gracePeriodExpiresDate": s.grace_expires_ms,
                    "priceIncreaseStatus": s.price_increase_status, "revoked": last.revocation_ms is not None,
                    "expiresDate": last.expires_ms, "ownership": s.ownership, "environment": s.environment,
                    "transactions": len(s.txns), "notified": s.notifications_on,
                }
            return {"now": now, "subscriptions": out, "unnotifiedChanges": list(self.unnotified),
                    "notifications": len(self.notifications),
                    "refundRequests": [dict(r) for r in self.refund_requests],
                    "refundDecisions": [dict(d) for d in self.refund_decisions],
                    "consumptionAnswers": [dict(p) for p in self.consumption_puts]}
