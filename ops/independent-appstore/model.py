"""Apple's world as the independent server models it: products, subscriptions and their
transactions, V2 notifications as filed (fact sheet §8). The World that changes them over
simulated time is world.py; the payloads it signs, payloads.py."""
from __future__ import annotations

import json
from dataclasses import dataclass, field

DAY_MS = 86_400_000

PRODUCTS = {
    # productId: (group, period in ms, price in milliunits)
    "com.indie.premium.monthly": ("20010001", 30 * DAY_MS, 9990),
    "com.indie.premium.yearly": ("20010001", 365 * DAY_MS, 79990),
    "com.indie.basic.monthly": ("20010001", 30 * DAY_MS, 4990),
    "com.indie.pro.monthly": ("20020002", 30 * DAY_MS, 14990),
    # The second app's (and any further app's) own products, in a group of their own.
    "com.indie.notes.monthly": ("20030003", 30 * DAY_MS, 2990),
    "com.indie.notes.yearly": ("20030003", 365 * DAY_MS, 24990),
}


@dataclass
class Txn:
    transaction_id: str
    original_transaction_id: str
    product_id: str
    purchase_ms: int
    expires_ms: int
    web_order_line_item_id: str
    reason: str  # PURCHASE / RENEWAL
    modified_ms: int
    revocation_ms: int | None = None
    revocation_reason: int | None = None
    revocation_type: str | None = None
    offer_type: int | None = None
    offer_identifier: str | None = None
    offer_discount_type: str | None = None
    price: int = 0
    is_upgraded: bool = False
    product_type: str = "Auto-Renewable Subscription"


@dataclass
class Subscription:
    otid: str
    customer: str
    environment: str  # Production / Sandbox
    ownership: str = "PURCHASED"
    app_account_token: str | None = None
    txns: list[Txn] = field(default_factory=list)
    auto_renew: int = 1
    auto_renew_product: str = ""
    expiration_intent: int | None = None
    in_retry: bool = False
    retry_gave_up: bool = False
    grace_days: int = 0           # billing grace period length when billing fails (0 = none)
    grace_expires_ms: int | None = None
    price_increase_status: int | None = None
    billing_fails: bool = False   # the next renewal charge fails
    not_for_sale: bool = False    # the product can't be renewed
    recover_at_ms: int | None = None
    give_up_at_ms: int | None = None
    winback_offer_ids: list[str] | None = None
    forced_intent: int | None = None  # expire at period end with this intent (5, or one Apple hasn't invented)
    status_lag_ms: int = 0        # Apple's status lags: still 4 this long after the grace end
    renewal_offer: tuple | None = None  # (offerType, offerIdentifier) applying at the next renewal
    one_offs: list[Txn] = field(default_factory=list)  # consumables / non-consumables of the customer
    receipt: str | None = None    # legacy receipt-data (base64) the app stored, if any
    renewal_removed: bool = False  # legacy: cancelled during grace, the pending_renewal_info item is gone
    notifications_on: bool = True  # False: Apple's notifications about it are lost from then on (safety-net case)
    grace_expiry_notified: bool = False

    @property
    def latest(self) -> Txn:
        return max(self.txns, key=lambda t: (t.purchase_ms, t.transaction_id))

    @property
    def product(self) -> str:
        return self.latest.product_id

    @property
    def group(self) -> str:
        return PRODUCTS[self.product][0]

    def status(self, now_ms: int) -> int:
        last = self.latest
        if last.revocation_ms is not None:
            return 5
        if last.expires_ms > now_ms:
            return 1
        if self.in_retry:
            return 4 if self.grace_expires_ms and self.grace_expires_ms + self.status_lag_ms > now_ms else 3
        return 2


# Notifications V2 (fact sheet §8): types and their subtypes ("" = no subtype), for the
# history endpoint's filters (4000018 for anything else).
NOTIFICATION_TYPES = {
    "SUBSCRIBED": {"INITIAL_BUY", "RESUBSCRIBE"},
    "DID_CHANGE_RENEWAL_STATUS": {"AUTO_RENEW_DISABLED", "AUTO_RENEW_ENABLED"},
    "DID_CHANGE_RENEWAL_PREF": {"UPGRADE", "DOWNGRADE", ""},
    "OFFER_REDEEMED": {"UPGRADE", "DOWNGRADE", ""},
    "DID_RENEW": {"BILLING_RECOVERY", ""},
    "DID_FAIL_TO_RENEW": {"GRACE_PERIOD", ""},
    "GRACE_PERIOD_EXPIRED": {""},
    "EXPIRED": {"VOLUNTARY", "BILLING_RETRY", "PRICE_INCREASE", "PRODUCT_NOT_FOR_SALE", ""},
    "PRICE_INCREASE": {"PENDING", "ACCEPTED"},
    "REFUND": {""}, "REFUND_DECLINED": {""}, "REFUND_REVERSED": {""}, "REVOKE": {""},
    "CONSUMPTION_REQUEST": {""}, "RENEWAL_EXTENDED": {""}, "RENEWAL_EXTENSION": {"SUMMARY", "FAILURE"},
    "TEST": {""}, "EXTERNAL_PURCHASE_TOKEN": {"UNREPORTED", ""}, "ONE_TIME_CHARGE": {""},
    "RESCIND_CONSENT": {""}, "METADATA_UPDATE": {""}, "MIGRATION": {""}, "PRICE_CHANGE": {""},
}
EXPIRED_SUBTYPE = {1: "VOLUNTARY", 2: "BILLING_RETRY", 3: "PRICE_INCREASE", 4: "PRODUCT_NOT_FOR_SALE"}


@dataclass
class Notification:
    """One V2 notification as Apple filed it: its content is fixed at the moment of the change
    (payloads built then); the JWS are signed when first served, by the serving PKI."""
    uuid: str
    seq: int
    otid: str
    environment: str
    notification_type: str
    subtype: str | None
    signed_ms: int
    status: int | None          # data.status at the moment (None: not an auto-renewable)
    auto_renew: int | None      # the renewal info's autoRenewStatus at the moment
    transaction: dict
    renewal: dict | None
    attempts: list[tuple[int, str]]
    forged: bool = False        # served signed by the untrusted look-alike chain
    signed: dict = field(default_factory=dict)  # id(pki) -> signedPayload
    extra: dict = field(default_factory=dict)   # more `data` fields (consumptionRequestReason)


def json_object(raw: bytes) -> dict | None:
    """A request body as a JSON object, as Apple reads one; None when it is empty or is not one."""
    try:
        body = json.loads(raw.decode("utf-8")) if raw else None
    except Exception:  # noqa: BLE001
        return None
    return body if isinstance(body, dict) else None
