"""The Server API endpoints of the independent server that answer about transactions (fact sheet
§2-§4, §7 and "Refund requests"): Get All Subscription Statuses, Get Transaction History, Get
Transaction Info, Send Consumption Information and the legacy verifyReceipt. A mixin of
AppStoreServer (server.py), which routes the requests, limits their rate and sends the answers."""
from __future__ import annotations

import base64
import hashlib
import json

from model import PRODUCTS, Subscription, json_object
from pki import APIKey
from world import World

# Send Consumption Information (fact sheet "Refund requests"): the body's values.
DELIVERY_STATUSES = {"DELIVERED", "UNDELIVERED_QUALITY_ISSUE", "UNDELIVERED_WRONG_ITEM", "UNDELIVERED_SERVER_OUTAGE",
                     "UNDELIVERED_OTHER"}
REFUND_PREFERENCES = {"DECLINE", "GRANT_FULL", "GRANT_PRORATED"}


class TransactionEndpoints:
    # ---- Send Consumption Information (fact sheet "Refund requests") ----
    def consumption_received(self, h, method: str, tid: str, raw: bytes):
        """Every request to the consumption path is recorded for the truth of the app its token
        names (the first app's when it names none the server serves): the server's clock, the
        transaction id, the body as parsed, what it was answered; then answered."""
        w = self.apps.get(APIKey.claimed_bid(h.headers.get("Authorization")) or "", self.world)
        with w.lock:
            record = {"at": w.now_ms, "environment": self.environment, "method": method, "transactionId": tid,
                      "status": None, "errorCode": None}
            try:
                record["body"] = json.loads(raw.decode("utf-8")) if raw else None
            except Exception:  # noqa: BLE001
                record["body"] = raw.decode("utf-8", "replace")
            w.consumption_puts.append(record)
        h.indie_record = record  # send() writes the answer into it before the client has it
        try:
            if method != "PUT":
                return self.send(h, 404, {"errorCode": 4040000, "errorMessage": "Not found."})
            why, bid = self.key.verify(h.headers.get("Authorization"), self.apps)
            if why is not None:
                self.rejections.append(f"PUT consumption: {why}")
                self.log(f"[{self.environment}] 401 PUT consumption: {why}")
                return self.send(h, 401, None)
            if bid in self.refused:
                return self.refuse(h, bid, "PUT consumption")
            return self.limited(h, "consumption", lambda: self.consumption(h, w, tid, raw), tid, w)
        finally:
            h.indie_record = None  # the connection's next request is not this one (keep-alive)
            status = record["status"]
            self.log(f"[{self.environment}] consumption {tid} {json.dumps(record.get('body'), sort_keys=True)}: {status}"
                     f"{' ' + str(record['errorCode']) if record['errorCode'] else ''}")

    def consumption(self, h, w: World, tid: str, raw: bytes):
        """Apple's checks of a ConsumptionRequest body, then 202 Accepted with no body."""
        if self.lookup(h, w, tid) is None:
            return  # 4000006 or 4040010 sent
        body = json_object(raw)
        if body is None:
            return self.error(h, 4000000)
        if body.get("customerConsented") is not True:  # without the customer's consent nothing may be sent
            return self.error(h, 4000035)
        if not isinstance(body.get("sampleContentProvided"), bool):
            return self.error(h, 4000041)
        delivery = body.get("deliveryStatus")
        if not isinstance(delivery, str) or delivery not in DELIVERY_STATUSES:
            return self.error(h, 4000036)
        percentage, preference = body.get("consumptionPercentage"), body.get("refundPreference")
        if percentage is not None:
            if not isinstance(percentage, int) or isinstance(percentage, bool) or not 0 <= percentage <= 100_000:
                return self.error(h, 4000000)
            if delivery != "DELIVERED" and percentage != 0:  # nothing consumed of what was not delivered
                return self.error(h, 4000000)
            if preference == "GRANT_PRORATED":  # Apple computes the share for a prorated refund
                return self.error(h, 4000000)
        if preference is not None and (not isinstance(preference, str) or preference not in REFUND_PREFERENCES):
            return self.error(h, 4000000)
        self.send(h, 202, None)

    def lookup(self, h, w: World, any_id: str) -> Subscription | None:
        """The subscription of a transaction id of app `w` (another app's id is 4040010, as an
        id Apple does not know)."""
        if not any_id.isdigit() or len(any_id) > 20:
            self.error(h, 4000006)
            return None
        sub = w.txn_index.get(any_id)
        if sub is None or sub.environment != self.environment:
            self.error(h, 4040010)
            return None
        return sub

    def customer_subs(self, w: World, sub: Subscription) -> list[Subscription]:
        return [s for s in w.subs.values() if s.customer == sub.customer and s.environment == self.environment]

    def statuses(self, h, w: World, any_id: str, query: dict):
        sub = self.lookup(h, w, any_id)
        if sub is None:
            return
        if any_id in self.replay and (any_id, self.replay[any_id]) in self.recorded:
            self.calls["status_replayed"] = self.calls.get("status_replayed", 0) + 1
            return self.send(h, 200, self.recorded[(any_id, self.replay[any_id])])
        wanted = set()
        for v in query.get("status", []):
            if v not in {"1", "2", "3", "4", "5"}:
                return self.error(h, 4000031)
            wanted.add(int(v))
        now = w.now_ms
        groups: dict[str, list] = {}
        # The customer's other subscriptions come first: a client must pick its own by
        # originalTransactionId, not by position.
        for s in sorted(self.customer_subs(w, sub), key=lambda s: s.otid == sub.otid):
            st = s.status(now)
            if wanted and st not in wanted:
                continue
            pki = self.rogue if s.otid in self.forged and self.rogue else self.pki
            item = {"originalTransactionId": s.otid, "status": st,
                    "signedRenewalInfo": pki.sign_jws(w.renewal_payload(s)),
                    "signedTransactionInfo": pki.sign_jws(w.transaction_payload(s, s.latest))}
            groups.setdefault(s.group, []).append(item)
        body = {"data": [{"lastTransactions": items, "subscriptionGroupIdentifier": g} for g, items in groups.items()],
                "appAppleId": w.app_apple_id, "environment": self.environment,
                "bundleId": w.bundle_id, "serverRegion": "eu-central-1"}
        if not query:
            self.recorded[(any_id, w.now_ms)] = body
        self.send(h, 200, body)

    def history(self, h, w: World, any_id: str, query: dict):
        sub = self.lookup(h, w, any_id)
        if sub is None:
            return
        sort = query.get("sort", ["ASCENDING"])[-1]
        if sort not in ("ASCENDING", "DESCENDING"):
            return self.error(h, 4000021)
        for v in query.get("productType", []):
            if v not in ("AUTO_RENEWABLE", "NON_RENEWABLE", "CONSUMABLE", "NON_CONSUMABLE"):
                return self.error(h, 4000022)
        revoked = query.get("revoked", [None])[-1]
        if revoked not in (None, "true", "false"):
            return self.error(h, 4000030)
        try:
            start = int(query["startDate"][-1]) if "startDate" in query else None
        except ValueError:
            return self.error(h, 4000015)
        try:
            end = int(query["endDate"][-1]) if "endDate" in query else None
        except ValueError:
            return self.error(h, 4000016)
        if start is not None and end is not None and start >= end:
            return self.error(h, 4000013)
        filters = {k: v for k, v in sorted(query.items()) if k != "revision"}
        fhash = hashlib.sha256(json.dumps(filters).encode()).hexdigest()[:10]
        txns = [(s, t) for s in self.customer_subs(w, sub) for t in s.txns + s.one_offs]
        if start is not None:
            txns = [x for x in txns if x[1].purchase_ms >= start]
        if end is not None:
            txns = [x for x in txns if x[1].purchase_ms < end]
        if query.get("productId"):
            txns = [x for x in txns if x[1].product_id in query["productId"]]
        if query.get("subscriptionGroupIdentifier"):
            txns = [x for x in txns if x[1].product_id in PRODUCTS
                    and PRODUCTS[x[1].product_id][0] in query["subscriptionGroupIdentifier"]]
        type_names = {"AUTO_RENEWABLE": "Auto-Renewable Subscription", "NON_RENEWABLE": "Non-Renewing Subscription",
                      "CONSUMABLE": "Consumable", "NON_CONSUMABLE": "Non-Consumable"}
        if query.get("productType"):
            wanted_types = {type_names[v] for v in query["productType"]}
            txns = [x for x in txns if x[1].product_type in wanted_types]
        if revoked == "true":
            txns = [x for x in txns if x[1].revocation_ms is not None]
        elif revoked == "false":
            txns = [x for x in txns if x[1].revocation_ms is None]
        desc = sort == "DESCENDING"
        txns.sort(key=lambda x: (x[1].modified_ms, x[1].transaction_id), reverse=desc)
        cursor = None
        if "revision" in query:
            try:
                raw = base64.urlsafe_b64decode(query["revision"][-1].encode("ascii")).decode()
                tag, fh, mod, tid = raw.split("|")
                if tag != "indie-rev" or fh != fhash:
                    raise ValueError
                cursor = (int(mod), tid)
            except Exception:  # noqa: BLE001
                return self.error(h, 4000005)
        if cursor is not None:
            txns = [x for x in txns if ((x[1].modified_ms, x[1].transaction_id) < cursor if desc
                                        else (x[1].modified_ms, x[1].transaction_id) > cursor)]
        # Up to 20 per page: 20 on a first page, 9 on later ones; a full page always says
        # hasMore, so an exact multiple ends with an empty page (legal: "keep calling while hasMore").
        size = 9 if cursor is not None else 20
        page, rest = txns[:size], txns[size:]
        last_key = (page[-1][1].modified_ms, page[-1][1].transaction_id) if page else (cursor or (0, "0"))
        # Padding '=' kept and '-'/'_' used: a revision is an opaque string, to be sent back as is.
        revision = base64.urlsafe_b64encode(f"indie-rev|{fhash}|{last_key[0]}|{last_key[1]}".encode()).decode()
        body = {"hasMore": bool(rest) or len(page) == size, "revision": revision, "environment": self.environment,
                "signedTransactions": [self.pki.sign_jws(w.transaction_payload(s, t)) for s, t in page],
                "appAppleId": w.app_apple_id, "bundleId": w.bundle_id}
        self.send(h, 200, body)

    def transaction(self, h, w: World, tid: str):
        sub = self.lookup(h, w, tid)
        if sub is None:
            return
        t = next(t for t in sub.txns + sub.one_offs if t.transaction_id == tid)
        self.send(h, 200, {"signedTransactionInfo": self.pki.sign_jws(w.transaction_payload(sub, t))})


    def verify_receipt(self, h, raw: bytes):
        try:
            body = json.loads(raw)
            receipt = body["receipt-data"]
        except Exception:  # noqa: BLE001
            return self.send(h, 200, {"status": 21002, "environment": self.environment})
        # No JWT here: the receipt names its app (and the app's shared secret must come with it).
        for w in self.apps.values():
            with w.lock:
                subs = [s for s in w.subs.values() if s.receipt == receipt]
            if subs:
                break
        else:
            return self.send(h, 200, {"status": 21003, "environment": self.environment})
        with w.lock:
            return self._verify_receipt(h, w, body, subs[0])

    def _verify_receipt(self, h, w: World, body: dict, sub: Subscription):
        if sub.environment != self.environment:
            return self.send(h, 200, {"status": 21007 if sub.environment == "Sandbox" else 21008,
                                      "environment": self.environment})
        if body.get("password") != w.shared_secret:
            return self.send(h, 200, {"status": 21004, "environment": self.environment})
        mine = [s for s in self.customer_subs(w, sub) if s.receipt is not None]
        exclude = body.get("exclude-old-transactions") is True
        infos = []
        for s in mine:
            txns = [s.latest] if exclude else list(s.txns)
            infos += [w.legacy_transaction(s, t) for t in txns]
        w.rng.shuffle(infos)  # latest_receipt_info is unordered
        pending = [p for p in (w.legacy_pending(s) for s in mine) if p is not None]
        first = sub.txns[0]
        response = {
            "status": 0, "environment": self.environment,
            "receipt": {"receipt_type": "Production" if self.environment == "Production" else "ProductionSandbox",
                        "bundle_id": w.bundle_id, "application_version": "42", "adam_id": w.app_apple_id,
                        "in_app": [w.legacy_transaction(sub, first)], "original_application_version": "1.0"},
            "latest_receipt": base64.b64encode(f"indie-latest:{sub.otid}:{w.now_ms}".encode()).decode(),
            "latest_receipt_info": infos, "pending_renewal_info": pending,
        }
        self.send(h, 200, response)
