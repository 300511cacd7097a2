#!/usr/bin/env python3
"""The further apps of the independent check (`check.py --apps N`): app k >= 2.

Apple (fact sheet): one In-App Purchase key per team signs the requests for all its apps; the
bundle id, the app Apple id, the rate limits and the notification history are per app. App k
has its own bundle id (`<first app's>.app<k>`), app Apple id, products (`com.indie.notes.*`, a
group of their own), original transaction ids (never one of another app's) and a small
scripted world, served by the same servers (ports) as the first app: the request JWT's `bid`
picks the app (server.py).

What it expects of churnwatch (multi-app, one database):
  * `churnwatch apps add BUNDLE_ID --app-apple-id N` registers app k, which inherits the default
    app's key, environment, base URLs and root certificates (the APPSTORE_* environment);
  * `churnwatch import --app BUNDLE_ID FILE` imports its subscribers (the 4-column CSV);
  * one `churnwatch run` polls every app: one `churnwatch.runs` row per app and night;
  * every contract table has a text column `bundle_id`.

After registering and after each night: `churnwatch.apps` lists every app, the first (the
deployment's APPSTORE_BUNDLE_ID) the default and no other. After each night, by `bundle_id`: one
finished run (status `done`) per app for the night, none left unfinished; app k's segments, auto-renew flips (all so far, whichever night or sync wrote
them), live win-back entries and identifiers against its truth, none of another app's
subscriptions under its bundle id. After the last night: its notifications in
`churnwatch.notifications` under its bundle id, none of the first app's there and none of its
under another. `--refuse-app K`: on REFUSE_NIGHT every request of app K is answered 401:
churnwatch exits 75 (partial), the other apps' runs are done and right (check.py), nothing of
app K changes (segments, events, notifications, win-back entries); the next night app K's runs
are finished and it is right again.
"""
from __future__ import annotations

import csv
import os

from checker import check_feed_table
from expected import FEED_REASONS, expected_campaign, expected_segment
from scenario import APP_APPLE_ID, BUNDLE_ID, DAY, SERVER_LEAD, Script, day_ms, iso, night_ms

# A night with no cron sync on either side of it (none between nights 3 and 4), scripted changes
# before it and after it, and the same night for any --nights (at least 6).
REFUSE_NIGHT = 4
M2, Y2 = "com.indie.notes.monthly", "com.indie.notes.yearly"
FLIPS = ("auto_renew_disabled", "auto_renew_enabled")


def bundle_id(k: int) -> str:
    return f"{BUNDLE_ID}.app{k}"


def app_apple_id(k: int) -> int:
    return APP_APPLE_ID + 1000 * (k - 1)


def build_script(k: int, feed_night: int = 8):
    """App k's scripted world: 19 subscribers, a few kinds of change each side of REFUSE_NIGHT.
    Its ids start at 420000{100+k}100000 (the first app's at 420000007100000)."""
    sc = Script(bundle_id(k), app_apple_id(k), seed=100 + k)
    wb = ["notes.winback.30"]
    # -- stays active; a renewal
    sc.sub("active-monthly", M2, 10, periods_before=2)
    sc.sub("renews-n3", M2, 2.5, periods_before=1)
    sc.sub("active-yearly", Y2, 150)
    sc.sub("family-member", M2, 12, ownership="FAMILY_SHARED", token=False)
    # -- auto-renew off, on again; off and expired across the refused night
    a = sc.sub("off-n1", M2, 12)
    sc.at(1, a, "auto_renew_off")
    b = sc.sub("off-n2-on-n5", Y2, 90)
    sc.at(2, b, "auto_renew_off")
    sc.at(5, b, "auto_renew_on")
    c = sc.sub("off-n4-expires-n5", M2, 4.5, periods_before=1, winback_ids=wb)
    sc.at(4, c, "auto_renew_off")
    # -- billing: grace then recovery; retry without grace until Apple gives up; grace that ends
    g = sc.sub("grace-recovers-n5", M2, 1.5, periods_before=1)
    sc.at(1, g, "billing_fails", grace_days=16, recover_at=day_ms(4.5))
    r = sc.sub("retry-gives-up-n4", M2, 0.5, periods_before=1)
    sc.at(0, r, "billing_fails", hours=20, give_up_at=day_ms(3.5))
    ge = sc.sub("grace-ends-n6", M2, 2.5, periods_before=1)
    sc.at(2, ge, "billing_fails", grace_days=3)
    # -- refunds
    f = sc.sub("refund-n3", M2, 20, periods_before=1)
    sc.at(3, f, "refund")
    fy = sc.sub("refund-yearly-n5", Y2, 200)
    sc.at(5, fy, "refund")
    # -- churned before the first night; one comes back
    sc.sub("churned-15-days-ago", M2, -15, auto_renew=0, winback_ids=wb)
    rs = sc.sub("churned-40-days-ago-resubscribes-n2", M2, -40, auto_renew=0)
    sc.at(2, rs, "resubscribe")
    # -- price increase, product not for sale, downgrade
    p = sc.sub("price-increase-n1-accepted-n3", M2, 20)
    sc.at(1, p, "price_increase")
    sc.at(3, p, "price_consent")
    n = sc.sub("not-for-sale-expires-n3", M2, 2.5, periods_before=1)
    sc.at(1, n, "not_for_sale")
    d = sc.sub("downgrade-n2", Y2, 60)
    sc.at(2, d, "downgrade", product=M2)
    # -- while the feed alone plans (nights F, F+1)
    F = feed_night
    fo = sc.sub("feed-off-nF", M2, F + 12)
    sc.at(F, fo, "auto_renew_off")
    sc.sub("feed-renews-nF", M2, F - 0.3, periods_before=1)
    sc.actions.sort(key=lambda x: x[0])
    return sc


def tail(r) -> str:
    return (r.stderr.strip().splitlines() or [""])[-1][:300]


def check_apps_table(ck, first_bundle: str, first_apple_id: int, others: list, night):
    """churnwatch.apps: every app registered, the first one (the deployment's APPSTORE_BUNDLE_ID)
    the default and no other; the others with the app Apple ids `apps add` was given."""
    rows = ck.psql("SELECT bundle_id, is_default::text AS is_default, app_apple_id FROM churnwatch.apps ORDER BY bundle_id")
    defaults = [r["bundle_id"] for r in rows if r["is_default"] == "true"]
    ck.check(defaults == [first_bundle], "churnwatch.apps default app", night, f"{first_bundle} alone (APPSTORE_BUNDLE_ID)",
             ", ".join(defaults) or "none")
    got = {r["bundle_id"]: r["app_apple_id"] for r in rows}
    want = {o.bundle_id: str(o.app_apple_id) for o in others}
    ck.check(set(got) == {first_bundle} | set(want) and all(got.get(b) == a for b, a in want.items()),
             "churnwatch.apps rows", night, f"{first_bundle}, " + ", ".join(f"{b} ({a})" for b, a in want.items()),
             ", ".join(f"{b} ({a or '-'})" for b, a in got.items()))


def check_night_runs(ck, bundles: list[str], k: int, now: int, runs_before: int, refused: str | None):
    """One finished run (status done) per app for tonight's --as-of among the runs this night's
    invocation made; none for the refused app; no run of any app left unfinished (a refused app's
    is finished the next night)."""
    rows = ck.psql(f"SELECT id, bundle_id, status, finished_at, failed, "
                   f"(extract(epoch FROM as_of) * 1000)::bigint AS as_of_ms FROM churnwatch.runs "
                   f"WHERE id > {runs_before} ORDER BY id")
    for b in bundles:
        tonight = [r for r in rows if r["bundle_id"] == b and int(r["as_of_ms"]) == now]
        got = "; ".join(f"run {r['id']} {r['status']}{'' if r['finished_at'] else ' unfinished'}" for r in tonight) or "none"
        if b == refused:
            ck.check(not any(r["status"] == "done" for r in tonight), f"churnwatch.runs of {b} (refused tonight)", k,
                     "no run done", got)
            continue
        ck.check(len(tonight) == 1 and tonight[0]["status"] == "done" and bool(tonight[0]["finished_at"]),
                 f"churnwatch.runs of {b}", k, "one finished run with status done", got)
        if b != bundles[0] and tonight:  # the first app's failures are checked by check.py
            ck.check(int(tonight[0]["failed"]) == 0, f"churnwatch.runs.failed of {b}", k, 0, tonight[0]["failed"])
    stranger = [r for r in rows if r["bundle_id"] not in bundles]
    ck.check(not stranger, "churnwatch.runs bundle ids", k, ", ".join(bundles),
             "; ".join(f"run {r['id']} {r['bundle_id'] or 'NULL'}" for r in stranger[:5]))
    if refused is None:
        open_ = ck.psql("SELECT id, bundle_id, status, (extract(epoch FROM as_of) * 1000)::bigint AS as_of_ms "
                        "FROM churnwatch.runs WHERE finished_at IS NULL ORDER BY id")
        ck.check(not open_, "churnwatch.runs left unfinished", k, "none",
                 "; ".join(f"run {r['id']} {r['bundle_id']} {r['status']} as of {iso(int(r['as_of_ms']))}" for r in open_))


class SecondApp:
    """App k of the check: its script and world, the commands that register and import it, its
    world moved with the first app's, and its checks."""

    def __init__(self, k: int, feed_night: int):
        self.k = k
        self.script = build_script(k, feed_night)
        self.world = self.script.world
        self.bundle_id, self.app_apple_id = self.world.bundle_id, self.world.app_apple_id
        self.label = f"app {k}"
        self.refuse_night = REFUSE_NIGHT
        self.actions = list(self.script.actions)
        self.otids = [row["original_transaction_id"] for row in self.script.rows]
        self.truth: dict[str, dict] = {}  # what churnwatch can know tonight (the poll's or the feed's)
        self.last_obs: dict[str, tuple] = {}  # its last observation of each: (status, autoRenewStatus)
        self.flips: dict[str, list[str]] = {o: [] for o in self.otids}  # every flip expected so far
        self.flip_mismatch: dict[str, tuple | None] = {}  # the last mismatch said per subscription
        self.synced_at: int | None = None  # the last night whose run read app k (its feed up to then)
        self.where = f" WHERE bundle_id = '{self.bundle_id}'"
        self.also = f" AND bundle_id = '{self.bundle_id}'"

    def name(self, o: str) -> str:
        return f"{self.label}: {self.script.names.get(o, '?')} ({o})"

    # ---- setting up ----
    def register(self, ck, env: dict):
        cmd = ["apps", "add", self.bundle_id, "--app-apple-id", str(self.app_apple_id)]
        r = ck.churnwatch(cmd, env)
        ck.check(r.returncode == 0, f"churnwatch {' '.join(cmd)}", "-", "exit 0", f"exit {r.returncode}: {tail(r)}")
        if r.returncode != 0:
            raise RuntimeError(f"churnwatch apps add {self.bundle_id} failed")

    def import_subscribers(self, ck, env: dict, workdir: str):
        path = os.path.join(workdir, f"subscriptions-app{self.k}.csv")
        with open(path, "w", newline="", encoding="utf-8") as f:
            w = csv.DictWriter(f, fieldnames=["original_transaction_id", "app_account_token", "customer_ref", "environment"])
            w.writeheader()
            w.writerows(self.script.rows)
        r = ck.churnwatch(["import", "--app", self.bundle_id, path], env)
        ck.check(r.returncode == 0, f"churnwatch import --app {self.bundle_id}", "-", "exit 0", f"exit {r.returncode}: {tail(r)}")
        if r.returncode != 0:
            raise RuntimeError(f"churnwatch import --app {self.bundle_id} failed")

    # ---- the clock (moved with the first app's) ----
    def _apply(self, until_ms: int):
        while self.actions and self.actions[0][0] <= until_ms:
            at, otid, action, kw = self.actions.pop(0)
            self.world.act(otid, action, at, **kw)

    def advance_to(self, ms: int):
        self._apply(ms)
        self.world.advance(max(ms, self.world.now_ms))

    def before_run(self, k: int, now: int, feed_only: bool):
        """Tonight's world (the server's clock minutes ahead) and what churnwatch can know of it:
        the poll's answer, or with the feed alone planning, the truth just before the run."""
        self._apply(now)
        if feed_only:
            self.world.advance(max(now - 1, self.world.now_ms))
            feed_truth = self.world.truth()["subscriptions"]
        self.world.advance(max(now + SERVER_LEAD, self.world.now_ms))
        self.truth = feed_truth if feed_only else self.world.truth()["subscriptions"]

    # ---- checks ----
    def snapshot(self, ck) -> dict:
        """App k's rows that nothing may change while Apple refuses it."""
        return {
            "segments": {r["original_transaction_id"]: r["segment"] for r in ck.psql(
                "SELECT original_transaction_id, segment FROM churnwatch.subscription_segments" + self.where)},
            "churn_events": int(ck.psql("SELECT count(*) AS n FROM churnwatch.churn_events" + self.where)[0]["n"]),
            "notifications": int(ck.psql("SELECT count(*) AS n FROM churnwatch.notifications" + self.where)[0]["n"]),
            "live win-back entries": sorted((r["original_transaction_id"], r["campaign"]) for r in ck.psql(
                "SELECT original_transaction_id, campaign FROM churnwatch.winback_queue "
                "WHERE status IN ('pending', 'claimed')" + self.also)),
        }

    def after_run(self, ck, k: int, now: int, feed_only: bool, refused_before: dict | None, runs_before: int):
        if refused_before is not None:
            self.check_unchanged(ck, k, refused_before)
            return
        segments = self.check_segments(ck, k, now)
        self.check_flips(ck, k, now)
        self.check_winback(ck, k, now, segments)
        if k == 0:
            self.check_identifiers(ck, k)
        if feed_only:
            reasons = ck.psql(f"SELECT DISTINCT i.reason FROM churnwatch.run_items i JOIN churnwatch.runs r ON r.id = i.run_id "
                              f"WHERE r.id > {runs_before} AND r.bundle_id = '{self.bundle_id}'")
            other = sorted({r["reason"] for r in reasons} - FEED_REASONS)
            ck.check(not other, f"{self.label}: planned by the change feed", k, "no date-window reasons", other)

    def check_unchanged(self, ck, k: int, before: dict):
        after = self.snapshot(ck)
        for what, was in before.items():
            now_ = after[what]
            if what == "segments":
                changed = [f"{self.script.names.get(o, o)}: {was.get(o)} -> {now_.get(o)}"
                           for o in sorted(set(was) | set(now_)) if was.get(o) != now_.get(o)]
                ck.check(not changed, f"{self.label} refused: its segments", k, "unchanged", "; ".join(changed[:6]))
            else:
                ck.check(now_ == was, f"{self.label} refused: its {what}", k, f"unchanged ({was if isinstance(was, int) else len(was)})",
                         now_ if isinstance(now_, int) else now_[:6])

    def check_segments(self, ck, k: int, now: int) -> dict[str, str]:
        got = {r["original_transaction_id"]: r["segment"] for r in ck.psql(
            "SELECT original_transaction_id, segment FROM churnwatch.subscription_segments" + self.where)}
        expected = {o: expected_segment(self.truth.get(o), now) for o in self.otids}
        for o in self.otids:
            ck.check(got.get(o) == expected[o], f"{self.name(o)} segment", k, expected[o], got.get(o))
        foreign = sorted(set(got) - set(self.otids))
        ck.check(not foreign, f"{self.label}: subscription_segments under {self.bundle_id}", k,
                 f"its {len(self.otids)} subscriptions only", f"{len(foreign)} others, e.g. {foreign[:5]}")
        return expected

    def check_flips(self, ck, k: int, now: int):
        """Every auto-renew flip so far, whichever night or sync wrote it: a flip between two
        consecutive observations churnwatch had of an active subscription (its last one, the
        notifications since the last night that read app k, tonight's poll or feed); none from
        the first night, whose sync establishes state quietly (no events at all then)."""
        notes: dict[str, list] = {}
        for n in sorted(self.world.notifications, key=lambda n: (n.signed_ms, n.seq)):
            if (n.environment == "Production" and n.status is not None and n.signed_ms < now
                    and (self.synced_at is None or self.synced_at <= n.signed_ms)):
                notes.setdefault(n.otid, []).append((n.status, n.auto_renew))
        for o in self.otids:
            t = self.truth.get(o)
            if t is None:
                continue
            seq = ([self.last_obs[o]] if o in self.last_obs else []) + notes.get(o, []) + [(t["status"], t["autoRenewStatus"])]
            if self.synced_at is not None:
                for a, b in zip(seq, seq[1:]):
                    if a[0] == 1 and b[0] == 1 and a[1] != b[1]:
                        self.flips[o].append("auto_renew_enabled" if b[1] == 1 else "auto_renew_disabled")
            self.last_obs[o] = seq[-1]
        first = self.synced_at is None
        self.synced_at = now
        events = ck.psql("SELECT original_transaction_id, event FROM churnwatch.churn_events" + self.where)
        if first:
            ck.check(not events, f"{self.label}: first night (feed and polls)", k, "no events",
                     f"{len(events)} events: " + ", ".join(f"{self.script.names.get(e['original_transaction_id'], '?')}:"
                                                           f"{e['event']}" for e in events[:8]))
        for o in self.otids:
            got = sorted(e["event"] for e in events if e["original_transaction_id"] == o and e["event"] in FLIPS)
            want = sorted(self.flips[o])
            if got != want and self.flip_mismatch.get(o) == (want, got):
                continue  # said on an earlier night, nothing new since: one line per mismatch
            self.flip_mismatch[o] = (want, got) if got != want else None
            ck.check(got == want, f"{self.name(o)} auto-renew events so far", k, want or "none", got or "none")
        foreign = sorted({e["original_transaction_id"] for e in events} - set(self.otids))
        ck.check(not foreign, f"{self.label}: churn_events under {self.bundle_id}", k, "its subscriptions only", foreign[:5])

    def check_winback(self, ck, k: int, now: int, segments: dict[str, str]):
        live = ck.psql("SELECT original_transaction_id, campaign FROM churnwatch.winback_queue "
                       "WHERE status IN ('pending', 'claimed')" + self.also + " ORDER BY id")
        for o in self.otids:
            c = expected_campaign(self.truth.get(o), segments[o], now)
            got = [e["campaign"] for e in live if e["original_transaction_id"] == o]
            ck.check(got == ([c] if c else []), f"{self.name(o)} live win-back ({segments[o]})", k, c or "none",
                     ", ".join(got) or "none")
        foreign = sorted({e["original_transaction_id"] for e in live} - set(self.otids))
        ck.check(not foreign, f"{self.label}: winback_queue under {self.bundle_id}", k, "its subscriptions only", foreign[:5])

    def check_identifiers(self, ck, k: int):
        ident = {r["original_transaction_id"]: r for r in ck.psql(
            "SELECT original_transaction_id, app_account_token, customer_ref FROM churnwatch.subscription_segments" + self.where)}
        for row in self.script.rows:
            got = ident.get(row["original_transaction_id"], {})
            want = (row["app_account_token"], row["customer_ref"])
            ck.check((got.get("app_account_token", ""), got.get("customer_ref")) == want,
                     f"{self.name(row['original_transaction_id'])} identifiers", k, want,
                     (got.get("app_account_token"), got.get("customer_ref")))

    def finish(self, ck, url: str, first_world, last_night: int):
        """After the last night: app k's notifications under its bundle id (as check.py checks the
        first app's), and no notification under another app's bundle id."""
        check_feed_table(ck, url, self.world, self.script, "Production", night_ms(0) - 179 * DAY,
                         night_ms(last_night), f"{self.label}: change feed", bundle_id=self.bundle_id)
        rows = ck.psql_url(url, "SELECT notification_uuid, bundle_id, notification_type FROM churnwatch.notifications "
                                "WHERE notification_uuid IS NOT NULL")
        mine = {n.uuid for n in self.world.notifications}
        firsts = {n.uuid for n in first_world.notifications}
        wrong = [f"{r['notification_type']} {r['notification_uuid']} of {'the first app' if r['notification_uuid'] in firsts else self.label} "
                 f"under {r['bundle_id']}" for r in rows
                 if (r["bundle_id"] == self.bundle_id and r["notification_uuid"] in firsts)
                 or (r["bundle_id"] != self.bundle_id and r["notification_uuid"] in mine)]
        ck.check(not wrong, f"{self.label}: notifications under their own app's bundle id", "-", "all", wrong[:5])
