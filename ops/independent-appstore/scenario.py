"""The check's timeline and what its scripted worlds are written with (first_app.py for the
first app, second_app.py for app k >= 2); imported by check.py and by server.py alike.

Night 0 is 2026-12-01T02:00:00Z (check.py --first-night moves it: set_first_night); night k is
k days later. The server's clock runs 7 minutes ahead of --as-of, as in a real run where Apple
answers a little after the run's as-of moment.
"""
from __future__ import annotations

import base64
import datetime as dt
import uuid

from model import DAY_MS, PRODUCTS, Subscription
from world import World

DAY = DAY_MS
HOUR = 3_600_000
SERVER_LEAD = 7 * 60_000
T0 = int(dt.datetime(2026, 12, 1, 2, 0, tzinfo=dt.timezone.utc).timestamp() * 1000)
BUNDLE_ID = "com.Indie-Labs.churn-Conformance"
APP_APPLE_ID = 6_450_001_234


def set_first_night(iso_moment: str):
    """Night 0 at `iso_moment` (ISO 8601): every simulated moment moves with it. Read T0 as
    `scenario.T0` (or through the functions below), never copied at import."""
    global T0
    T0 = int(dt.datetime.fromisoformat(iso_moment.replace("Z", "+00:00")).timestamp() * 1000)


def night_ms(k: int) -> int:
    return T0 + k * DAY


def day_ms(days: float) -> int:
    """`days` after night 0, to the millisecond (a fraction of a day allowed)."""
    return T0 + int(days * DAY)


def before_night(k: int, hours: float = 6) -> int:
    """A scripted change's moment: `hours` before night k."""
    return night_ms(k) - int(hours * HOUR)


def clock(k: int, hhmm: str) -> int:
    """hh:mm UTC on the day night k starts (night k runs at 02:00 of that day)."""
    h, m = map(int, hhmm.split(":"))
    return night_ms(k) - 2 * HOUR + h * HOUR + m * 60_000


def iso(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class Script:
    """One app's scripted world: its subscribers (as imported), the changes scheduled for them
    (act, at their moment), the app's refund consents and cron's syncs."""

    def __init__(self, bundle_id: str = BUNDLE_ID, app_apple_id: int = APP_APPLE_ID, seed: int = 7):
        self.world = World(bundle_id, app_apple_id, seed)
        self.actions: list[tuple[int, str, str, dict]] = []  # (at_ms, otid, action, kwargs)
        self.rows: list[dict] = []  # import CSV rows
        self.names: dict[str, str] = {}  # otid -> scenario name
        self.forged: dict[int, set[str]] = {}  # night -> subscriptions whose answer is forged that night
        self.replayed: dict[int, dict[str, int]] = {}  # night -> {subscription: night whose answer is replayed}
        # Refund requests: what the app writes in churnwatch.refund_consent and when (None: right
        # after the import), the moments cron runs `churnwatch notifications sync` between the
        # nights, and the transient faults some of those syncs meet on Send Consumption Information.
        self.consents: list[dict] = []
        self.cron: list[int] = []
        self.cron_faults: dict[int, dict] = {}

    def sub(self, name: str, product: str, expires_in_days: float, *, periods_before: int = 0,
            environment: str = "Production", import_env: str | None = None, ownership: str = "PURCHASED",
            customer: str | None = None, auto_renew: int = 1, offer: tuple | None = None,
            customer_ref: str | None = None, token: bool = True, winback_ids: list[str] | None = None,
            legacy: bool = False) -> str:
        w = self.world
        otid = w.new_id()
        period = PRODUCTS[product][1]
        expires = day_ms(expires_in_days)
        start = expires - (periods_before + 1) * period
        s = Subscription(otid=otid, customer=customer or otid, environment=environment, ownership=ownership,
                         app_account_token=str(uuid.uuid4()) if token else None, auto_renew=1,
                         winback_offer_ids=winback_ids)
        w.add(s, product, start, offer)  # SUBSCRIBED, then a DID_RENEW per renewal (notified as they happen)
        while s.latest.expires_ms < expires:
            w._renew(s, s.latest.expires_ms)
        if auto_renew == 0:  # turned off two hours into the last period, before the check starts
            s.auto_renew = 0
            w.notify(s, "DID_CHANGE_RENEWAL_STATUS", "AUTO_RENEW_DISABLED", s.latest.purchase_ms + 2 * HOUR)
        self.names[otid] = name
        row = {"original_transaction_id": otid, "app_account_token": s.app_account_token or "",
               "customer_ref": customer_ref or f"cust-{name}", "environment": import_env or environment}
        if legacy:  # registered with a stored receipt: churnwatch polls it through verifyReceipt
            s.receipt = base64.b64encode(f"indie-receipt:{otid}:{uuid.uuid4()}".encode()).decode()
            row["receipt_data"] = s.receipt
        self.rows.append(row)
        return otid

    def at(self, k: int, otid: str, action: str, hours: float = 6, **kw):
        self.actions.append((before_night(k, hours), otid, action, kw))

    def at_ms(self, at_ms: int, otid: str, action: str, **kw):
        self.actions.append((at_ms, otid, action, kw))

    def consent(self, otid: str, key: str, consented: bool, delivery: str | None = None, sample: bool | None = None,
                at_ms: int | None = None):
        """A refund_consent row the app writes for the customer of `otid`, by its app account
        token (key "token") or its original transaction id (key "otid")."""
        self.consents.append({"otid": otid, "key": key, "consented": consented, "delivery": delivery, "sample": sample,
                              "at": at_ms})

    def every_10_minutes(self, first_ms: int, last_ms: int):
        """cron's `notifications sync` every 10 minutes from first_ms to last_ms."""
        self.cron += list(range(first_ms, last_ms + 1, 10 * 60_000))

