#!/usr/bin/env python3
"""Self-test of server.py serving several apps (no churnwatch, no PostgreSQL): two apps' request
JWTs signed by the one team key with different `bid`s, each app's own answers, transaction ids
and notification history, another app's id 4040010, an unknown bid 401, per-app rate buckets,
--refuse-app's 401, the per-app truth; and that a one-app server refuses the second app's bid.

    python3 ops/independent-appstore/selftest_apps.py

Prints one line per failed expectation and "N passed, N failed"; exits 1 on a failure.
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import first_app  # noqa: E402
import pki  # noqa: E402
import scenario  # noqa: E402
import second_app  # noqa: E402
import server as srv  # noqa: E402
from cryptography.hazmat.primitives import hashes  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import ec  # noqa: E402
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature  # noqa: E402

passed = failed = 0


def expect(ok: bool, what: str, want, got):
    global passed, failed
    if ok:
        passed += 1
    else:
        failed += 1
        print(f"FAIL {what}: expected {want}, got {got}", flush=True)


def token(envs: srv.Environments, bid: str) -> str:
    now = int(time.time())
    header = {"alg": "ES256", "kid": envs.key_id, "typ": "JWT"}
    claims = {"iss": envs.issuer_id, "iat": now, "exp": now + 1200, "aud": "appstoreconnect-v1", "bid": bid}
    signing = pki.b64url(json.dumps(header).encode()) + "." + pki.b64url(json.dumps(claims).encode())
    r, s = decode_dss_signature(envs.key.private_key.sign(signing.encode(), ec.ECDSA(hashes.SHA256())))
    return signing + "." + pki.b64url(r.to_bytes(32, "big") + s.to_bytes(32, "big"))


def call(base: str, method: str, path: str, bid: str | None = None, envs=None, body=None):
    """(status, parsed JSON body or None)."""
    req = urllib.request.Request(base + path, method=method,
                                 data=None if body is None else json.dumps(body).encode())
    if bid is not None:
        req.add_header("Authorization", "Bearer " + token(envs, bid))
    if body is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            raw = resp.read()
            return resp.status, json.loads(raw) if raw else None
    except urllib.error.HTTPError as e:
        raw = e.read()
        try:
            return e.code, json.loads(raw) if raw else None
        except ValueError:
            return e.code, raw.decode("utf-8", "replace")


def payload(jws: str) -> dict:
    return json.loads(pki.b64url_decode(jws.split(".")[1]))


@dataclass
class Apps:
    """Two apps on one pair of servers, and what the steps below hand on."""
    world1: srv.World
    script1: scenario.Script
    app2: second_app.SecondApp
    world2: srv.World
    b1: str
    b2: str
    envs: srv.Environments
    prod: str = ""
    night0: int = 0
    o1: str = ""
    o2: str = ""
    window: dict = field(default_factory=dict)
    t2: str = ""
    later: int = 0


def two_apps() -> Apps:
    """App 1's and app 2's worlds served by one pair of servers."""
    world1, script1 = first_app.build_world()
    app2 = second_app.SecondApp(2, feed_night=8)
    world2 = app2.world
    b1, b2 = world1.bundle_id, world2.bundle_id
    directory = tempfile.mkdtemp(prefix="indie-selftest-")
    envs = srv.Environments(directory, world1, others=[world2])
    return Apps(world1, script1, app2, world2, b1, b2, envs)


def at_night_0(apps: Apps):
    """Both worlds at night 0 (+ the server's lead), their scripts applied up to then; their
    transaction ids apart."""
    envs, world1, world2, script1, app2 = apps.envs, apps.world1, apps.world2, apps.script1, apps.app2
    night0 = scenario.night_ms(0)
    for at, otid, action, kw in script1.actions:
        if at <= night0:
            world1.act(otid, action, at, **kw)
    world1.advance(night0 + scenario.SERVER_LEAD)
    app2.before_run(0, night0, False)
    prod = envs.production.url

    ids1 = set(world1.txn_index)
    ids2 = set(world2.txn_index)
    expect(not ids1 & ids2, "transaction ids of the two apps", "disjoint", sorted(ids1 & ids2)[:5])
    o1 = next(o for o, s in world1.subs.items() if s.environment == "Production")
    o2 = next(iter(world2.subs))
    apps.prod, apps.night0, apps.o1, apps.o2 = prod, night0, o1, o2


def statuses_and_transactions(apps: Apps):
    """Get All Subscription Statuses, the transaction history and Get Transaction Info: the
    bid picks the app; another app's id is 4040010."""
    envs, prod, world1, world2, b1, b2, o1, o2 = \
        apps.envs, apps.prod, apps.world1, apps.world2, apps.b1, apps.b2, apps.o1, apps.o2
    st, body = call(prod, "GET", f"/inApps/v1/subscriptions/{o1}", b1, envs)
    expect(st == 200 and body["bundleId"] == b1 and body["appAppleId"] == world1.app_apple_id,
           "app 1's id with app 1's bid", f"200 {b1}", (st, body and body.get("bundleId")))
    st, body = call(prod, "GET", f"/inApps/v1/subscriptions/{o2}", b2, envs)
    ok = st == 200 and body["bundleId"] == b2 and body["appAppleId"] == world2.app_apple_id
    if ok:
        items = [i for g in body["data"] for i in g["lastTransactions"]]
        tx = payload(items[-1]["signedTransactionInfo"])
        ok = tx["bundleId"] == b2 and tx["originalTransactionId"] == o2 and \
            body["data"][0]["subscriptionGroupIdentifier"] == "20030003"
    expect(ok, "app 2's id with app 2's bid (answer and signed transaction name app 2)", f"200 {b2}",
           (st, body if st != 200 else body.get("bundleId")))
    for path in (f"/inApps/v1/subscriptions/{o1}", f"/inApps/v2/history/{o1}", f"/inApps/v1/transactions/{o1}"):
        st, body = call(prod, "GET", path, b2, envs)
        expect(st == 404 and body == {"errorMessage": "Transaction id not found.", "errorCode": 4040010} or
               (st == 404 and body.get("errorCode") == 4040010), f"GET {path} (app 1's id) with app 2's bid",
               "404 4040010", (st, body))
    for path in (f"/inApps/v1/subscriptions/{o2}", f"/inApps/v2/history/{o2}", f"/inApps/v1/transactions/{o2}"):
        st, body = call(prod, "GET", path, b1, envs)
        expect(st == 404 and body.get("errorCode") == 4040010, f"GET {path} (app 2's id) with app 1's bid",
               "404 4040010", (st, body))
    st, body = call(prod, "GET", f"/inApps/v2/history/{o2}", b2, envs)
    expect(st == 200 and body["bundleId"] == b2 and all(payload(t)["bundleId"] == b2 for t in body["signedTransactions"]),
           "app 2's history with app 2's bid", f"200, transactions of {b2}", (st, body if st != 200 else body["bundleId"]))
    st, body = call(prod, "GET", f"/inApps/v1/transactions/{o2}", b2, envs)
    expect(st == 200 and payload(body["signedTransactionInfo"])["bundleId"] == b2, "app 2's transaction", "200", st)


def unknown_bids(apps: Apps):
    """A bid the server does not serve: 401, no body."""
    envs, prod, b1, night0, o1 = apps.envs, apps.prod, apps.b1, apps.night0, apps.o1
    # A bid the server does not serve: 401, no body; the same token's bid of app 2 on a one-app server too.
    for bid in ("com.example.other", b1 + ".app3", ""):
        st, body = call(prod, "GET", f"/inApps/v1/subscriptions/{o1}", bid, envs)
        expect(st == 401 and body is None, f"bid {bid!r}", "401 with no body", (st, body))
    st, body = call(prod, "POST", "/inApps/v1/notifications/history", "com.example.other", envs,
                    {"startDate": night0 - 10 * scenario.DAY, "endDate": night0})
    expect(st == 401, "notification history with an unknown bid", 401, st)


def notification_histories(apps: Apps):
    """Notification history: each app its own, page tokens and the transactionId filter too."""
    envs, prod, world1, world2, b1, b2, night0, o1, o2 = \
        apps.envs, apps.prod, apps.world1, apps.world2, apps.b1, apps.b2, apps.night0, apps.o1, apps.o2
    def history(bid: str, body: dict) -> tuple[int, list[dict]]:
        records, token_ = [], None
        while True:
            st_, page = call(prod, "POST", "/inApps/v1/notifications/history" + (f"?paginationToken={token_}" if token_ else ""),
                             bid, envs, body)
            if st_ != 200:
                return st_, records
            records += [payload(r["signedPayload"]) for r in page["notificationHistory"]]
            if not page["hasMore"]:
                return 200, records
            token_ = page["paginationToken"]

    window = {"startDate": night0 - 170 * scenario.DAY, "endDate": night0 + scenario.DAY}
    for w, bid in ((world1, b1), (world2, b2)):
        st, records = history(bid, window)
        want = {n.uuid for n in w.notifications if n.environment == "Production" and window["startDate"] <= n.signed_ms < w.now_ms}
        got = {p["notificationUUID"] for p in records}
        expect(st == 200 and got == want, f"notification history of {bid}", f"its {len(want)} notifications",
               f"{st}: {len(got)}, {len(got - want)} not its own, {len(want - got)} missing")
        wrong = [p for p in records if p["data"]["bundleId"] != bid or p["data"].get("appAppleId") != w.app_apple_id]
        expect(not wrong, f"notification history of {bid}: data.bundleId and appAppleId", f"{bid} {w.app_apple_id}",
               [(p["data"]["bundleId"], p["data"].get("appAppleId")) for p in wrong[:3]])
    # A page token of app 1's history is no good for app 2's (same body).
    st, page = call(prod, "POST", "/inApps/v1/notifications/history", b1, envs, window)
    tok = page.get("paginationToken")
    expect(bool(tok), "app 1's history has a second page", "a pagination token", page.get("hasMore"))
    if tok:
        st, body = call(prod, "POST", f"/inApps/v1/notifications/history?paginationToken={tok}", b2, envs, window)
        expect(st == 400 and body.get("errorCode") == 4000014, "app 1's pagination token with app 2's bid", "400 4000014", (st, body))
    st, body = call(prod, "POST", "/inApps/v1/notifications/history", b2, envs, dict(window, transactionId=o1))
    expect(st == 404 and body.get("errorCode") == 4040010, "app 2's history filtered by app 1's transaction id",
           "404 4040010", (st, body))
    st, records = history(b2, dict(window, transactionId=o2))
    expect(st == 200 and records and all(p["data"]["bundleId"] == b2 for p in records),
           "app 2's history filtered by its own transaction id", "200, its records", (st, len(records)))
    apps.window = window


def consumption(apps: Apps):
    """Send Consumption Information: recorded in the app's own truth."""
    envs, prod, world1, world2, b1, b2, o2 = apps.envs, apps.prod, apps.world1, apps.world2, apps.b1, apps.b2, apps.o2
    t2 = world2.subs[o2].latest.transaction_id
    st, body = call(prod, "PUT", f"/inApps/v2/transactions/consumption/{t2}", b2, envs,
                    {"customerConsented": True, "sampleContentProvided": False, "deliveryStatus": "DELIVERED"})
    expect(st == 202, "consumption information for app 2's transaction", 202, (st, body))
    st, body = call(prod, "PUT", f"/inApps/v2/transactions/consumption/{t2}", b1, envs,
                    {"customerConsented": True, "sampleContentProvided": False, "deliveryStatus": "DELIVERED"})
    expect(st == 404 and body.get("errorCode") == 4040010, "consumption information for app 2's transaction with app 1's bid",
           "404 4040010", (st, body))
    expect([p["status"] for p in world2.consumption_puts] == [202] and [p["status"] for p in world1.consumption_puts] == [404],
           "consumption records by app", "app 2: [202], app 1: [404]",
           ([p["status"] for p in world2.consumption_puts], [p["status"] for p in world1.consumption_puts]))
    apps.t2 = t2


def rate_buckets(apps: Apps):
    """Rate buckets per app: app 1's status bucket exhausted, app 2's untouched."""
    envs, prod, b1, b2, o1, o2 = apps.envs, apps.prod, apps.b1, apps.b2, apps.o1, apps.o2
    statuses = []
    for _ in range(80):
        statuses.append(call(prod, "GET", f"/inApps/v1/subscriptions/{o1}", b1, envs)[0])
        if statuses[-1] == 429:
            break
    st2, _ = call(prod, "GET", f"/inApps/v1/subscriptions/{o2}", b2, envs)
    expect(statuses[-1] == 429 and st2 == 200, "rate buckets per app", "app 1 limited (429), app 2 answered (200)",
           f"app 1 {statuses[-1]} after {len(statuses)} calls, app 2 {st2}")
    time.sleep(1.1)
    calls2 = envs.production.app_calls[b2]
    expect(calls2.get("status", 0) >= 2 and "status_429" not in calls2 and envs.production.calls.get("status_429", 0) >= 1,
           "calls counted per app", "app 2's in app_calls, app 1's 429 in calls", (calls2, envs.production.calls.get("status_429")))


def refusal(apps: Apps):
    """--refuse-app: every request of the refused app 401, the others answered."""
    envs, prod, b1, b2, o1, o2, window, t2 = \
        apps.envs, apps.prod, apps.b1, apps.b2, apps.o1, apps.o2, apps.window, apps.t2
    rejected = len(envs.production.rejections)
    envs.refuse({b2})
    st, body = call(prod, "GET", f"/inApps/v1/subscriptions/{o2}", b2, envs)
    expect(st == 401 and body is None, "refused app 2: status", "401 with no body", (st, body))
    st, _ = call(prod, "POST", "/inApps/v1/notifications/history", b2, envs, window)
    expect(st == 401, "refused app 2: notification history", 401, st)
    st, _ = call(prod, "PUT", f"/inApps/v2/transactions/consumption/{t2}", b2, envs, {"customerConsented": True})
    expect(st == 401, "refused app 2: consumption", 401, st)
    st, _ = call(envs.sandbox.url, "POST", "/inApps/v1/notifications/history", b2, envs, window)
    expect(st == 401, "refused app 2: the sandbox server too", 401, st)
    st, _ = call(prod, "GET", f"/inApps/v1/subscriptions/{o1}", b1, envs)
    expect(st == 200, "app 1 while app 2 is refused", 200, st)
    expect(envs.production.refusals.get(b2) == 3 and len(envs.production.rejections) == rejected,
           "refusals counted apart from rejections", "3 refusals, no new JWT rejection",
           (envs.production.refusals, envs.production.rejections[rejected:][:3]))
    envs.refuse(())
    st, _ = call(prod, "GET", f"/inApps/v1/subscriptions/{o2}", b2, envs)
    expect(st == 200, "app 2 after the refusal", 200, st)


def truth_and_clock(apps: Apps):
    """Ground truth: the first app's as before (plus the list of apps), ?bundle_id= for another;
    the clock moves every app."""
    prod, world1, world2, script1, app2, b1, b2, night0 = \
        apps.prod, apps.world1, apps.world2, apps.script1, apps.app2, apps.b1, apps.b2, apps.night0
    st, truth = call(prod, "GET", "/_indie/truth")
    expect(st == 200 and set(truth["subscriptions"]) == set(world1.subs) and
           [a["bundleId"] for a in truth.get("apps", [])] == [b1, b2], "GET /_indie/truth", f"app 1's, apps {b1}, {b2}",
           (st, len(truth.get("subscriptions", {})), truth.get("apps")))
    st, truth2 = call(prod, "GET", f"/_indie/truth?bundle_id={b2}")
    expect(st == 200 and set(truth2["subscriptions"]) == set(world2.subs), "GET /_indie/truth?bundle_id=app 2",
           f"its {len(world2.subs)} subscriptions", (st, len(truth2.get("subscriptions", {}))))
    st, body = call(prod, "GET", "/_indie/truth?bundle_id=com.example.other")
    expect(st == 404, "truth of an unknown bundle id", 404, (st, body))
    later = scenario.night_ms(1)
    for at, otid, action, kw in script1.actions:
        if night0 < at <= later:
            world1.act(otid, action, at, **kw)
    app2.advance_to(later)
    st, _ = call(prod, "POST", f"/_indie/clock/{later}")
    expect(st == 200 and world1.now_ms == later == world2.now_ms, "POST /_indie/clock moves every app", later,
           (world1.now_ms, world2.now_ms))
    apps.later = later


def to_the_end(apps: Apps):
    """Both scripts to their end: the ids never meet."""
    world1, world2, script1, app2, later = apps.world1, apps.world2, apps.script1, apps.app2, apps.later
    for at, otid, action, kw in script1.actions:
        if at > later:
            world1.act(otid, action, at, **kw)
    app2.advance_to(scenario.night_ms(12))
    expect(not set(world1.txn_index) & set(world2.txn_index), "transaction ids after every scripted change", "disjoint",
           sorted(set(world1.txn_index) & set(world2.txn_index))[:5])


def one_app_server(b1: str, b2: str):
    """A one-app server (today's): app 2's bid is 401."""
    one = srv.Environments(tempfile.mkdtemp(prefix="indie-selftest-"), first_app.build_world()[0])
    try:
        o = next(iter(one.world.subs))
        st, _ = call(one.production.url, "GET", f"/inApps/v1/subscriptions/{o}", b1, one)
        expect(st in (200, 404), "one-app server, app 1's bid", "answered", st)
        st, body = call(one.production.url, "GET", f"/inApps/v1/subscriptions/{o}", b2, one)
        expect(st == 401 and body is None, "one-app server, app 2's bid", "401", (st, body))
        st, truth = call(one.production.url, "GET", "/_indie/truth")
        expect("apps" not in truth, "one-app server's truth", "no apps list (as before)", sorted(truth))
    finally:
        one.stop()


def main() -> int:
    apps = two_apps()
    try:
        for step in (at_night_0, statuses_and_transactions, unknown_bids, notification_histories, consumption,
                     rate_buckets, refusal, truth_and_clock, to_the_end):
            step(apps)
    finally:
        apps.envs.stop()
    one_app_server(apps.b1, apps.b2)
    print(f"{passed} passed, {failed} failed", flush=True)
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
