"""Runs Apple's App Store Server Library (Python) over promotional offers signed by churnwatch.

Input: a JSON file {"key_pem", "key_id", "issuer_id", "bundle_id", "cases": [{"name", "product_id",
"offer_id", "app_account_token", "nonce", "timestamp", "transaction_id", "signature", "jws"}]},
where signature and jws are churnwatch's. For each case, Apple's PromotionalOfferSignatureCreator
signs the same fields and PromotionalOfferV2SignatureCreator makes its JWS. Output (stdout): a JSON
list of {"name", "apple_message" (base64 of the bytes Apple's library signed), "apple_signature",
"churnwatch_signature_verifies" (churnwatch's signature checked with the public key over Apple's
message), "apple_jws", "apple_jws_header", "apple_jws_claims", "churnwatch_jws_header",
"churnwatch_jws_claims" (churnwatch's JWS decoded by PyJWT, which verifies its signature with
the public key and the audience), "error"}.
"""
import base64
import json
import sys
import uuid

import jwt
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ec import ECDSA
from cryptography.hazmat.primitives.hashes import SHA256

from appstoreserverlibrary.jws_signature_creator import PromotionalOfferV2SignatureCreator
from appstoreserverlibrary.promotional_offer import PromotionalOfferSignatureCreator


class Recorder:
    """Wraps the library's key to record the exact bytes it signs."""

    def __init__(self, key):
        self.key = key
        self.signed = []

    def sign(self, data, algorithm):
        self.signed.append(data)
        return self.key.sign(data, algorithm)


def check(spec, case):
    key_pem = spec["key_pem"].encode()
    public_key = serialization.load_pem_private_key(key_pem, password=None).public_key()
    out = {"name": case["name"]}
    try:
        v1 = PromotionalOfferSignatureCreator(key_pem, spec["key_id"], spec["bundle_id"])
        recorder = Recorder(v1._signing_key)
        v1._signing_key = recorder
        out["apple_signature"] = v1.create_signature(case["product_id"], case["offer_id"], case.get("app_account_token") or "",
                                                     uuid.UUID(case["nonce"]), case["timestamp"])
        message = recorder.signed[0]
        out["apple_message"] = base64.b64encode(message).decode()
        try:
            public_key.verify(base64.b64decode(case["signature"]), message, ECDSA(SHA256()))
            out["churnwatch_signature_verifies"] = True
        except InvalidSignature:
            out["churnwatch_signature_verifies"] = False

        v2 = PromotionalOfferV2SignatureCreator(key_pem, spec["key_id"], spec["issuer_id"], spec["bundle_id"])
        apple_jws = v2.create_signature(case["product_id"], case["offer_id"], case.get("transaction_id"))
        out["apple_jws"] = apple_jws
        out["apple_jws_header"] = jwt.get_unverified_header(apple_jws)
        out["apple_jws_claims"] = jwt.decode(apple_jws, public_key, algorithms=["ES256"], audience="promotional-offer")
        out["churnwatch_jws_header"] = jwt.get_unverified_header(case["jws"])
        out["churnwatch_jws_claims"] = jwt.decode(case["jws"], public_key, algorithms=["ES256"], audience="promotional-offer")
    except Exception as e:  # report, never hide: the Swift test fails on any error
        out["error"] = type(e).__name__ + ": " + str(e)
    return out


def main():
    with open(sys.argv[1]) as f:
        spec = json.load(f)
    json.dump([check(spec, c) for c in spec["cases"]], sys.stdout)


if __name__ == "__main__":
    main()
