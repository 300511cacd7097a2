#!/usr/bin/env python3
"""Conformance check: churnwatch against the independent App Store server, night after night.

    check.py --churnwatch PATH --database-url URL [--nights 8] [--keep DIR] [--verbose] [--apps N [--refuse-app K]]

Starts the independent server (server.py, in this process: one port for Production, one for
Sandbox), writes churnwatch's configuration (docs/architecture.md §4 variables only), runs `churnwatch
migrate` and `churnwatch import`, then for every night sets the simulated clock and runs
`churnwatch run --as-of T`, and compares what churnwatch wrote in PostgreSQL (read with psql,
CSV output) with the server's ground truth and the docs/contracts.md contracts:

  * segment of every subscriber == docs/contracts.md table applied to the server's truth;
  * auto_renew_disabled / auto_renew_enabled events == the observable flips the script made
    (none on the first night, none for an expiry, a refund or a billing failure); the first
    night writes no events at all;
  * live win-back entries (pending/claimed) == exactly one per subscriber whose segment has a
    campaign (docs/contracts.md campaign table, within its timing window), none for others;
  * every run exits 0 and its churnwatch.runs row is finished with status done;
  * the change feed (on, the default; the server files a V2 notification for every change and
    serves Get Notification History): the first night writes no events at all; flips are
    counted whoever wrote them; two more nights with windows that select nothing by date keep
    every notified subscriber in its true segment and poll the unnotified one once its period
    has ended (period_end_unnotified); churnwatch.notifications holds every notification the
    server issued once, none quarantined but the forgeries;
  * refund requests (CONSUMPTION_REQUEST, then REFUND or REFUND_DECLINED): the check writes the
    app's churnwatch.refund_consent rows and runs `churnwatch notifications sync --as-of T` every
    10 minutes around the requests as cron would (one day with no sync for more than 12 hours),
    with CHURNWATCH_REFUND_DECLINE_AFTER=0.5; every request whose customer consented is answered
    exactly once (202 in the server's record) before its deadline with the body of the contract's
    policy, nothing is sent for the others; churnwatch.refund_requests (state, policy branch,
    body, Apple's decision) and `churnwatch refunds --json` agree with the server's truth;
  * --apps N (default 1): N apps of one team on the same servers in one database, apps 2..N
    registered with `churnwatch apps add` and imported with `churnwatch import --app`; the checks
    above read the first app's rows (bundle_id), second_app.py checks the others' and one finished
    run per app and night; --refuse-app K: app K refused (401) on one night, exit 75, the rest done.

Prints one line per mismatch and closes with "N passed, N failed"; exits 1 on any mismatch.
Exit 2: could not run at all (server, psql or churnwatch unusable).
"""
from __future__ import annotations

import argparse
import base64
import csv
import datetime as dt
import io
import json
import os
import subprocess
import sys
import tempfile
import urllib.parse
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import server as srv  # noqa: E402

DAY = srv.DAY_MS
HOUR = 3_600_000
# Night 0 is 2026-12-01T02:00:00Z (--first-night moves it); night k is k days later. The
# server's clock runs 7 minutes ahead of --as-of, as in a real run where Apple answers a little
# after the run's as-of moment.
SERVER_LEAD = 7 * 60_000
T0 = int(dt.datetime(2026, 12, 1, 2, 0, tzinfo=dt.timezone.utc).timestamp() * 1000)
BUNDLE_ID = "com.Indie-Labs.churn-Conformance"
APP_APPLE_ID = 6_450_001_234

# How the scripted changes are made observable on the night they happen: every change is
# scheduled 6 hours before a night (between two nights), and each run is told
# `--stale-after 20h`, so every subscriber was last polled 24 h earlier and is due every night
# (stale) on top of the default windows. The default windows alone would, by design, see a
# mid-period auto-renew flip only near the period's start or end.
RUN_WINDOWS = ["--stale-after", "20h"]
# After the --nights nights, FEED_ONLY_NIGHTS more with windows that select nothing by date (and
# the default --stale-after): the change feed alone keeps state current (docs/contracts.md
# "Planning with the change feed"), the safety net polls where it is silent and should not be.
FEED_ONLY_NIGHTS = 2
ZERO_WINDOWS = ["--start-window", "0s", "--end-window", "0s", "--lapsed-window", "0s"]
# The reasons the change feed plans by (docs/contracts.md "Planning with the change feed").
FEED_REASONS = {"new", "failed", "stale", "billing_no_news", "period_end_unnotified"}
WINBACK_HORIZON = 60 * DAY   # docs/contracts.md: win-back / resubscribe prompts for 60 days after expiry
RETRY_LIMIT = 60 * DAY       # Apple retries at most 60 days
REFUND_DECLINE_AFTER = 0.5   # CHURNWATCH_REFUND_DECLINE_AFTER: DECLINE a delivered purchase from half its period on
# Send Consumption Information answers that are the injected transient faults (or the rate
# limit), not a refusal: churnwatch tries again.
TRANSIENT_CODES = {5000001, 4290000}

CAMPAIGN = {
    "will_not_renew": "save_offer", "price_increase_pending": "save_offer",
    "grace_period": "billing_fix", "billing_retry": "billing_fix",
    "churned_voluntary": "winback_offer", "churned_price_increase": "winback_offer", "churned_other": "winback_offer",
    "churned_billing": "resubscribe_prompt", "churned_product_unavailable": "resubscribe_prompt",
}


def night_ms(k: int) -> int:
    return T0 + k * DAY


def before_night(k: int, hours: float = 6) -> int:
    """A scripted change's moment: `hours` before night k."""
    return night_ms(k) - int(hours * HOUR)


def iso(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


# --------------------------------------------------------------------------------------------
# The scripted world
# --------------------------------------------------------------------------------------------
class Script:
    def __init__(self, bundle_id: str = BUNDLE_ID, app_apple_id: int = APP_APPLE_ID, seed: int = 7):
        self.world = srv.World(bundle_id, app_apple_id, seed)
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
        period = srv.PRODUCTS[product][1]
        expires = T0 + int(expires_in_days * DAY)
        start = expires - (periods_before + 1) * period
        s = srv.Subscription(otid=otid, customer=customer or otid, environment=environment, ownership=ownership,
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


def build_world(feed_night: int = 8) -> tuple[srv.World, Script]:
    """The scripted world. `feed_night` is the first of the FEED_ONLY_NIGHTS nights run with
    windows that select nothing by date (the change feed alone keeps state current)."""
    sc = Script()
    M, Y, B, P = "com.indie.premium.monthly", "com.indie.premium.yearly", "com.indie.basic.monthly", "com.indie.pro.monthly"
    wb = ["winback.été.50", "winback-basic-1"]
    # -- stays active; renewals during the check ("a renewal each month")
    sc.sub("active-monthly", M, 10, periods_before=3)
    sc.sub("active-renews-n3", M, 2.5, periods_before=1)
    sc.sub("active-renews-n6", M, 5.5)
    sc.sub("active-yearly", Y, 200, periods_before=1)
    sc.sub("active-yearly-renews-n2", Y, 1.5, periods_before=2)
    sc.sub("active-basic", B, 7.25, periods_before=5, customer_ref='Müller, Anna "Ø"')
    sc.sub("active-offer7", M, 12, offer=(7, "été-2026-специальное", "PAY_AS_YOU_GO"))  # an offerType Apple hasn't invented
    sc.sub("active-no-token", M, 14, token=False)
    # -- one customer, two subscriptions in two groups: the status answer holds both
    multi = sc.sub("multi-premium-off-n2", M, 9, periods_before=2)
    sc.sub("multi-pro-active", P, 4.5, periods_before=2, customer=multi)
    sc.at(2, multi, "auto_renew_off")
    # -- more than 20 transactions (history paging: 2 and 3 pages)
    sc.sub("long-history-renews", M, 3.5, periods_before=31)
    long2 = sc.sub("long-history-off-n3", M, 11, periods_before=24)
    sc.at(3, long2, "auto_renew_off")
    # -- trial, auto-renew already off at the first poll, expires on night 7
    sc.sub("trial-off-expires-n7", M, 6.5, auto_renew=0, offer=(1, None, "FREE_TRIAL"), winback_ids=wb)
    # -- saves: off then back on
    s1 = sc.sub("save-monthly", M, 15, periods_before=1)
    sc.at(2, s1, "auto_renew_off")
    sc.at(4, s1, "auto_renew_on")
    s2 = sc.sub("save-yearly", Y, 100)
    sc.at(1, s2, "auto_renew_off")
    sc.at(5, s2, "auto_renew_on")
    s3 = sc.sub("off-stays-off", M, 20)
    sc.at(3, s3, "auto_renew_off")
    # -- off then expired (intent 1)
    e1 = sc.sub("off-n1-expires-n4", M, 3.5, periods_before=2, winback_ids=wb)
    sc.at(1, e1, "auto_renew_off")
    e2 = sc.sub("off-n2-expires-n3-yearly", Y, 2.5, periods_before=1)
    sc.at(2, e2, "auto_renew_off")
    e3 = sc.sub("off-and-expired-between-polls", M, 3.9 - 0, periods_before=1)  # expires 3.9 d after night 0
    sc.at(4, e3, "auto_renew_off", hours=12)  # off at 3.5 d, expiry at 3.9 d: only `expired` is observable
    # -- billing
    g1 = sc.sub("grace-recovers-n5", M, 1.5, periods_before=2)
    sc.at(1, g1, "billing_fails", grace_days=16, recover_at=T0 + int(4.5 * DAY))
    g2 = sc.sub("grace-expires-retry-gives-up-n6", M, 0.5, periods_before=4)
    sc.at(0, g2, "billing_fails", hours=30, grace_days=3, give_up_at=T0 + int(5.5 * DAY))
    r1 = sc.sub("retry-no-grace", M, 1.5, periods_before=1)
    sc.at(1, r1, "billing_fails")
    r2 = sc.sub("retry-no-grace-recovers-n6", M, 2.5, periods_before=1)
    sc.at(2, r2, "billing_fails", recover_at=T0 + int(5.2 * DAY))
    g3 = sc.sub("yearly-grace", Y, 3.5, periods_before=1)
    sc.at(3, g3, "billing_fails", grace_days=6)
    r3 = sc.sub("in-retry-before-first-poll", M, -3, periods_before=2)
    sc.at(0, r3, "billing_fails", hours=24 * 4)
    # -- refunds
    f1 = sc.sub("refund-n2", M, 20, periods_before=1)
    sc.at(2, f1, "refund")
    f2 = sc.sub("refund-n2-reversed-n4", M, 25)
    sc.at(2, f2, "refund", auto_renew_off=False)
    sc.at(4, f2, "refund_reversed")
    f3 = sc.sub("refund-yearly-reason0-n5", Y, 300)
    sc.at(5, f3, "refund", reason=0)
    # -- plan changes
    d1 = sc.sub("downgrade-n2-cancelled-n4", Y, 150)
    sc.at(2, d1, "downgrade", product=B)
    sc.at(4, d1, "cancel_downgrade")
    d2 = sc.sub("downgrade-n1-applies-n4", M, 3.5, periods_before=1)
    sc.at(1, d2, "downgrade", product=B)
    # -- price increases
    p1 = sc.sub("price-increase-n1-accepted-n3", M, 20)
    sc.at(1, p1, "price_increase")
    sc.at(3, p1, "price_consent")
    p2 = sc.sub("price-increase-expires-n3", M, 2.5, periods_before=1, winback_ids=wb[1:])
    sc.at(0, p2, "price_increase", hours=30)
    p3 = sc.sub("price-increase-yearly-n4", Y, 100)
    sc.at(4, p3, "price_increase")
    # -- product not for sale
    n1 = sc.sub("not-for-sale-expires-n4", M, 3.5, periods_before=1)
    sc.at(1, n1, "not_for_sale")
    # -- family sharing
    sc.sub("family-member", M, 4.5, periods_before=1, ownership="FAMILY_SHARED", token=False)
    fm2 = sc.sub("family-member-revoked-n3", M, 18, ownership="FAMILY_SHARED")
    sc.at(3, fm2, "refund", reason=0, revocation_type="FAMILY_REVOKE")
    # -- sandbox
    sb1 = sc.sub("sandbox-off-n4", M, 2.5, environment="Sandbox")
    sc.at(4, sb1, "auto_renew_off")
    sc.sub("sandbox-registered-as-production", M, 8, environment="Sandbox", import_env="Production")
    # -- churned before the first night
    sc.sub("churned-10-days-ago", M, -10, periods_before=3, auto_renew=0, winback_ids=wb)
    sc.sub("churned-90-days-ago", M, -90, periods_before=1, auto_renew=0)
    resub = sc.sub("churned-5-days-ago-resubscribes-n3", M, -5, periods_before=1, auto_renew=0)
    sc.at(3, resub, "resubscribe")
    wbr = sc.sub("churned-20-days-ago-winback-offer-n5", M, -20, auto_renew=0, winback_ids=wb)
    sc.at(5, wbr, "resubscribe", offer=(4, "winback.été.50", "FREE_TRIAL"))
    # -- the customer of active-monthly also buys a consumable and a non-consumable (history only)
    first = sc.rows[0]["original_transaction_id"]
    sc.at(0, first, "buy_one_off", hours=40, product="com.indie.coins.100", type="Consumable")
    sc.at(3, first, "buy_one_off", product="com.indie.lifetime.theme", type="Non-Consumable")
    lh = [o for o, n in sc.names.items() if n == "long-history-renews"][0]
    sc.at(2, lh, "buy_one_off", product="com.indie.coins.500", type="Consumable")
    # -- immediate upgrade (a PURCHASE; the old transaction isUpgraded): not a churn
    u1 = sc.sub("upgrade-to-yearly-n3", M, 12, periods_before=2)
    sc.at(3, u1, "upgrade", product=Y)
    # -- the customer cancels during grace / during retry: Apple stops retrying, expired intent 1
    c1 = sc.sub("grace-then-cancelled-n3", M, 1.5, periods_before=1, winback_ids=wb)
    sc.at(1, c1, "billing_fails", grace_days=16)
    sc.at(3, c1, "auto_renew_off")
    c2 = sc.sub("retry-then-cancelled-n4", M, 0.5, periods_before=1)
    sc.at(0, c2, "billing_fails", hours=20)
    sc.at(4, c2, "auto_renew_off")
    # -- refunds that must end a live campaign
    rw = sc.sub("off-n1-refunded-n3", M, 20, periods_before=1)
    sc.at(1, rw, "auto_renew_off")
    sc.at(3, rw, "refund")
    rc = sc.sub("churned-8-days-ago-refunded-n2", M, -8, auto_renew=0)
    sc.at(2, rc, "refund")
    # -- expiration intent 5 (other) and 9 (a value Apple hasn't invented yet)
    i5 = sc.sub("expires-intent-5-n3", M, 2.5, periods_before=1)
    sc.at(1, i5, "expire_with_intent", intent=5)
    i9 = sc.sub("expires-intent-9-n4", M, 3.5, periods_before=1)
    sc.at(1, i9, "expire_with_intent", intent=9)
    # -- Apple's status lags: still 4 for a day after the grace end; docs/churn-model.md judges grace by its date
    gl = sc.sub("grace-status-lags-n3", M, 0.5, periods_before=1)
    sc.at(0, gl, "billing_fails", hours=20, grace_days=2)
    sc.world.subs[gl].status_lag_ms = DAY
    # -- price increase pending, then auto-renew off: one save_offer episode
    pa = sc.sub("price-increase-n1-off-n2", M, 20, periods_before=1)
    sc.at(1, pa, "price_increase")
    sc.at(2, pa, "auto_renew_off")
    # -- a family member whose organizer turns auto-renew off (no campaign: docs/churn-model.md §5)
    fo = sc.sub("family-member-off-n2", M, 20, ownership="FAMILY_SHARED")
    sc.at(2, fo, "auto_renew_off")
    # -- an offer Apple hasn't invented at the next renewal (renewal info offerType 7)
    o7 = [o for o, n in sc.names.items() if n == "active-offer7"][0]
    sc.world.subs[o7].renewal_offer = (7, "été-2026-специальное")
    # -- one customer, a purchased and a family-shared subscription in the same group
    fam_owner = sc.sub("same-group-purchased-off-n3", M, 16, periods_before=1)
    sc.sub("same-group-family-shared", Y, 90, ownership="FAMILY_SHARED", customer=fam_owner)
    sc.at(3, fam_owner, "auto_renew_off")
    # -- night 4's answer is forged (untrusted chain) just when auto-renew goes off: churnwatch must
    #    keep the last verified state (docs/contracts.md), and see the change on night 5
    fg = sc.sub("forged-answer-n4-off-n4", M, 22, periods_before=1)
    sc.at(4, fg, "auto_renew_off")
    sc.forged = {4: {fg}}
    # -- legacy verifyReceipt subscribers (a stored receipt; fact sheet §7)
    sc.sub("legacy-active-renews-n2", M, 1.5, periods_before=2, legacy=True)
    l2 = sc.sub("legacy-off-n2-on-n4", M, 12, legacy=True)
    sc.at(2, l2, "auto_renew_off")
    sc.at(4, l2, "auto_renew_on")
    l3 = sc.sub("legacy-grace-recovers-n5", M, 1.5, periods_before=1, legacy=True)
    sc.at(1, l3, "billing_fails", grace_days=16, recover_at=T0 + int(4.5 * DAY))
    l4 = sc.sub("legacy-grace-cancelled-n3", M, 0.5, periods_before=1, legacy=True)
    sc.at(1, l4, "billing_fails", hours=20, grace_days=16)
    sc.at(3, l4, "auto_renew_off")
    l5 = sc.sub("legacy-refund-n3", M, 18, periods_before=1, legacy=True)
    sc.at(3, l5, "refund")
    sc.sub("legacy-sandbox-receipt", M, 6.5, environment="Sandbox", import_env="Production", legacy=True)
    l7 = sc.sub("legacy-retry-gives-up-n5", M, 0.5, periods_before=1, legacy=True)
    sc.at(0, l7, "billing_fails", hours=20, give_up_at=T0 + int(4.5 * DAY))
    l8 = sc.sub("legacy-price-increase-n1", M, 25, legacy=True)
    sc.at(1, l8, "price_increase")
    l9 = sc.sub("legacy-off-n1-expires-n3", Y, 2.5, legacy=True)
    sc.at(1, l9, "auto_renew_off")
    l10 = sc.sub("legacy-downgrade-n2", Y, 40, legacy=True)
    sc.at(2, l10, "downgrade", product=M)
    l11 = sc.sub("legacy-grace-ends-retry-n4", M, 1.5, periods_before=1, legacy=True)
    sc.at(1, l11, "billing_fails", grace_days=2)
    sc.sub("legacy-same-customer-pro", P, 9, legacy=True, customer=l11)
    # -- saved, renewed, then off again in the new period: a new save_offer episode
    sv = sc.sub("save-n2-renews-n3-off-again-n5", M, 2.5, periods_before=1)
    sc.at(1, sv, "auto_renew_off")
    sc.at(2, sv, "auto_renew_on")
    sc.at(5, sv, "auto_renew_off")
    # -- expired 59.5 days before the first night: a win-back on night 0, its 60 days over by night 1
    sc.sub("churned-59.5-days-ago", M, -59.5, auto_renew=0, winback_ids=wb)
    # -- a price increase and a pending downgrade at once: price_increase_pending comes first
    pd = sc.sub("price-increase-and-downgrade-n2", Y, 60)
    sc.at(2, pd, "downgrade", product=B)
    sc.at(2, pd, "price_increase", hours=5)
    # -- churned from yearly, comes back on a monthly product
    cy = sc.sub("churned-yearly-back-monthly-n4", Y, -12, auto_renew=0)
    sc.at(4, cy, "resubscribe", product=M)
    # -- night 5 gets night 3's answer again (older signedDate: a lagging replica): stale, ignored
    sc.replayed = {5: {[o for o, n in sc.names.items() if n == "save-monthly"][0]: 3,
                       [o for o, n in sc.names.items() if n == "refund-n2-reversed-n4"][0]: 3}}
    # -- more legacy receipts: trial with auto-renew off, intents 3 and 4, refund reversed, upgrade
    lt = sc.sub("legacy-trial-off-expires-n5", M, 4.5, auto_renew=0, offer=(1, None, "FREE_TRIAL"), legacy=True)
    lp = sc.sub("legacy-price-increase-expires-n3", M, 2.5, periods_before=1, legacy=True)
    sc.at(0, lp, "price_increase", hours=30)
    ln = sc.sub("legacy-not-for-sale-n4", M, 3.5, periods_before=1, legacy=True)
    sc.at(1, ln, "not_for_sale")
    lr = sc.sub("legacy-refund-n2-reversed-n4", M, 21, legacy=True)
    sc.at(2, lr, "refund", auto_renew_off=False)
    sc.at(4, lr, "refund_reversed")
    lu = sc.sub("legacy-upgrade-n3", M, 14, periods_before=1, legacy=True)
    sc.at(3, lu, "upgrade", product=Y)
    sc.sub("legacy-family-member", M, 5.5, ownership="FAMILY_SHARED", legacy=True)
    lrc = sc.sub("legacy-retry-then-cancelled-n4", M, 0.5, periods_before=1, legacy=True)
    sc.at(0, lrc, "billing_fails", hours=20)
    sc.at(4, lrc, "auto_renew_off")
    # -- refunded while in grace (the billing_fix must go); upgraded while auto-renew was off
    gr = sc.sub("grace-n2-refunded-n4", M, 1.5, periods_before=1)
    sc.at(1, gr, "billing_fails", grace_days=16)
    sc.at(4, gr, "refund")
    uo = sc.sub("off-n1-upgrades-n3", M, 13, periods_before=1)
    sc.at(1, uo, "auto_renew_off")
    sc.at(3, uo, "upgrade", product=Y)
    # -- changed while the feed alone plans (nights F, F+1: windows that select nothing by date)
    F = feed_night
    fo1 = sc.sub("feed-off-nF", M, F + 15, periods_before=1)
    sc.at(F, fo1, "auto_renew_off")
    fo2 = sc.sub("feed-off-nF-on-nF1", Y, F + 120)
    sc.at(F, fo2, "auto_renew_off")
    sc.at(F + 1, fo2, "auto_renew_on")
    fo3 = sc.sub("feed-refund-nF1", M, F + 9, periods_before=1)
    sc.at(F + 1, fo3, "refund")
    fo4 = sc.sub("feed-grace-nF", M, F - 0.5, periods_before=1)
    sc.at(F - 1, fo4, "billing_fails", grace_days=16)
    sc.sub("feed-renews-nF", M, F - 0.3, periods_before=1)
    fo6 = sc.sub("feed-off-nF-1-expires-nF1", M, F + 0.5, periods_before=1)
    sc.at(F - 1, fo6, "auto_renew_off")
    fo7 = sc.sub("feed-price-increase-nF", M, F + 11)
    sc.at(F, fo7, "price_increase")
    fo8 = sc.sub("feed-downgrade-nF1", Y, F + 40)
    sc.at(F + 1, fo8, "downgrade", product=B)
    fo9 = sc.sub("feed-retry-recovers-nF1", M, F - 0.6, periods_before=1)
    sc.at(F - 1, fo9, "billing_fails", recover_at=T0 + int((F + 0.6) * DAY))
    # -- the safety net: Apple's notifications about it are lost from night F on (it turns
    #    auto-renew off, then expires unnotified): still active as far as the feed knows, so
    #    churnwatch must poll it once its period has ended (period_end_unnotified)
    sn = sc.sub("unnotified-off-nF-expires-nF1", M, F + 0.5, periods_before=1)
    sc.at(F, sn, "notifications_lost", hours=6.5)
    sc.at(F, sn, "auto_renew_off")
    # -- the same before the first night: the first sync establishes it from its last (old)
    #    DID_RENEW, still active; its poll must find it expired and, as a first poll would,
    #    write no event for what happened before that sync (docs/contracts.md, established_at)
    sb = sc.sub("unnotified-off-expired-before-first-sync", M, -2, periods_before=1, winback_ids=wb)
    sc.at(0, sb, "notifications_lost", hours=24 * 20)
    sc.at(0, sb, "auto_renew_off", hours=24 * 10)
    # -- refund requests (CONSUMPTION_REQUEST), answered by the syncs cron runs every 10 minutes
    #    around them (and the nightly run's own sync); a decision (REFUND / REFUND_DECLINED) later
    build_refund_requests(sc, M, Y)
    # -- an id neither environment knows
    sc.rows.append({"original_transaction_id": "420000999999999", "app_account_token": "", "customer_ref": "ghost",
                    "environment": "Production"})
    sc.names["420000999999999"] = "unknown-to-apple"
    sc.actions.sort(key=lambda a: a[0])
    return sc.world, sc


def clock(k: int, hhmm: str) -> int:
    """hh:mm UTC on the day night k starts (night k runs at 02:00 of that day)."""
    h, m = map(int, hhmm.split(":"))
    return night_ms(k) - 2 * HOUR + h * HOUR + m * 60_000


def build_refund_requests(sc: Script, M: str, Y: str):
    """Refund requests over four days, each on a subscriber of its own whose period is chosen so
    that the share of it elapsed at the request is as named (the policy declines at 0.5 and
    more when delivered: CHURNWATCH_REFUND_DECLINE_AFTER=0.5)."""
    def asking(name: str, product: str, at_ms: int, share: float, **kw) -> str:
        period = srv.PRODUCTS[product][1]
        expires_in_days = (at_ms + (1 - share) * period - T0) / DAY
        return sc.sub(name, product, expires_in_days, periods_before=kw.pop("periods_before", 1), **kw)

    # Dec 2, between nights 1 and 2: cron syncs 08:50-10:00 and 11:10-12:00.
    r1 = asking("refund-req-token-n1", M, clock(1, "09:03"), 0.2)
    sc.consent(r1, "token", True)  # delivery and sample left to churnwatch: DELIVERED, no trial on record
    sc.at_ms(clock(1, "09:03"), r1, "refund_request", reason="UNINTENDED_PURCHASE")
    sc.at_ms(clock(1, "15:00"), r1, "refund_decision", decision="REFUND")
    r2 = asking("refund-req-otid-declined-n1-again-n4", M, clock(1, "09:07"), 0.74)
    sc.consent(r2, "otid", True, sample=True)
    sc.at_ms(clock(1, "09:07"), r2, "refund_request", reason="UNSATISFIED_WITH_PURCHASE")
    sc.at_ms(clock(1, "21:30"), r2, "refund_decision", decision="REFUND_DECLINED")
    # the same customer asks again about the same transaction three days later; refunded this time
    sc.at_ms(clock(4, "10:00"), r2, "refund_request", reason="OTHER")
    sc.at_ms(clock(4, "16:00"), r2, "refund_decision", decision="REFUND")
    r3 = asking("refund-req-consent-refused-n1", Y, clock(1, "11:20"), 0.1)
    sc.consent(r3, "token", False)
    sc.at_ms(clock(1, "11:20"), r3, "refund_request", reason="LEGAL")
    sc.at_ms(clock(1, "18:00"), r3, "refund_decision", decision="REFUND")
    sc.every_10_minutes(clock(1, "08:50"), clock(1, "10:00"))
    sc.every_10_minutes(clock(1, "11:10"), clock(1, "12:00"))
    # Dec 3, between nights 2 and 3: cron syncs 14:30-15:40; the first answer meets a 5000001
    # and a 429 (Retry-After in epoch ms).
    r4 = asking("refund-req-no-consent-row-n2", M, clock(2, "14:44"), 0.5)
    sc.at_ms(clock(2, "14:44"), r4, "refund_request", reason="FULFILLMENT_ISSUE")
    sc.at_ms(clock(2, "20:00"), r4, "refund_decision", decision="REFUND_DECLINED")
    r5 = asking("refund-req-server-outage-n2", M, clock(2, "14:48"), 0.92)
    sc.consent(r5, "token", True, delivery="UNDELIVERED_SERVER_OUTAGE", sample=False)
    sc.at_ms(clock(2, "14:48"), r5, "refund_request", reason="FULFILLMENT_ISSUE")
    sc.at_ms(clock(2, "19:00"), r5, "refund_decision", decision="REFUND")
    r6 = asking("refund-req-otid-row-wins-n2", M, clock(2, "14:52"), 0.52)
    sc.consent(r6, "token", False)
    sc.consent(r6, "otid", True, sample=False)
    sc.at_ms(clock(2, "14:52"), r6, "refund_request", reason="UNSATISFIED_WITH_PURCHASE")
    sc.at_ms(clock(3, "01:00"), r6, "refund_decision", decision="REFUND_DECLINED")
    r7 = asking("refund-req-share-0.48-undecided-n2", M, clock(2, "14:56"), 0.48, periods_before=0)
    sc.consent(r7, "token", True, delivery="DELIVERED", sample=False)
    sc.at_ms(clock(2, "14:56"), r7, "refund_request", reason="OTHER")
    sc.every_10_minutes(clock(2, "14:30"), clock(2, "15:40"))
    sc.cron_faults[clock(2, "14:50")] = {"faults": {"consumption": [5000001]}, "force_429": {"consumption"}}
    # Dec 4, between nights 3 and 4: no sync from night 3 (02:00) to night 4 (02:00 the next
    # day): a request at 03:00 has passed its deadline (15:00) when churnwatch reads it.
    r8 = asking("refund-req-no-sync-for-12h-n3", M, clock(3, "03:00"), 0.3)
    sc.consent(r8, "token", True)
    sc.at_ms(clock(3, "03:00"), r8, "refund_request", reason="UNINTENDED_PURCHASE")
    sc.at_ms(clock(3, "22:00"), r8, "refund_decision", decision="REFUND_DECLINED")
    # Dec 5, between nights 4 and 5: cron syncs 09:50-11:00; a Sandbox customer (answered on the
    # Sandbox server), and a consent the app turns from refused to given (its upsert) before asking.
    r9 = asking("refund-req-sandbox-n4", M, clock(4, "10:05"), 0.6, environment="Sandbox")
    sc.consent(r9, "token", True)
    sc.at_ms(clock(4, "10:05"), r9, "refund_request", reason="UNINTENDED_PURCHASE")
    sc.at_ms(clock(4, "18:00"), r9, "refund_decision", decision="REFUND")
    r10 = asking("refund-req-consent-given-late-n4", Y, clock(4, "10:10"), 0.3)
    sc.consent(r10, "token", False)
    sc.consent(r10, "token", True, at_ms=clock(4, "09:00"))
    sc.at_ms(clock(4, "10:10"), r10, "refund_request", reason="LEGAL")
    sc.at_ms(clock(4, "23:00"), r10, "refund_decision", decision="REFUND_DECLINED")
    sc.every_10_minutes(clock(4, "09:50"), clock(4, "11:00"))
    sc.cron.sort()


# --------------------------------------------------------------------------------------------
# Expected values from the truth (docs/contracts.md)
# --------------------------------------------------------------------------------------------
def expected_segment(t: dict | None, now: int) -> str:
    if t is None:
        return "unknown"  # never polled successfully
    if t["revoked"] or t["status"] == 5:
        return "refunded"
    if t["status"] == 2:
        return {1: "churned_voluntary", 2: "churned_billing", 3: "churned_price_increase",
                4: "churned_product_unavailable"}.get(t["expirationIntent"], "churned_other")
    if t["status"] in (3, 4):
        grace = t["gracePeriodExpiresDate"]
        return "grace_period" if grace is not None and grace > now else "billing_retry"
    if t["status"] == 1:
        if t["autoRenewStatus"] == 0:
            return "will_not_renew"
        if t["priceIncreaseStatus"] == 0:
            return "price_increase_pending"
        if t["autoRenewProductId"] != t["productId"]:
            return "plan_change_pending"
        return "active"
    return "unknown"


def expected_campaign(t: dict | None, segment: str, now: int) -> str | None:
    campaign = CAMPAIGN.get(segment)
    if t is None or campaign is None:
        return None
    if t["ownership"] == "FAMILY_SHARED":
        # docs/contracts.md doesn't say; docs/churn-model.md §5 documents the choice: the organizer's
        # own subscription gets the campaign, family members none.
        return None
    if campaign in ("winback_offer", "resubscribe_prompt") and now - t["expiresDate"] > WINBACK_HORIZON:
        return None  # the 60-day window after expiry has closed
    if campaign == "billing_fix" and now - t["expiresDate"] > RETRY_LIMIT:
        return None
    if campaign == "save_offer" and t["expiresDate"] <= now:
        return None  # "now, until the period ends" (a period ending at the run's very moment, unnotified yet)
    return campaign


# --------------------------------------------------------------------------------------------
# Running things
# --------------------------------------------------------------------------------------------
def bundle_filter(bundle_id: str | None, conj: str = "WHERE") -> str:
    """` WHERE bundle_id = '...'` (or ` AND ...`) for one app's rows; empty for None."""
    return f" {conj} bundle_id = '{bundle_id}'" if bundle_id else ""


class Checker:
    def __init__(self, args):
        self.args = args
        self.passed = 0
        self.failed = 0
        # With --apps N > 1 the contract tables hold every app's rows (a bundle_id column): the
        # first app's checks read its rows alone. None: one app, the queries are as they were.
        self.app1_bundle: str | None = None
        self.repo = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

    def check(self, ok: bool, subject: str, night, expected, got):
        if ok:
            self.passed += 1
        else:
            self.failed += 1
            print(f"MISMATCH {subject} night {night}: expected {expected}, got {got}", flush=True)

    def last_words(self, r: subprocess.CompletedProcess) -> list[str] | str:
        """What a failed command said last: its last line; with several apps, each app's line
        (churnwatch says one per app that did not finish, then a summary)."""
        if not r.stderr.strip():
            return ""
        lines = r.stderr.strip().splitlines()
        if self.app1_bundle is None:
            return lines[-1:]
        return [line for line in lines if line.startswith("churnwatch: ")][-6:] or lines[-1:]

    def only_app1(self, conj: str = "WHERE") -> str:
        """The condition that keeps the first app's rows of a contract table (with --apps 1, nothing)."""
        return bundle_filter(self.app1_bundle, conj)

    def psql(self, sql: str) -> list[dict]:
        return self.psql_url(self.args.database_url, sql)

    def psql_url(self, url: str, sql: str) -> list[dict]:
        out = subprocess.run(["psql", url, "-X", "-q", "--csv", "-v", "ON_ERROR_STOP=1", "-c", sql],
                             capture_output=True, text=True)
        if out.returncode != 0:
            raise RuntimeError(f"psql failed: {out.stderr.strip()}")
        return list(csv.DictReader(io.StringIO(out.stdout)))

    def churnwatch(self, args: list[str], env: dict) -> subprocess.CompletedProcess:
        return subprocess.run([self.args.churnwatch] + args, env=env, cwd=self.repo, capture_output=True, text=True,
                              timeout=600)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description="churnwatch against the independent App Store server")
    ap.add_argument("--churnwatch", required=True, help="path of the churnwatch binary")
    ap.add_argument("--database-url", required=True, help="an empty PostgreSQL database (libpq URL)")
    ap.add_argument("--nights", type=int, default=8, help="nights to run (at least 6)")
    ap.add_argument("--keep", help="directory for keys, certificates, env and logs (default: a temp dir)")
    ap.add_argument("--verbose", action="store_true", help="print churnwatch's summary of each night")
    ap.add_argument("--default-windows", action="store_true",
                    help="run with churnwatch's default windows only (changes outside them are, by design, seen later)")
    ap.add_argument("--first-night", help="night 0's moment, ISO 8601 (default 2026-12-01T02:00:00Z): every "
                    "simulated moment moves with it; churnwatch's answers must not depend on the machine's clock")
    ap.add_argument("--apps", type=int, default=1,
                    help="apps in the one database (default 1): app k >= 2 is second_app.py's, registered with "
                    "`churnwatch apps add` and imported with `churnwatch import --app`")
    ap.add_argument("--refuse-app", type=int, metavar="K",
                    help="on one night the server answers 401 to every request of app K (2..--apps): "
                    "churnwatch exits 75, the other apps' runs done; app K resumes the next night")
    args = ap.parse_args(argv)
    global RUN_WINDOWS, T0
    if args.first_night:
        T0 = int(dt.datetime.fromisoformat(args.first_night.replace("Z", "+00:00")).timestamp() * 1000)
    if args.default_windows:
        RUN_WINDOWS = []
    if args.nights < 6:
        ap.error("--nights must be at least 6")
    if args.apps < 1:
        ap.error("--apps must be at least 1")
    if args.refuse_app is not None and not 2 <= args.refuse_app <= args.apps:
        ap.error(f"--refuse-app takes an app 2..--apps ({args.apps}): the first app's checks need its nights")
    workdir = args.keep or tempfile.mkdtemp(prefix="indie-appstore-")
    os.makedirs(workdir, exist_ok=True)
    server_log = open(os.path.join(workdir, "server.log"), "a", encoding="utf-8")

    def log(line: str):
        server_log.write(line + "\n")
        server_log.flush()

    world, script = build_world(feed_night=args.nights)
    others = []
    if args.apps > 1:
        import second_app
        second_app.bind(sys.modules[__name__])
        others = [second_app.SecondApp(k, feed_night=args.nights) for k in range(2, args.apps + 1)]
    envs = srv.Environments(workdir, world, log=log, others=[o.world for o in others])
    ck = Checker(args)
    if others:
        ck.app1_bundle = BUNDLE_ID
    status = 2
    try:
        status = run_nights(ck, args, workdir, world, script, envs, others)
        return status
    except Exception as e:  # noqa: BLE001
        print(f"ERROR: {e}", flush=True)
        print(f"{ck.passed} passed, {ck.failed + 1} failed")
        return 2
    finally:
        envs.stop()
        for server in (envs.production, envs.sandbox):
            if server.rejections:
                print(f"note: {server.environment} server rejected {len(server.rejections)} request JWTs, "
                      f"first: {server.rejections[0]}")
            for bid, n in server.refusals.items():
                print(f"note: {server.environment} server refused {n} requests of {bid} (--refuse-app)")
        server_log.close()
        if not args.keep:
            if status == 0:
                import shutil
                shutil.rmtree(workdir, ignore_errors=True)
            else:
                print(f"logs kept in {workdir} (server.log, churnwatch.log)")


def run_nights(ck: Checker, args, workdir: str, world: srv.World, script: Script, envs: srv.Environments,
               others: list = ()) -> int:
    env = envs.env()
    env["DATABASE_URL"] = args.database_url
    # churnwatch's limiter at Apple's production rates; the server enforces the same (sandbox 10 %).
    env.update({"APPSTORE_STATUS_RATE": "50", "APPSTORE_HISTORY_RATE": "50", "APPSTORE_TRANSACTION_RATE": "50"})
    # Refund requests are answered (the default), with DECLINE for a delivered purchase of which
    # at least half the period had passed when the customer asked (docs/contracts.md).
    env["CHURNWATCH_REFUND_DECLINE_AFTER"] = str(REFUND_DECLINE_AFTER)
    with open(os.path.join(workdir, "churnwatch.env"), "w") as f:
        for k, v in env.items():
            f.write(f"{k}={v}\n")
    csv_path = os.path.join(workdir, "subscriptions.csv")
    with open(csv_path, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=["original_transaction_id", "app_account_token", "customer_ref", "environment"])
        w.writeheader()
        w.writerows(r_ for r_ in script.rows if "receipt_data" not in r_)
    # The legacy subscribers come with their stored receipts (docs/contracts.md: the optional 5th column).
    legacy_path = os.path.join(workdir, "subscriptions-with-receipts.csv")
    with open(legacy_path, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=["original_transaction_id", "app_account_token", "customer_ref", "environment",
                                          "receipt_data"])
        w.writeheader()
        w.writerows(r_ for r_ in script.rows if "receipt_data" in r_)
    print(f"independent App Store server: production {envs.production.url}, sandbox {envs.sandbox.url}; "
          f"{len(script.rows)} subscribers, {args.nights} nights; files in {workdir}", flush=True)

    for cmd in (["migrate"], ["import", csv_path], ["import", legacy_path]):
        r = ck.churnwatch(cmd, env)
        ck.check(r.returncode == 0, f"churnwatch {cmd[0]}", "-", "exit 0", f"exit {r.returncode}: {r.stderr.strip()[-500:]}")
        if r.returncode != 0:
            raise RuntimeError(f"churnwatch {cmd[0]} failed")
        if cmd == ["migrate"]:
            for o in others:  # `churnwatch apps add`: the further apps, before any import
                o.register(ck, env)
    for o in others:  # `churnwatch import --app`
        o.import_subscribers(ck, env, workdir)
    if others:
        import second_app
        second_app.check_apps_table(ck, BUNDLE_ID, APP_APPLE_ID, others, "-")

    names = script.names
    otids = [row["original_transaction_id"] for row in script.rows]
    actions = list(script.actions)
    # The moments (--as-of) of every churnwatch sync on this database: cron's and the nights'.
    invocations: list[int] = []
    consents = Consents(ck, world, script)
    consents.write_until(night_ms(0) - DAY)  # the app's rows so far, right after the import
    previous_truth: dict | None = None
    # What churnwatch could know of each subscription after the last night (the truth of its
    # last verified observation), and that observation as (status, autoRenewStatus).
    known: dict[str, dict] = {}
    last_obs: dict[str, tuple] = {}
    unnotified_sub = next(o for o, n in names.items() if n == "unnotified-off-nF-expires-nF1")
    run_log = open(os.path.join(workdir, "churnwatch.log"), "a", encoding="utf-8")
    for k in range(args.nights + FEED_ONLY_NIGHTS):
        now = night_ms(k)
        feed_only = k >= args.nights
        windows = ZERO_WINDOWS if feed_only else RUN_WINDOWS
        forged = script.forged.get(k, set())

        def mark_forged(until_ms: int):
            # The night's notifications about a forged subscription are forged too (served signed by
            # the untrusted chain): quarantined, they must change nothing either.
            for n_ in world.notifications:
                if n_.otid in forged and night_ms(k - 1) < n_.signed_ms <= until_ms:
                    n_.forged = True
        # Events are the night's whoever wrote them: cron's syncs since the last night, and the run.
        events_before = int(ck.psql("SELECT coalesce(max(id), 0) AS n FROM churnwatch.churn_events")[0]["n"])
        # cron's `churnwatch notifications sync` (every 10 minutes around the refund requests):
        # the world moves to the sync's moment (the server's clock minutes ahead, as at night),
        # the app's consent rows written by then are in the database, and each sync answers the
        # open requests it read.
        for tick in [t for t in script.cron if night_ms(k - 1) < t < now]:
            while actions and actions[0][0] <= tick + SERVER_LEAD:
                at, otid, action, kw = actions.pop(0)
                world.act(otid, action, at, **kw)
            world.advance(tick + SERVER_LEAD)
            mark_forged(tick + SERVER_LEAD)
            for o in others:
                o.advance_to(tick + SERVER_LEAD)
            consents.write_until(tick)
            saved = (envs.production.faults, envs.production.force_429)
            injected = script.cron_faults.get(tick, {})
            envs.production.faults = {k_: list(v) for k_, v in injected.get("faults", {}).items()}
            envs.production.force_429 = set(injected.get("force_429", set()))
            envs.production.log(f"=== cron {iso(tick)}")
            r = ck.churnwatch(["notifications", "sync", "--as-of", iso(tick)], env)
            envs.production.faults, envs.production.force_429 = saved
            invocations.append(tick)
            run_log.write(f"=== cron notifications sync {iso(tick)} exit {r.returncode}\n{r.stdout}\n{r.stderr}\n")
            ck.check(r.returncode == 0, f"churnwatch notifications sync {iso(tick)}", k, "exit 0",
                     f"exit {r.returncode}: {ck.last_words(r)}")
        while actions and actions[0][0] <= now:
            at, otid, action, kw = actions.pop(0)
            world.act(otid, action, at, **kw)
        mark_forged(now)
        # The notifications churnwatch's sync gets tonight (Production: the environment it syncs;
        # signed before the run's moment, its endDate), per subscription, in order.
        notes: dict[str, list] = {}
        for n_ in sorted(world.notifications, key=lambda n_: (n_.signed_ms, n_.seq)):
            if (n_.environment == "Production" and not n_.forged and n_.status is not None
                    and (k == 0 or night_ms(k - 1) <= n_.signed_ms) and n_.signed_ms < now):
                notes.setdefault(n_.otid, []).append((n_.status, n_.auto_renew))
        if feed_only:
            # What the feed can tell at the run's moment: the truth just before it (a change at
            # the very moment is filed then, and read by the next night's sync).
            world.advance(now - 1)
            feed_truth = world.truth()["subscriptions"]
        world.advance(now + SERVER_LEAD)
        real_truth = world.truth()["subscriptions"]
        envs.production.forged = set(forged)
        replayed = script.replayed.get(k, {})
        envs.production.replay = {o: night_ms(n) + SERVER_LEAD for o, n in replayed.items()}

        def knowable(o, t):
            # A forged or stale answer changes nothing, so the last verified truth stands.
            if (o in forged or o in replayed) and previous_truth:
                return previous_truth[o]
            # A change Apple never notified, while the feed alone plans: churnwatch learns it when
            # the period it knows has ended (period_end_unnotified), not before.
            if feed_only and t is not None and not t["notified"] and o in known:
                kn = known[o]
                if not (kn["status"] == 1 and kn["expiresDate"] + HOUR < now):
                    return kn
                return t  # polled: the server's answer
            return feed_truth.get(o) if feed_only else t
        truth = {o: knowable(o, t) for o, t in real_truth.items()}
        # Transient, retryable failures churnwatch must ride out (docs/architecture.md §3: retryable errors back off).
        # GeneralInternal (5000000, "try again later") on the one subscriber that changes that night.
        trial = next(o for o, n in names.items() if n == "trial-off-expires-n7")
        # With the change feed, churnwatch reads the transaction history mostly on the first night:
        # its faults are there too, so they still fire.
        faults = {0: {"history": [5000001, 4040006]}, 2: {"status": [5000001]}, 3: {"history": [5000001]}, 4: {"status": [4040002], "history": [4040006]},
                  5: {"receipt": [21005]}, 6: {"status": [5000001, 5000001], "receipt": [21100]},
                  7: {f"status:{trial}": [5000000]}}
        envs.production.faults = {k_: list(v) for k_, v in faults.get(k, {}).items()}
        if k == 2:
            envs.production.force_429.add("history")
        if k == 5:  # the change feed too: one 429 (Retry-After in epoch ms), then one retryable 5000001
            envs.production.force_429.add("notification")
            envs.production.faults["notification"] = [5000001]
        # One 429 (Retry-After in epoch ms) on the first status call of every second night.
        if k % 2 == 1:
            envs.production.force_429.add("status")
        # The further apps: their world at tonight's moment; the one --refuse-app names refused tonight.
        refused = next((o for o in others if o.k == args.refuse_app and k == o.refuse_night), None)
        for o in others:
            o.before_run(k, now, feed_only)
        refused_before = refused.snapshot(ck) if refused else None  # what of the refused app must not change tonight
        runs_before = int(ck.psql("SELECT coalesce(max(id), 0) AS n FROM churnwatch.runs")[0]["n"]) if others else 0
        if refused:
            envs.refuse({refused.bundle_id})

        envs.production.log(f"=== night {k} {iso(now)}")
        consents.write_until(now)
        r = ck.churnwatch(["run", "--as-of", iso(now), "--log-format", "json"] + windows, env)
        envs.refuse(())
        invocations.append(now)
        run_log.write(f"=== night {k} {iso(now)} {' '.join(windows)} exit {r.returncode}\n{r.stdout}\n{r.stderr}\n")
        run_log.flush()
        for o in forged:
            q = ck.psql(f"SELECT count(*) AS n FROM churnwatch.quarantine WHERE original_transaction_id = '{o}'")
            ck.check(int(q[0]["n"]) > 0, f"{names[o]} ({o}) forged answer quarantined", k, "quarantined", "not quarantined")
        # An app refused tonight stops its run alone: churnwatch exits 75 (partial), the rest is done.
        want_exit = 75 if refused else 0
        ck.check(r.returncode == want_exit, "churnwatch run", k, f"exit {want_exit}" + (f" ({refused.bundle_id} refused)" if refused else ""),
                 f"exit {r.returncode}: {ck.last_words(r)}")
        if refused:
            print(f"night {k}: {refused.bundle_id} refused (401): churnwatch exit {r.returncode}, last line: "
                  f"{(r.stderr.strip().splitlines() or [''])[-1][:300]}", flush=True)
        if args.verbose:
            print(f"--- night {k} {iso(now)}\n{r.stdout.strip()}", flush=True)
        runs = ck.psql(f"SELECT id, status, finished_at, as_of, failed, counts FROM churnwatch.runs{ck.only_app1()} ORDER BY id DESC LIMIT 1")
        run = runs[0] if runs else {}
        ck.check(bool(run) and run.get("status") == "done" and bool(run.get("finished_at")), "churnwatch.runs", k,
                 "a finished run with status done", run or "no run row")
        # Only the id Apple doesn't know and the forged answers may fail; transient faults must not.
        # (With the feed alone planning, the unknown id is polled again only if its failure makes it due.)
        expected_failed = sum(1 for o in otids if o not in world.subs) + len(forged)
        failures = ck.psql(f"SELECT original_transaction_id, outcome FROM churnwatch.run_items WHERE run_id = {int(run.get('id', 0))} AND status = 'failed'")
        failed_ok = (int(run.get("failed", -1)) == expected_failed if not feed_only else
                     all(f["original_transaction_id"] not in world.subs for f in failures))
        ck.check(failed_ok, "churnwatch.runs.failed", k, expected_failed if not feed_only else "only the unknown id",
                 f"{run.get('failed')}: " + "; ".join(f"{names.get(f['original_transaction_id'], '?')}: {f['outcome']}" for f in failures))
        run_id = run.get("id", "0")
        if feed_only:
            try:
                due = json.loads(run.get("counts") or "{}").get("due_by_reason")
            except ValueError:
                due = run.get("counts")
            print(f"night {k} (windows select nothing by date): due by reason {due}", flush=True)
            # Planned by the feed: polled only where it is silent and should not be (docs/contracts.md).
            reasons = ck.psql(f"SELECT DISTINCT reason FROM churnwatch.run_items WHERE run_id = {int(run.get('id', 0))}")
            other = sorted({r_["reason"] for r_ in reasons} - FEED_REASONS)
            ck.check(not other, "planned by the change feed", k, "no date-window reasons", other)

        # Segments
        got_seg = {r_["original_transaction_id"]: r_["segment"]
                   for r_ in ck.psql(f"SELECT original_transaction_id, segment FROM churnwatch.subscription_segments{ck.only_app1()}")}
        expected_seg = {o: expected_segment(truth.get(o), now) for o in otids}
        for o in otids:
            real = expected_segment(real_truth.get(o), now)
            if real != expected_seg[o] and got_seg.get(o) == real and o not in forged and o not in replayed \
                    and not real_truth[o]["notified"]:
                # An unnotified change churnwatch found before the period ended (polled for another
                # reason): not wrong, only earlier than the safety net promises.
                print(f"note: {names[o]} ({o}) night {k}: unnotified change already seen ({real})", flush=True)
                truth[o] = real_truth[o]
                expected_seg[o] = real
            ck.check(got_seg.get(o) == expected_seg[o], f"{names[o]} ({o}) segment", k, expected_seg[o], got_seg.get(o))

        # Auto-renew flip events, from the feed and the polls alike (churn_events.run_id is NULL
        # for the feed's): a flip between two consecutive observations churnwatch made of an
        # active subscription (its last one, tonight's notifications, tonight's poll); none on
        # the first night, none at all on the first night (the first sync establishes quietly).
        events = ck.psql(f"SELECT original_transaction_id, event, run_id FROM churnwatch.churn_events WHERE id > {events_before}"
                         + ck.only_app1("AND"))
        if k == 0:
            ck.check(not events, "first night (feed and polls)", k, "no events",
                     f"{len(events)} events: " + ", ".join(f"{names.get(e['original_transaction_id'], e['original_transaction_id'])}:{e['event']}" for e in events[:8]))
        for o in otids:
            t = truth.get(o)
            if t is None:
                continue
            seq = ([last_obs[o]] if o in last_obs else []) + notes.get(o, []) + [(t["status"], t["autoRenewStatus"])]
            exp = []
            if k > 0:
                for a, b in zip(seq, seq[1:]):
                    if a[0] == 1 and b[0] == 1 and a[1] != b[1]:
                        exp.append("auto_renew_enabled" if b[1] == 1 else "auto_renew_disabled")
            last_obs[o] = seq[-1]
            got = sorted(e["event"] for e in events if e["original_transaction_id"] == o
                         and e["event"] in ("auto_renew_disabled", "auto_renew_enabled"))
            ck.check(got == sorted(exp), f"{names[o]} ({o}) auto-renew events", k, sorted(exp) or "none", got or "none")

        # The app's identifiers are carried into the segments table unchanged
        if k == 0:
            ident = {r_["original_transaction_id"]: r_ for r_ in ck.psql(
                "SELECT original_transaction_id, app_account_token, customer_ref FROM churnwatch.subscription_segments"
                + ck.only_app1())}
            for row in script.rows:
                got = ident.get(row["original_transaction_id"], {})
                ck.check((got.get("app_account_token", ""), got.get("customer_ref")) == (row["app_account_token"], row["customer_ref"]),
                         f"{names[row['original_transaction_id']]} identifiers", k,
                         (row["app_account_token"], row["customer_ref"]), (got.get("app_account_token"), got.get("customer_ref")))

        # Live win-back entries
        live = ck.psql("SELECT original_transaction_id, campaign, status FROM churnwatch.winback_queue "
                       "WHERE status IN ('pending', 'claimed')" + ck.only_app1("AND") + " ORDER BY id")
        for o in otids:
            c = expected_campaign(truth.get(o), expected_seg[o], now)
            got = [e["campaign"] for e in live if e["original_transaction_id"] == o]
            ck.check(got == ([c] if c else []), f"{names[o]} ({o}) live win-back ({expected_seg[o]})", k,
                     c or "none", ", ".join(got) or "none")

        # The safety net: the subscription whose changes Apple never notified is polled once the
        # period churnwatch knows has ended, for that reason.
        if feed_only and truth.get(unnotified_sub) is real_truth.get(unnotified_sub) and \
                known.get(unnotified_sub, {}).get("status") == 1 and known[unnotified_sub]["expiresDate"] + HOUR < now:
            item = ck.psql(f"SELECT reason, status FROM churnwatch.run_items WHERE run_id = {int(run_id)} "
                           f"AND original_transaction_id = '{unnotified_sub}'")
            ck.check(bool(item) and item[0]["reason"] == "period_end_unnotified" and item[0]["status"] == "done",
                     f"{names[unnotified_sub]} ({unnotified_sub}) polled by the safety net", k,
                     "period_end_unnotified, done", item[0] if item else "not planned")
        previous_truth = truth
        known = {o: t for o, t in truth.items() if t is not None}
        # The further apps' nights (second_app.py): the apps, runs per app, segments, flips, win-back.
        if others:
            second_app.check_apps_table(ck, BUNDLE_ID, APP_APPLE_ID, others, k)
            second_app.check_night_runs(ck, [BUNDLE_ID] + [o.bundle_id for o in others], k, now, runs_before,
                                        refused.bundle_id if refused else None)
        for o in others:
            o.after_run(ck, k, now, feed_only, refused_before if refused is o else None, runs_before)

        if k == 3:
            # The same night again (an operator re-runs it): exit 0, nothing new (every app's rows).
            before = ck.psql("SELECT count(*) AS n FROM churnwatch.churn_events")[0]["n"]
            live_before = ck.psql("SELECT count(*) AS n FROM churnwatch.winback_queue WHERE status IN ('pending','claimed')")[0]["n"]
            notes_before = ck.psql("SELECT count(*) AS n FROM churnwatch.notifications")[0]["n"]
            r = ck.churnwatch(["run", "--as-of", iso(now), "--log-format", "json"] + RUN_WINDOWS, env)
            invocations.append(now)
            run_log.write(f"=== night {k} again {iso(now)} exit {r.returncode}\n{r.stdout}\n{r.stderr}\n")
            ck.check(r.returncode == 0, "churnwatch run (re-run)", k, "exit 0", f"exit {r.returncode}")
            after = ck.psql("SELECT count(*) AS n FROM churnwatch.churn_events")[0]["n"]
            live_after = ck.psql("SELECT count(*) AS n FROM churnwatch.winback_queue WHERE status IN ('pending','claimed')")[0]["n"]
            notes_after = ck.psql("SELECT count(*) AS n FROM churnwatch.notifications")[0]["n"]
            ck.check((before, live_before, notes_before) == (after, live_after, notes_after), "re-run of the same night", k,
                     f"{before} events, {live_before} live entries, {notes_before} notifications",
                     f"{after} events, {live_after} live entries, {notes_after} notifications")

    last = args.nights + FEED_ONLY_NIGHTS - 1
    check_feed_table(ck, args.database_url, world, script, "Production", night_ms(0) - 179 * DAY, night_ms(last), "change feed",
                     bundle_id=ck.app1_bundle)
    for o in others:
        o.finish(ck, args.database_url, world, last)
    check_refunds(ck, args, world, script, consents, invocations, night_ms(last))
    answers = len(world.consumption_puts)
    sandbox_app(ck, args, workdir, world, script, envs, first_night=last + 1)
    https_app(ck, args, workdir, world, script, envs, night=last + 3)
    # Their databases hold no consent and read every request long after its deadline.
    ck.check(len(world.consumption_puts) == answers, "refund answers from the sandbox and HTTPS deployments", "-",
             "none", [f"{p['transactionId']} {p['status']}" for p in world.consumption_puts[answers:]][:5])

    calls = {env_.environment: dict(env_.calls) for env_ in (envs.production, envs.sandbox)}
    print(f"server calls: {calls}", flush=True)
    for o in others:
        print(f"server calls of {o.bundle_id}: "
              f"{ {env_.environment: dict(env_.app_calls[o.bundle_id]) for env_ in (envs.production, envs.sandbox)} }", flush=True)
    print(f"{ck.passed} passed, {ck.failed} failed", flush=True)
    return 0 if ck.failed == 0 else 1


class Consents:
    """The app's side of refund requests: its churnwatch.refund_consent rows, written with the
    contract's upsert when their moment comes, and which row churnwatch reads at a moment."""

    def __init__(self, ck: Checker, world: srv.World, script: Script):
        self.ck, self.world = ck, world
        # Rows with no moment first (written right after the import), then by their moment.
        self.pending = sorted(script.consents, key=lambda c: (c["at"] is not None, c["at"] or 0))
        self.written: list[tuple[int, dict]] = []  # (the moment from which it is on record, row)

    def write_until(self, moment_ms: int):
        while self.pending and (self.pending[0]["at"] is None or self.pending[0]["at"] <= moment_ms):
            c = self.pending.pop(0)
            column, value = (("app_account_token", self.world.subs[c["otid"]].app_account_token) if c["key"] == "token"
                             else ("original_transaction_id", c["otid"]))
            delivery = f"'{c['delivery']}'" if c["delivery"] else "NULL"
            sample = "NULL" if c["sample"] is None else str(c["sample"]).lower()
            self.ck.psql(f"""
                INSERT INTO churnwatch.refund_consent ({column}, customer_consented, delivery_status, sample_content_provided)
                VALUES ('{value}', {str(c['consented']).lower()}, {delivery}, {sample})
                ON CONFLICT ({column}) WHERE {column} IS NOT NULL
                DO UPDATE SET customer_consented = excluded.customer_consented, delivery_status = excluded.delivery_status,
                              sample_content_provided = excluded.sample_content_provided, updated_at = now()""")
            self.written.append((-1 if c["at"] is None else c["at"], c))

    def at(self, otid: str, moment_ms: int) -> dict | None:
        """The row for the customer of `otid` on record at `moment_ms`: by its original
        transaction id if there is one, else by its app account token (the latest write wins)."""
        rows = [c for at, c in self.written if at <= moment_ms and c["otid"] == otid]
        return ([c for c in rows if c["key"] == "otid"] or [c for c in rows if c["key"] == "token"] or [None])[-1]


def expected_refund_answers(world: srv.World, consents: Consents, invocations: list[int], until_ms: int) -> dict[str, dict]:
    """Each CONSUMPTION_REQUEST signed before `until_ms`, by notification UUID: the policy branch
    docs/contracts.md gives it, the body to send (None: nothing), and Apple's decision on it
    (the first REFUND / REFUND_DECLINED about its transaction after it and before the next
    request about the same transaction)."""
    requests = sorted((r for r in world.refund_requests if r["signedDate"] < until_ms), key=lambda r: r["signedDate"])
    out = {}
    for r in requests:
        # The first sync that reads it: history up to a sync's moment (endDate) holds what was signed before it.
        first = min((t for t in invocations if t > r["signedDate"]), default=None)
        sub = world.subs[r["originalTransactionId"]]
        consent = consents.at(sub.otid, first) if first is not None else None
        body = None
        if first is None or first >= r["deadline"]:
            branch = "expired"
        elif consent is None or not consent["consented"]:
            branch = "no_consent"
        else:
            delivery = consent["delivery"] or "DELIVERED"
            sample = consent["sample"] if consent["sample"] is not None else \
                any(t.offer_type == 1 and t.price == 0 for t in sub.txns)  # a free trial on record
            body = {"customerConsented": True, "deliveryStatus": delivery, "sampleContentProvided": sample}
            share = (r["signedDate"] - r["purchaseDate"]) / (r["expiresDate"] - r["purchaseDate"])
            if delivery != "DELIVERED":
                branch = "undelivered"
            elif share >= REFUND_DECLINE_AFTER:
                branch = "decline_consumed"
                body["refundPreference"] = "DECLINE"
            else:
                branch = "no_preference"
        same = lambda x: x["transactionId"] == r["transactionId"] and x["environment"] == r["environment"]  # noqa: E731
        next_ask = min((q["signedDate"] for q in requests if same(q) and q["signedDate"] > r["signedDate"]), default=None)
        decided = [d for d in world.refund_decisions if same(d) and r["signedDate"] <= d["signedDate"] < until_ms
                   and (next_ask is None or d["signedDate"] < next_ask)]
        decision = {"REFUND": "refunded", "REFUND_DECLINED": "declined"}[decided[0]["decision"]] if decided else None
        out[r["notificationUUID"]] = {"request": r, "branch": branch, "body": body, "decision": decision, "first_sync": first}
    return out


def check_refunds(ck: Checker, args, world: srv.World, script: Script, consents: Consents, invocations: list[int],
                  until_ms: int):
    """Refund requests against the server's record of what it was sent: every request whose
    customer consented answered exactly once (202) before its deadline with the body of the
    contract's policy, nothing sent for the others (no consent, or no sync inside the 12 hours),
    no answer refused but by the injected transient faults; churnwatch.refund_requests (state,
    branch, body, decision) and `churnwatch refunds --json` counts agree."""
    name = lambda o: script.names.get(o, o)  # noqa: E731
    expected = expected_refund_answers(world, consents, invocations, until_ms)
    label = {u: f"refund request {name(e['request']['originalTransactionId'])} {iso(e['request']['signedDate'])}"
             for u, e in expected.items()}

    # What the server received, by the request it answers: the latest about its transaction signed before it.
    received: dict[str, list[dict]] = {u: [] for u in expected}
    for p in world.consumption_puts:
        asked = [e for e in expected.values() if e["request"]["transactionId"] == p["transactionId"]
                 and e["request"]["environment"] == p["environment"] and e["request"]["signedDate"] <= p["at"]]
        if not asked:
            ck.check(False, f"consumption information for {p['transactionId']} ({p['environment']}) at {iso(p['at'])}", "-",
                     "only answers to refund requests", f"an answer to none: {p.get('body')} -> {p['status']}")
            continue
        r = max(asked, key=lambda e: e["request"]["signedDate"])["request"]
        received[r["notificationUUID"]].append(p)
        if p["status"] != 202:
            ck.check(p["errorCode"] in TRANSIENT_CODES, f"{label[r['notificationUUID']]}: server's answer", "-",
                     "202, or an injected transient fault", f"{p['status']} {p['errorCode']} for {p.get('body')}")
    for u, e in expected.items():
        r, puts = e["request"], received[u]
        accepted = [p for p in puts if p["status"] == 202]
        if e["body"] is None:
            ck.check(not puts, f"{label[u]} ({e['branch']}): consumption information sent", "-", "none",
                     [f"{iso(p['at'])} {p.get('body')} -> {p['status']}" for p in puts])
            continue
        ck.check(len(accepted) == 1, f"{label[u]} ({e['branch']}): answers accepted", "-", 1,
                 f"{len(accepted)}: " + "; ".join(f"{iso(p['at'])} {p.get('body')}" for p in accepted))
        late = [p for p in puts if p["at"] >= r["deadline"]]
        ck.check(not late, f"{label[u]}: answers at or after the deadline {iso(r['deadline'])}", "-", "none",
                 [f"{iso(p['at'])} -> {p['status']}" for p in late])
        for p in accepted[:1]:
            ck.check(p.get("body") == e["body"], f"{label[u]} ({e['branch']}): body", "-", e["body"], p.get("body"))

    # churnwatch's own record of each request.
    rows = ck.psql("""SELECT notification_uuid, original_transaction_id, transaction_id, environment, reason,
                             (extract(epoch FROM requested_at) * 1000)::bigint AS requested_ms,
                             (extract(epoch FROM deadline) * 1000)::bigint AS deadline_ms, state, policy_branch,
                             sent::text AS sent, (extract(epoch FROM answered_at) * 1000)::bigint AS answered_ms, decision,
                             last_error
                      FROM churnwatch.refund_requests""" + ck.only_app1())
    by_uuid = {r_["notification_uuid"]: r_ for r_ in rows}
    stranger = [r_ for u, r_ in by_uuid.items() if u not in expected]
    ck.check(not stranger, "churnwatch.refund_requests: rows for requests the server filed", "-", "only those",
             [f"{name(r_['original_transaction_id'])} {r_['transaction_id']}" for r_ in stranger][:5])
    for u, e in expected.items():
        r, row = e["request"], by_uuid.get(u)
        if row is None:
            ck.check(False, f"{label[u]}: churnwatch.refund_requests row", "-", "recorded", "missing")
            continue
        facts = (row["original_transaction_id"], row["transaction_id"], row["environment"], row["reason"],
                 int(row["requested_ms"]), int(row["deadline_ms"]))
        want = (r["originalTransactionId"], r["transactionId"], r["environment"], r["reason"], r["signedDate"], r["deadline"])
        ck.check(facts == want, f"{label[u]}: recorded request", "-", want, facts)
        state = "answered" if e["body"] is not None else "not_sent"
        ck.check((row["state"], row["policy_branch"]) == (state, e["branch"]), f"{label[u]}: state and policy branch", "-",
                 f"{state} {e['branch']}", f"{row['state']} {row['policy_branch']} {row.get('last_error') or ''}".strip())
        if e["body"] is not None:
            sent = json.loads(row["sent"]) if row["sent"] else None
            ck.check(sent == e["body"], f"{label[u]}: refund_requests.sent", "-", e["body"], sent)
            ck.check(bool(row["answered_ms"]) and int(row["answered_ms"]) < r["deadline"], f"{label[u]}: answered_at", "-",
                     f"before {iso(r['deadline'])}", iso(int(row["answered_ms"])) if row["answered_ms"] else "none")
        ck.check((row["decision"] or None) == e["decision"], f"{label[u]}: Apple's decision", "-", e["decision"] or "none",
                 row["decision"] or "none")

    # churnwatch refunds --json: the counts over every request.
    since = night_ms(0) - DAY
    # With several apps, the first app's requests (--app); one app: the command as it always was.
    r = ck.churnwatch(["refunds", "--json", "--since", iso(since), "--as-of", iso(until_ms)]
                      + (["--app", ck.app1_bundle] if ck.app1_bundle else []),
                      dict(os.environ, DATABASE_URL=args.database_url))
    try:
        got = json.loads(r.stdout.splitlines()[0])
    except (ValueError, IndexError):
        got = {}
    ck.check(r.returncode == 0 and bool(got), "churnwatch refunds --json", "-", "exit 0 and the counts",
             f"exit {r.returncode}: {(r.stderr.strip().splitlines() or [''])[-1][:200]}")
    es = list(expected.values())
    want_counts = {"requests": len(es), "answered_in_time": sum(e["body"] is not None for e in es),
                   "not_sent": sum(e["body"] is None for e in es), "failed": 0, "open": 0,
                   "refunded": sum(e["decision"] == "refunded" for e in es), "declined": sum(e["decision"] == "declined" for e in es)}
    got_counts = {k_: got.get(k_) for k_ in want_counts}
    ck.check(got_counts == want_counts, "churnwatch refunds --json counts", "-", want_counts, got_counts)
    want_branches = {}
    for e in es:
        b = want_branches.setdefault(e["branch"], [0, 0, 0])
        b[0] += 1
        b[1] += e["decision"] == "refunded"
        b[2] += e["decision"] == "declined"
    got_branches = {b["branch"]: [b["requests"], b["refunded"], b["declined"]] for b in got.get("by_branch", [])}
    ck.check(got_branches == want_branches, "churnwatch refunds --json by_branch", "-", want_branches, got_branches)

    puts = world.consumption_puts
    injected = sum(1 for p in puts if p["errorCode"] in TRANSIENT_CODES)
    # The faults injected on Send Consumption Information were met (and ridden out, above).
    want_faults = sorted(c for f in script.cron_faults.values() for c in
                         f.get("faults", {}).get("consumption", []) + [4290000] * ("consumption" in f.get("force_429", set())))
    got_faults = sorted(p["errorCode"] for p in puts if p["errorCode"] in TRANSIENT_CODES)
    ck.check(got_faults == want_faults, "transient faults on Send Consumption Information met", "-", want_faults, got_faults)
    branches = ", ".join(f"{b} {v[0]}" for b, v in sorted(want_branches.items()))
    print(f"refund requests: {len(es)} ({branches}); consumption information received {len(puts)} times "
          f"({sum(p['status'] == 202 for p in puts)} accepted, {injected} transient faults); "
          f"{len(invocations)} syncs (cron and nights); churnwatch refunds: {got_counts}", flush=True)


def sandbox_app(ck: Checker, args, workdir: str, world: srv.World, script: Script, envs: srv.Environments,
                first_night: int):
    """A sandbox-only deployment, configured as a tester would: APPSTORE_ENVIRONMENT=Sandbox, only
    APPSTORE_SANDBOX_BASE_URL (no production URL, no app Apple ID), and an import whose
    environment column is empty (the app's configured environment, ops/churnwatch.env.example).
    Two nights on a second database next to the first."""
    side = side_database(ck, args, "_sbx", "sandbox-app")
    if side is None:
        return
    db, url = side
    try:
        env = envs.env()
        for k_ in ("APPSTORE_BASE_URL", "APPSTORE_APP_APPLE_ID"):
            env.pop(k_)
        env.update({"APPSTORE_ENVIRONMENT": "Sandbox", "DATABASE_URL": url})
        sandbox_rows = rows_in(script, world, "Sandbox")
        migrate_and_import(ck, env, os.path.join(workdir, "sandbox-app.csv"),
                           [dict(r_, environment="") for r_ in sandbox_rows], "sandbox app")
        for k in (first_night, first_night + 1):
            now = night_ms(k)
            world.advance(now + SERVER_LEAD)
            truth = world.truth()["subscriptions"]
            r = ck.churnwatch(["run", "--as-of", iso(now), "--log-format", "json"] + RUN_WINDOWS, env)
            ck.check(r.returncode == 0, "sandbox app: churnwatch run", k, "exit 0", f"exit {r.returncode}")
            check_segments(ck, url, script, sandbox_rows, {o: expected_segment(t, now) for o, t in truth.items()}, k, "sandbox app",
                           bundle_id=ck.app1_bundle)
        # Its feed: the sandbox server's own notifications (Sandbox keeps 30 days).
        check_feed_table(ck, url, world, script, "Sandbox", night_ms(first_night) - 29 * DAY, night_ms(first_night + 1),
                         "sandbox app: change feed", bundle_id=ck.app1_bundle)
    finally:
        ck.psql(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')


def check_feed_table(ck: Checker, url: str, world: srv.World, script: Script, environment: str, since_ms: int,
                     until_ms: int, phase: str, bundle_id: str | None = None):
    """churnwatch.notifications against the notifications the server filed for `environment`:
    every one signed in [since_ms, until_ms) is there once (by notification_uuid), with its type,
    subtype and subscription, read from Apple's history; none quarantined but the deliberate
    forgeries; one-time purchases ignored; nothing the server never issued."""
    rows = ck.psql_url(url, "SELECT notification_uuid, notification_type, subtype, original_transaction_id, environment, "
                            "source, outcome, reason FROM churnwatch.notifications" + bundle_filter(bundle_id))
    by_uuid: dict[str, list[dict]] = {}
    for r_ in rows:
        if r_["notification_uuid"]:
            by_uuid.setdefault(r_["notification_uuid"], []).append(r_)
    issued = {n.uuid: n for n in world.notifications}
    expected = [n for n in world.notifications
                if n.environment == environment and not n.forged and since_ms <= n.signed_ms < until_ms]
    name = lambda o: script.names.get(o, o)  # noqa: E731
    missing = [n for n in expected if n.uuid not in by_uuid]
    ck.check(not missing, f"{phase}: notifications recorded", "-", f"all {len(expected)} issued",
             f"{len(missing)} missing, e.g. " + ", ".join(f"{name(n.otid)} {n.notification_type}/{n.subtype} {iso(n.signed_ms)}"
                                                            for n in missing[:6]))
    dup = {u: len(v) for u, v in by_uuid.items() if len(v) > 1}
    ck.check(not dup, f"{phase}: notifications recorded once", "-", "no duplicates", dup)
    stranger = [u for u in by_uuid if u not in issued]
    ck.check(not stranger, f"{phase}: notifications the server issued", "-", "only those", stranger[:5])
    wrong, outcomes = [], {}
    for n in expected:
        for r_ in by_uuid.get(n.uuid, [])[:1]:
            outcomes[r_["outcome"]] = outcomes.get(r_["outcome"], 0) + 1
            # A one-time purchase is about its own transaction (its originalTransactionId), verified and ignored.
            want_outcome = ("applied", "stale") if n.status is not None else ("ignored",)
            if (r_["notification_type"], r_["subtype"] or None, r_["original_transaction_id"], r_["source"]) != \
                    (n.notification_type, n.subtype, n.transaction["originalTransactionId"], "history") \
                    or r_["outcome"] not in want_outcome:
                wrong.append(f"{name(n.otid)} {n.notification_type}/{n.subtype}: {dict(r_)}")
    ck.check(not wrong, f"{phase}: notifications as issued", "-", "type, subtype, subscription, source history, outcome",
             f"{len(wrong)} differ, e.g. {wrong[:3]}")
    forged = {n.otid for n in world.notifications if n.forged and n.environment == environment}
    quarantined = [r_ for r_ in rows if r_["outcome"] == "quarantined"]
    ck.check(all(r_["original_transaction_id"] in forged or not r_["original_transaction_id"] for r_ in quarantined)
             and (bool(quarantined) or not forged),
             f"{phase}: quarantined notifications", "-", f"only the forged ones ({', '.join(name(o) for o in forged) or 'none'})",
             [f"{name(r_['original_transaction_id'])}: {r_['reason']}" for r_ in quarantined][:5] or "none")
    print(f"{phase}: {len(rows)} notifications recorded ({len(expected)} expected), outcomes {outcomes}, "
          f"{len(quarantined)} quarantined", flush=True)


def side_database(ck: Checker, args, suffix: str, phase: str) -> tuple[str, str] | None:
    """A new, empty database next to --database-url's (name + suffix) and its URL; None, with a
    note, when that URL does not name a database."""
    parts = urllib.parse.urlsplit(args.database_url)
    if not parts.scheme.startswith("postgres") or not parts.path.strip("/"):
        print(f"note: {phase} phase skipped: --database-url is not a postgresql://.../DB URL")
        return None
    db = parts.path.strip("/") + suffix
    ck.psql(f'DROP DATABASE IF EXISTS "{db}"')
    ck.psql(f'CREATE DATABASE "{db}"')
    return db, urllib.parse.urlunsplit(parts._replace(path="/" + db))


def rows_in(script: Script, world: srv.World, environment: str) -> list[dict]:
    """The import rows of the subscribers that live in `environment`."""
    return [r_ for r_ in script.rows
            if r_["original_transaction_id"] in world.subs and world.subs[r_["original_transaction_id"]].environment == environment]


def migrate_and_import(ck: Checker, env: dict, path: str, rows: list[dict], phase: str):
    """Writes `rows` as an import CSV at `path`, then `churnwatch migrate` and `import` (each checked)."""
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=["original_transaction_id", "app_account_token", "customer_ref", "environment",
                                          "receipt_data"])
        w.writeheader()
        w.writerows(rows)
    for cmd in (["migrate"], ["import", path]):
        r = ck.churnwatch(cmd, env)
        ck.check(r.returncode == 0, f"{phase}: churnwatch {cmd[0]}", "-", "exit 0", f"exit {r.returncode}")


def check_segments(ck: Checker, url: str, script: Script, rows: list[dict], expected: dict[str, str], night, phase: str,
                   bundle_id: str | None = None):
    """Each row's segment in the database at `url` against `expected` (by original transaction id)."""
    got = {r_["original_transaction_id"]: r_["segment"] for r_ in ck.psql_url(
        url, "SELECT original_transaction_id, segment FROM churnwatch.subscription_segments" + bundle_filter(bundle_id))}
    for row in rows:
        o = row["original_transaction_id"]
        ck.check(got.get(o) == expected[o], f"{phase}: {script.names[o]} ({o}) segment", night, expected[o], got.get(o))


def https_app(ck: Checker, args, workdir: str, world: srv.World, script: Script, envs: srv.Environments, night: int):
    """The production server again, over HTTPS with a certificate from a private CA (a server
    behind a company CA or a TLS-inspecting proxy). Without APPSTORE_TLS_ROOT_CERTS churnwatch
    must refuse the server before sending it anything (no request, so no JWT, reaches it), stop
    in one line naming the setting (exit 69) and write no subscription state; with it, the
    same command resumes the run and gets every segment right. One night on a third database."""
    side = side_database(ck, args, "_tls", "https-app")
    if side is None:
        return
    db, url = side
    tls = srv.TLSIdentity(os.path.join(workdir, "tls"))
    server = srv.AppStoreServer(world, envs.key, envs.pki, "Production", tls=tls).start()
    try:
        env = envs.env()
        env.update({"APPSTORE_BASE_URL": server.url, "DATABASE_URL": url})
        rows = rows_in(script, world, "Production")
        migrate_and_import(ck, env, os.path.join(workdir, "https-app.csv"), rows, "https app")
        now = night_ms(night)
        world.advance(now + SERVER_LEAD)
        truth = world.truth()["subscriptions"]
        run = ["run", "--as-of", iso(now), "--log-format", "json"] + RUN_WINDOWS

        r = ck.churnwatch(run, env)
        last = (r.stderr.strip().splitlines() or [""])[-1]
        ck.check(r.returncode == 69, "https app, CA not trusted: churnwatch run", night, "exit 69", f"exit {r.returncode}")
        ck.check("untrusted server" in last and "APPSTORE_TLS_ROOT_CERTS" in last,
                 "https app, CA not trusted: last line", night, "untrusted server ... APPSTORE_TLS_ROOT_CERTS", last[:300])
        ck.check(server.requests == 0, "https app, CA not trusted: requests that reached the server", night, 0, server.requests)
        polled = int(ck.psql_url(url, "SELECT count(*) AS n FROM churnwatch.subscription_segments"
                                 + ck.only_app1())[0]["n"])
        ck.check(polled == 0, "https app, CA not trusted: subscriptions with a segment", night, 0, polled)

        env["APPSTORE_TLS_ROOT_CERTS"] = tls.ca_path
        r = ck.churnwatch(run, env)
        ck.check(r.returncode == 0, "https app, CA trusted: churnwatch run", night, "exit 0", f"exit {r.returncode}")
        expected = {o: expected_segment(t, now) for o, t in truth.items()}
        # Subscriptions registered with an id and a receipt are polled through the Server API
        # from their first poll (issue 19), which names the expiration intent even when the
        # receipt's pending_renewal_info lost it: no exception for them any more.
        check_segments(ck, url, script, rows, expected, night, "https app", bundle_id=ck.app1_bundle)
    finally:
        server.stop()
        ck.psql(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
