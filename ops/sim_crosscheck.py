#!/usr/bin/env python3
"""Checks what appstore-sim serves with Apple's official Python library.

Usage: sim_crosscheck.py PKI_DIR PRODUCTION_PORT SANDBOX_PORT TOKEN [LIMIT]

Every status and history payload of up to LIMIT subscribers must verify and decode with
SignedDataVerifier (trusting only the simulator's root.der) and agree with /_sim/truth;
the fault payloads must be rejected (rogue chain, truncated JWS, foreign bundle id) or, for
unknown enum values and extra fields, verify and keep the raw values.
Prints one line per finding and a closing "N passed, M failed" line; exits 1 on any failure.
"""
import base64
import json
import sys
import urllib.request

from appstoreserverlibrary.models.Environment import Environment
from appstoreserverlibrary.signed_data_verifier import SignedDataVerifier, VerificationException

pki_dir, prod_port, sandbox_port, token = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
limit = int(sys.argv[5]) if len(sys.argv) > 5 else 200

env = dict(line.split("=", 1) for line in open(f"{pki_dir}/churnwatch.env").read().splitlines() if "=" in line)
bundle_id = env["APPSTORE_BUNDLE_ID"]
app_apple_id = int(env["APPSTORE_APP_APPLE_ID"])
root = open(f"{pki_dir}/root.der", "rb").read()
verifiers = {
    "Production": SignedDataVerifier([root], False, Environment.PRODUCTION, bundle_id, app_apple_id),
    "Sandbox": SignedDataVerifier([root], False, Environment.SANDBOX, bundle_id, app_apple_id),
}


def get(port, path, auth=True):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}")
    if auth:
        req.add_header("Authorization", f"Bearer {token}")
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())


truth = get(prod_port, "/_sim/truth", auth=False)["subscriptions"]
fault_by_otid = {s["original_transaction_id"]: s["fault"] for s in truth}


def unverified_owner(jws):
    parts = jws.split(".")
    if len(parts) != 3:
        return None
    try:
        return json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))["originalTransactionId"]
    except Exception:
        return None

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


EXPECT_TX = {None: "OK", "unknown_values": "OK", "foreign_bundle": "INVALID_APP_IDENTIFIER",
             "rogue_chain": "VERIFICATION_FAILURE", "truncated_jws": "VERIFICATION_FAILURE"}
EXPECT_RENEWAL = dict(EXPECT_TX, foreign_bundle="OK")

chosen = [s for s in truth if s["fault"] is None][:limit] + [s for s in truth if s["fault"] is not None][: max(20, limit // 5)]
for sub in chosen:
    otid, fault, environment = sub["original_transaction_id"], sub["fault"], sub["environment"]
    port = sandbox_port if environment == "Sandbox" else prod_port
    v = verifiers[environment]
    status = get(port, f"/inApps/v1/subscriptions/{otid}")
    items = [i for g in status["data"] for i in g["lastTransactions"] if i["originalTransactionId"] == otid]
    check(len(items) == 1, f"{otid}: status response has its item")
    if not items:
        continue
    item = items[0]
    tv, t = verdict(v.verify_and_decode_signed_transaction, item["signedTransactionInfo"])
    rv, r = verdict(v.verify_and_decode_renewal_info, item["signedRenewalInfo"])
    counts[(fault or "none", "transaction", tv)] = counts.get((fault or "none", "transaction", tv), 0) + 1
    counts[(fault or "none", "renewal", rv)] = counts.get((fault or "none", "renewal", rv), 0) + 1
    check(tv == EXPECT_TX[fault], f"{otid} ({fault}): transaction verdict {tv}, expected {EXPECT_TX[fault]}")
    check(rv == EXPECT_RENEWAL[fault], f"{otid} ({fault}): renewal verdict {rv}, expected {EXPECT_RENEWAL[fault]}")
    if fault is None and t is not None and r is not None:
        check(item["status"] == sub["status"], f"{otid}: status {item['status']} vs truth {sub['status']}")
        check(t.transactionId == sub["transaction_id"], f"{otid}: transactionId {t.transactionId} vs truth {sub['transaction_id']}")
        check(t.productId == sub["product_id"], f"{otid}: productId")
        check(r.autoRenewStatus is not None and bool(r.autoRenewStatus.value) == sub["auto_renew"], f"{otid}: autoRenewStatus")
        check((r.rawExpirationIntent if hasattr(r, "rawExpirationIntent") else
               (r.expirationIntent.value if r.expirationIntent else None)) == sub["expiration_intent"], f"{otid}: expirationIntent")
    if fault == "unknown_values" and r is not None and sub["expiration_intent"] is not None:
        check(r.expirationIntent is None and r.rawExpirationIntent == 9, f"{otid}: unknown expirationIntent kept raw")
    # Transaction history, every page.
    revision, pages, n = None, 0, 0
    while True:
        h = get(port, f"/inApps/v2/history/{otid}" + (f"?revision={revision}" if revision else ""))
        for jws in h["signedTransactions"]:
            hv, _ = verdict(v.verify_and_decode_signed_transaction, jws)
            # A customer's history holds the transactions of all their subscriptions, each with
            # its own fault; a JWS too broken to read unverified is a truncated one.
            owner = unverified_owner(jws)
            expected = EXPECT_TX[fault_by_otid.get(owner)] if owner else "VERIFICATION_FAILURE"
            check(hv == expected, f"{otid}: history transaction of {owner} verdict {hv}, expected {expected}")
            n += 1
        pages += 1
        revision = h["revision"]
        if not h["hasMore"] or pages > 50:
            break

for (fault, kind, v), n in sorted(counts.items()):
    print(f"  {fault:15} {kind:11} {v:24} {n}")
print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
