#!/usr/bin/env python3
"""Apple's own Python client (app-store-server-library's AppStoreServerAPIClient) calls appstore-sim.

Usage: sim_python_client.py PKI_DIR PORT ORIGINAL_TRANSACTION_ID

The library mints its tokens its own way (no `iat` claim, `kid` header, no `typ`), as it does
against Apple. Calls Get All Subscription Statuses and Get Transaction History v2 (every page,
following `revision`) for the id, verifies every signed payload with SignedDataVerifier (trusting
only the simulator's root), and prints one JSON line:
{"statuses": N, "history": N, "pages": N, "verified": N}. On an API error prints
{"error": HTTP_STATUS, "api_error": CODE} and exits 1.
"""
import json
import sys

from appstoreserverlibrary.api_client import APIException, AppStoreServerAPIClient, GetTransactionHistoryVersion
from appstoreserverlibrary.models.Environment import Environment
from appstoreserverlibrary.models.TransactionHistoryRequest import TransactionHistoryRequest
from appstoreserverlibrary.signed_data_verifier import SignedDataVerifier

pki_dir, port, otid = sys.argv[1], int(sys.argv[2]), sys.argv[3]
env = dict(line.split("=", 1) for line in open(f"{pki_dir}/churnwatch.env").read().splitlines() if "=" in line)
key = open(env["APPSTORE_PRIVATE_KEY_PATH"], "rb").read()
bundle_id = env["APPSTORE_BUNDLE_ID"]
client = AppStoreServerAPIClient(key, env["APPSTORE_KEY_ID"], env["APPSTORE_ISSUER_ID"], bundle_id, Environment.PRODUCTION)
client._base_url = f"http://127.0.0.1:{port}"  # the library has no base-URL setting; Apple's host otherwise
root = open(f"{pki_dir}/root.der", "rb").read()
verifier = SignedDataVerifier([root], False, Environment.PRODUCTION, bundle_id, int(env["APPSTORE_APP_APPLE_ID"]))

try:
    verified = 0
    statuses = client.get_all_subscription_statuses(otid)
    items = [item for group in statuses.data or [] for item in group.lastTransactions or []]
    for item in items:
        verifier.verify_and_decode_signed_transaction(item.signedTransactionInfo)
        verified += 1
    history, pages, revision = 0, 0, None
    while True:
        page = client.get_transaction_history(otid, revision, TransactionHistoryRequest(), GetTransactionHistoryVersion.V2)
        pages += 1
        for jws in page.signedTransactions or []:
            verifier.verify_and_decode_signed_transaction(jws)
            history += 1
            verified += 1
        revision = page.revision
        if not page.hasMore:
            break
    print(json.dumps({"statuses": len(items), "history": history, "pages": pages, "verified": verified}))
except APIException as e:
    print(json.dumps({"error": e.http_status_code, "api_error": e.raw_api_error}))
    sys.exit(1)
