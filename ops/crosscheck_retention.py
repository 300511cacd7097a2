#!/usr/bin/env python3
"""Apple's Get Retention Message, as an outside party sends it, against `churnwatch serve`.

Usage:
  crosscheck_retention.py pki DIR
      Makes a chain of its own (root, intermediate with Apple's WWDR OID, leaf with the
      receipt-signing OID: ops/independent-appstore/pki.py) and writes DIR/root.pem for
      churnwatch's APPSTORE_ROOT_CERTS, and what `check` needs to sign with it.
  crosscheck_retention.py check DIR URL APP_APPLE_ID BUNDLE_ID KEY_FILE OTID:PRODUCT...
      For each subscription: signs a DecodedRealtimeRequestBody with that chain, checks that Apple's
      SignedDataVerifier (app-store-server-library) accepts it, POSTs it to URL, and decodes the
      answer with the library's RealtimeResponseBody: exactly one member, a UUID message id, and a
      promotional offer's signatureV2 verified with the In-App Purchase key (KEY_FILE) and its
      claims checked. A retry of the same request must get the same answer; a request signed 10
      minutes ago must be refused.
      Prints one JSON line: {"answered", "kinds", "retries_same", "stale_refused", "failures"}.
"""
import base64
import json
import os
import sys
import time
import urllib.error
import urllib.request
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "independent-appstore"))
from pki import PKI, b64url, b64url_decode  # noqa: E402

from appstoreserverlibrary.models.Environment import Environment  # noqa: E402
from appstoreserverlibrary.models.LibraryUtility import _get_cattrs_converter  # noqa: E402
from appstoreserverlibrary.models.RealtimeResponseBody import RealtimeResponseBody  # noqa: E402
from appstoreserverlibrary.signed_data_verifier import SignedDataVerifier  # noqa: E402
from cryptography.hazmat.primitives import hashes, serialization  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import ec  # noqa: E402
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature, encode_dss_signature  # noqa: E402


class Signer:
    """Signs with the chain `pki` wrote: the leaf's key, and x5c leaf first."""

    def __init__(self, directory):
        self.key = serialization.load_pem_private_key(open(os.path.join(directory, "leaf-key.pem"), "rb").read(), None)
        self.x5c = json.load(open(os.path.join(directory, "x5c.json")))

    def root_der(self):
        return base64.b64decode(self.x5c[-1])

    def sign_jws(self, payload):
        header = {"alg": "ES256", "x5c": self.x5c}
        signing_input = b64url(json.dumps(header).encode()) + "." + b64url(json.dumps(payload).encode())
        r, s = decode_dss_signature(self.key.sign(signing_input.encode(), ec.ECDSA(hashes.SHA256())))
        return signing_input + "." + b64url(r.to_bytes(32, "big") + s.to_bytes(32, "big"))


def post(url, payload):
    body = json.dumps({"signedPayload": payload}).encode()
    req = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"}, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def check(directory, url, app_apple_id, bundle_id, key_file, subscriptions):
    pki = Signer(directory)
    root_der = pki.root_der()
    verifier = SignedDataVerifier([root_der], False, Environment.PRODUCTION, bundle_id, app_apple_id)
    in_app = serialization.load_pem_private_key(open(key_file, "rb").read(), None).public_key()
    converter = _get_cattrs_converter(RealtimeResponseBody)
    failures, kinds, answered, same, stale_refused = [], {}, 0, 0, 0
    for item in subscriptions:
        otid, product = item.split(":", 1)
        request = {"originalTransactionId": otid, "appAppleId": app_apple_id, "productId": product, "userLocale": "en-US",
                   "requestIdentifier": str(uuid.uuid4()), "signedDate": int(time.time() * 1000), "environment": "Production"}
        jws = pki.sign_jws(request)
        decoded = verifier.verify_and_decode_realtime_request(jws)  # Apple's library accepts what we send
        assert decoded.originalTransactionId == otid
        status, text = post(url, jws)
        if status != 200:
            failures.append(f"{otid}: HTTP {status} {text[:200]}")
            continue
        answered += 1
        body = converter.structure(json.loads(text), RealtimeResponseBody)
        members = [m for m in ("message", "alternateProduct", "promotionalOffer") if getattr(body, m) is not None]
        if len(members) != 1:
            failures.append(f"{otid}: {len(members)} members in {text[:200]}")
            continue
        member = getattr(body, members[0])
        kinds[members[0]] = kinds.get(members[0], 0) + 1
        if not isinstance(member.messageIdentifier, uuid.UUID):
            failures.append(f"{otid}: messageIdentifier {member.messageIdentifier!r} is not a UUID")
        if members[0] == "promotionalOffer":
            offer = member.promotionalOfferSignatureV2 or ""
            head, claims_part, sig = offer.split(".")
            r, s = int.from_bytes(b64url_decode(sig)[:32], "big"), int.from_bytes(b64url_decode(sig)[32:], "big")
            try:
                in_app.verify(encode_dss_signature(r, s), f"{head}.{claims_part}".encode(), ec.ECDSA(hashes.SHA256()))
            except Exception as e:  # noqa: BLE001
                failures.append(f"{otid}: the offer's signature does not verify with the In-App Purchase key: {e}")
            claims = json.loads(b64url_decode(claims_part))
            if claims.get("productId") != product or claims.get("bid") != bundle_id or claims.get("aud") != "promotional-offer":
                failures.append(f"{otid}: offer claims {claims}")
        again_status, again = post(url, jws)
        same += int(again_status == 200 and json.loads(again) == json.loads(text))
    otid, product = subscriptions[0].split(":", 1)
    old = {"originalTransactionId": otid, "appAppleId": app_apple_id, "productId": product, "userLocale": "en-US",
           "requestIdentifier": str(uuid.uuid4()), "signedDate": int(time.time() * 1000) - 600_000, "environment": "Production"}
    status, _ = post(url, pki.sign_jws(old))
    stale_refused = int(400 <= status < 500)
    print(json.dumps({"answered": answered, "kinds": kinds, "retries_same": same, "stale_refused": stale_refused,
                      "failures": failures[:20]}))


if __name__ == "__main__":
    if sys.argv[1] == "pki":
        pki = PKI(sys.argv[2])
        with open(os.path.join(sys.argv[2], "leaf-key.pem"), "wb") as f:
            f.write(pki.leaf_key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                               serialization.NoEncryption()))
        with open(os.path.join(sys.argv[2], "x5c.json"), "w") as f:
            json.dump(pki.x5c, f)
        with open(os.path.join(sys.argv[2], "root.pem"), "wb") as f:
            f.write(pki.root.public_bytes(serialization.Encoding.PEM))
    else:
        check(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5], sys.argv[6], sys.argv[7:])
