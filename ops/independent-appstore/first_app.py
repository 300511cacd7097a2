"""The first app's scripted world (check.py's, and server.py's when it serves on its own): its
subscribers, monthly and yearly products in two groups, legacy receipt subscribers among them,
the changes made to them night after night, the refund requests, an id Apple does not know. build_world puts it
together from the scenes below, in order (the order of the subscribers and of the changes
scheduled at one moment is part of the world: ids and notifications follow it)."""
from __future__ import annotations

from model import PRODUCTS
from scenario import DAY, Script, clock, day_ms, night_ms
from world import World

M, Y, B, P = "com.indie.premium.monthly", "com.indie.premium.yearly", "com.indie.basic.monthly", "com.indie.pro.monthly"


def build_world(feed_night: int = 8) -> tuple[World, Script]:
    """The scripted world. `feed_night` is the first of the FEED_ONLY_NIGHTS nights run with
    windows that select nothing by date (the change feed alone keeps state current)."""
    sc = Script()
    wb = ["winback.été.50", "winback-basic-1"]
    active_and_saves(sc, wb)
    billing(sc)
    refunds_plans_and_churned(sc, wb)
    one_offs_and_campaign_cases(sc, wb)
    legacy_receipts(sc)
    later_episodes(sc, wb)
    more_legacy_receipts(sc)
    feed_only_nights(sc, feed_night, wb)
    # -- refund requests (CONSUMPTION_REQUEST), answered by the syncs cron runs every 10 minutes
    #    around them (and the nightly run's own sync); a decision (REFUND / REFUND_DECLINED) later
    build_refund_requests(sc, M, Y)
    # -- an id neither environment knows
    sc.rows.append({"original_transaction_id": "420000999999999", "app_account_token": "", "customer_ref": "ghost",
                    "environment": "Production"})
    sc.names["420000999999999"] = "unknown-to-apple"
    sc.actions.sort(key=lambda a: a[0])
    return sc.world, sc


def active_and_saves(sc: Script, wb: list[str]):
    """Subscribers that stay active (renewals during the check), several subscriptions of one
    customer, long histories, a trial; saves (off, then on again); off, then expired (intent 1)."""
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


def billing(sc: Script):
    """Billing trouble: grace then recovery, grace then retry until Apple gives up, retry
    without grace, a yearly grace, in retry before the first poll."""
    # -- billing
    g1 = sc.sub("grace-recovers-n5", M, 1.5, periods_before=2)
    sc.at(1, g1, "billing_fails", grace_days=16, recover_at=day_ms(4.5))
    g2 = sc.sub("grace-expires-retry-gives-up-n6", M, 0.5, periods_before=4)
    sc.at(0, g2, "billing_fails", hours=30, grace_days=3, give_up_at=day_ms(5.5))
    r1 = sc.sub("retry-no-grace", M, 1.5, periods_before=1)
    sc.at(1, r1, "billing_fails")
    r2 = sc.sub("retry-no-grace-recovers-n6", M, 2.5, periods_before=1)
    sc.at(2, r2, "billing_fails", recover_at=day_ms(5.2))
    g3 = sc.sub("yearly-grace", Y, 3.5, periods_before=1)
    sc.at(3, g3, "billing_fails", grace_days=6)
    r3 = sc.sub("in-retry-before-first-poll", M, -3, periods_before=2)
    sc.at(0, r3, "billing_fails", hours=24 * 4)


def refunds_plans_and_churned(sc: Script, wb: list[str]):
    """Refunds (one reversed), plan changes, price increases, a product no longer for sale,
    family sharing, sandbox subscribers, subscribers churned before the first night."""
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


def one_offs_and_campaign_cases(sc: Script, wb: list[str]):
    """One-time purchases, an upgrade, cancels during grace and retry, refunds that end a
    campaign, intents 5 and 9, a lagging status, offers Apple hasn't invented, a forged answer."""
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


def legacy_receipts(sc: Script):
    """Legacy verifyReceipt subscribers (a stored receipt; fact sheet §7)."""
    # -- legacy verifyReceipt subscribers (a stored receipt; fact sheet §7)
    sc.sub("legacy-active-renews-n2", M, 1.5, periods_before=2, legacy=True)
    l2 = sc.sub("legacy-off-n2-on-n4", M, 12, legacy=True)
    sc.at(2, l2, "auto_renew_off")
    sc.at(4, l2, "auto_renew_on")
    l3 = sc.sub("legacy-grace-recovers-n5", M, 1.5, periods_before=1, legacy=True)
    sc.at(1, l3, "billing_fails", grace_days=16, recover_at=day_ms(4.5))
    l4 = sc.sub("legacy-grace-cancelled-n3", M, 0.5, periods_before=1, legacy=True)
    sc.at(1, l4, "billing_fails", hours=20, grace_days=16)
    sc.at(3, l4, "auto_renew_off")
    l5 = sc.sub("legacy-refund-n3", M, 18, periods_before=1, legacy=True)
    sc.at(3, l5, "refund")
    sc.sub("legacy-sandbox-receipt", M, 6.5, environment="Sandbox", import_env="Production", legacy=True)
    l7 = sc.sub("legacy-retry-gives-up-n5", M, 0.5, periods_before=1, legacy=True)
    sc.at(0, l7, "billing_fails", hours=20, give_up_at=day_ms(4.5))
    l8 = sc.sub("legacy-price-increase-n1", M, 25, legacy=True)
    sc.at(1, l8, "price_increase")
    l9 = sc.sub("legacy-off-n1-expires-n3", Y, 2.5, legacy=True)
    sc.at(1, l9, "auto_renew_off")
    l10 = sc.sub("legacy-downgrade-n2", Y, 40, legacy=True)
    sc.at(2, l10, "downgrade", product=M)
    l11 = sc.sub("legacy-grace-ends-retry-n4", M, 1.5, periods_before=1, legacy=True)
    sc.at(1, l11, "billing_fails", grace_days=2)
    sc.sub("legacy-same-customer-pro", P, 9, legacy=True, customer=l11)


def later_episodes(sc: Script, wb: list[str]):
    """A second save episode, a win-back window closing, a price increase with a downgrade,
    a comeback on another product, a lagging replica's stale answers."""
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


def more_legacy_receipts(sc: Script):
    """More legacy receipts; refunded in grace; upgraded while auto-renew was off."""
    # -- more legacy receipts: trial with auto-renew off, intents 3 and 4, refund reversed, upgrade
    sc.sub("legacy-trial-off-expires-n5", M, 4.5, auto_renew=0, offer=(1, None, "FREE_TRIAL"), legacy=True)
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


def feed_only_nights(sc: Script, F: int, wb: list[str]):
    """Changes while the feed alone plans (nights F, F+1), and the safety net's subscribers."""
    # -- changed while the feed alone plans (nights F, F+1: windows that select nothing by date)
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
    sc.at(F - 1, fo9, "billing_fails", recover_at=day_ms(F + 0.6))
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


def build_refund_requests(sc: Script, M: str, Y: str):
    """Refund requests over four days, each on a subscriber of its own whose period is chosen so
    that the share of it elapsed at the request is as named (the policy declines at 0.5 and
    more when delivered: CHURNWATCH_REFUND_DECLINE_AFTER=0.5)."""
    def asking(name: str, product: str, at_ms: int, share: float, **kw) -> str:
        period = PRODUCTS[product][1]
        expires_in_days = (at_ms + (1 - share) * period - night_ms(0)) / DAY
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


