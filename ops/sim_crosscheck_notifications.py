#!/usr/bin/env python3
"""Checks appstore-sim's Notifications V2 and Get Notification History with Apple's Python library.

Usage: sim_crosscheck_notifications.py PKI_DIR PRODUCTION_PORT SANDBOX_PORT TOKEN

AppStoreServerAPIClient.get_notification_history pages through the last 10 days of each
environment; every record must be the next notified change of /_sim/notifications (same
notificationUUID, type and subtype), and SignedDataVerifier.verify_and_decode_notification must
accept it (and its inner transaction and renewal info), or reject it as the subscription's payload
fault says. A filtered query and Apple's errors are checked too.
Prints failures, a verdict table and "N passed, M failed"; exits 1 on any failure.
"""
import json
import sys
import time
import urllib.request

from appstoreserverlibrary.api_client import APIException, AppStoreServerAPIClient
from appstoreserverlibrary.models.Environment import Environment
from appstoreserverlibrary.models.NotificationHistoryRequest import NotificationHistoryRequest
from appstoreserverlibrary.models.NotificationTypeV2 import NotificationTypeV2
from appstoreserverlibrary.models.Subtype import Subtype
from appstoreserverlibrary.signed_data_verifier import SignedDataVerifier, VerificationException

pki_dir, prod_port, sandbox_port, token = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
env = dict(line.split("=", 1) for line in open(f"{pki_dir}/churnwatch.env").read().splitlines() if "=" in line)
bundle_id, app_apple_id = env["APPSTORE_BUNDLE_ID"], int(env["APPSTORE_APP_APPLE_ID"])
root = open(f"{pki_dir}/root.der", "rb").read()
key = open(env["APPSTORE_PRIVATE_KEY_PATH"], "rb").read()


class SimClient(AppStoreServerAPIClient):
    """Apple's client with the simulator's base URL. Its own tokens carry no `iat`; until the
    simulator accepts those, it sends the simulator-minted token (same key, issuer and bundle)."""

    def __init__(self, environment, port):
        super().__init__(key, env["APPSTORE_KEY_ID"], env["APPSTORE_ISSUER_ID"], bundle_id, environment)
        self._base_url = f"http://127.0.0.1:{port}"

    def _generate_token(self):
        return token


def get(port, path):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=30) as r:
        return json.loads(r.read())


def iso(ms):
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ms / 1000)) + f".{ms % 1000:03d}Z"


passed = failed = 0
counts = {}


def check(ok, what):
    global passed, failed
    if ok:
        passed += 1
    else:
        failed += 1
        print(f"FAIL {what}")


def verdict(fn, jws):
    try:
        return "OK", fn(jws)
    except VerificationException as e:
        return e.status.name, None


EXPECT = {None: "OK", "unknown_values": "OK", "foreign_bundle": "INVALID_APP_IDENTIFIER",
          "rogue_chain": "VERIFICATION_FAILURE", "truncated_jws": "VERIFICATION_FAILURE"}
now = int(time.mktime(time.strptime(get(prod_port, "/_sim/clock")["now"], "%Y-%m-%dT%H:%M:%SZ")) - time.timezone) * 1000
fault_by_otid = {s["original_transaction_id"]: s["fault"] for s in get(prod_port, "/_sim/truth")["subscriptions"]}


def page_all(client, request):
    items, pagination, pages = [], None, 0
    while True:
        r = client.get_notification_history(pagination, request)
        items += r.notificationHistory or []
        pages += 1
        if not r.hasMore or pages > 2000:
            return items, pages
        pagination = r.paginationToken


for environment, port in [(Environment.PRODUCTION, prod_port), (Environment.SANDBOX, sandbox_port)]:
    name = environment.value
    client = SimClient(environment, port)
    verifier = SignedDataVerifier([root], False, environment, bundle_id, app_apple_id)
    start = now - 10 * 86_400_000
    items, pages = page_all(client, NotificationHistoryRequest(startDate=start, endDate=now + 86_400_000))
    truth = [n for n in get(port, f"/_sim/notifications?from={iso(start)}&to={iso(now + 1)}")["notifications"]
             if n["environment"] == name and n["notified"]]
    check(len(items) == len(truth) and len(items) > 0, f"{name}: {len(items)} records in {pages} pages, truth {len(truth)}")
    for item, t in zip(items, truth):
        fault = fault_by_otid.get(t["original_transaction_id"])
        v, n = verdict(verifier.verify_and_decode_notification, item.signedPayload)
        counts[(name, fault or "none", v)] = counts.get((name, fault or "none", v), 0) + 1
        check(v == EXPECT[fault], f"{name} {t['notification_uuid']} ({fault}): verdict {v}, expected {EXPECT[fault]}")
        check(bool(item.sendAttempts), f"{name} {t['notification_uuid']}: sendAttempts")
        if n is None:
            continue
        check(n.notificationUUID == t["notification_uuid"], f"{name}: record order, {n.notificationUUID} vs {t['notification_uuid']}")
        check(n.rawNotificationType == t["notification_type"] and n.rawSubtype == t["subtype"],
              f"{name} {n.notificationUUID}: {n.rawNotificationType}/{n.rawSubtype} vs {t['notification_type']}/{t['subtype']}")
        check(iso(n.signedDate) == t["signed_date"], f"{name} {n.notificationUUID}: signedDate")
        if fault is None:
            tv, tx = verdict(verifier.verify_and_decode_signed_transaction, n.data.signedTransactionInfo)
            rv, _ = verdict(verifier.verify_and_decode_renewal_info, n.data.signedRenewalInfo)
            check(tv == "OK" and rv == "OK", f"{name} {n.notificationUUID}: inner verdicts {tv} {rv}")
            check(tx is not None and tx.originalTransactionId == t["original_transaction_id"], f"{name} {n.notificationUUID}: owner")

client = SimClient(Environment.PRODUCTION, prod_port)
start = now - 30 * 86_400_000
filtered, _ = page_all(client, NotificationHistoryRequest(
    startDate=start, endDate=now, notificationType=NotificationTypeV2.DID_RENEW, notificationSubtype=Subtype.BILLING_RECOVERY))
truth = [n for n in get(prod_port, f"/_sim/notifications?from={iso(start)}&to={iso(now)}")["notifications"]
         if n["environment"] == "Production" and n["notified"] and n["notification_type"] == "DID_RENEW"
         and n["subtype"] == "BILLING_RECOVERY"]
check(len(filtered) == len(truth) > 0, f"DID_RENEW/BILLING_RECOVERY filter: {len(filtered)} records, truth {len(truth)}")
for request, code in [(NotificationHistoryRequest(startDate=now, endDate=now - 1), 4000013),
                      (NotificationHistoryRequest(startDate=now - 181 * 86_400_000, endDate=now), 4000012),
                      (NotificationHistoryRequest(startDate=start, endDate=now, notificationSubtype=Subtype.VOLUNTARY), 4000018)]:
    try:
        client.get_notification_history(None, request)
        check(False, f"expected {code}")
    except APIException as e:
        check(e.http_status_code == 400 and e.raw_api_error == code, f"expected 400 {code}, got {e.http_status_code} {e.raw_api_error}")

for (environment, fault, v), n in sorted(counts.items()):
    print(f"  notifications {environment:10} {fault:15} {v:24} {n}")
print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
