"""Runs Apple's App Store Server Library (Python) over JWS cases written by churnwatch's tests.

Input: a JSON file {"cases": [{"name", "kind": "transaction"|"renewal", "jws", "roots": [base64 DER],
"bundleId", "environment", "appAppleId"}]}. Output (stdout): a JSON list of
{"name", "accepted", "status"} where status is Apple's VerificationStatus name, or "OK".
Offline mode (enable_online_checks=False), as churnwatch verifies: validation time = signedDate.
"""
import base64
import json
import sys

from appstoreserverlibrary.models.Environment import Environment
from appstoreserverlibrary.signed_data_verifier import SignedDataVerifier, VerificationException


def check(case):
    roots = [base64.b64decode(r) for r in case["roots"]]
    verifier = SignedDataVerifier(roots, False, Environment(case["environment"]), case["bundleId"], case.get("appAppleId"))
    try:
        if case["kind"] == "renewal":
            verifier.verify_and_decode_renewal_info(case["jws"])
        else:
            verifier.verify_and_decode_signed_transaction(case["jws"])
        return {"name": case["name"], "accepted": True, "status": "OK"}
    except VerificationException as e:
        return {"name": case["name"], "accepted": False, "status": e.status.name}
    except Exception as e:  # the library should only raise VerificationException; report anything else
        return {"name": case["name"], "accepted": False, "status": "EXCEPTION " + type(e).__name__}


def main():
    with open(sys.argv[1]) as f:
        cases = json.load(f)["cases"]
    json.dump([check(c) for c in cases], sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
