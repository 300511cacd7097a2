#!/usr/bin/env python3
"""An independent App Store Server API, written only from a fact sheet of Apple's documentation (docs/apple-api.md).

It is NOT the project's Swift simulator and shares no code or assumptions with it on purpose:
its own PKI, its own request-JWT checks, its own world model and its own wire habits (legal
but untidy: a charset in Content-Type, unknown fields, omitted optionals, shuffled key order,
non-ASCII strings, some `Connection: close`).

Python 3.11 standard library + `cryptography`. Used in-process by check.py; can also run on its
own (`server.py --dir D`, serving first_app.py's world), controlled through POST /_indie/clock and
GET /_indie/truth.
"""
from __future__ import annotations

import base64
import hashlib
import json
import os
import random
import sys
import threading
import time
import urllib.parse
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from model import DAY_MS, NOTIFICATION_TYPES, PRODUCTS, Notification, Subscription
from pki import PKI, APIKey, TLSIdentity
from world import World


# --------------------------------------------------------------------------------------------
# HTTP
# --------------------------------------------------------------------------------------------
ERRORS = {
    4000000: (400, "Bad request."),
    4000006: (400, "Invalid transaction id."),
    4000012: (400, "Start date too far in past."),
    4000014: (400, "Invalid pagination token."),
    4000017: (400, "Pagination token expired."),
    4000018: (400, "Invalid notification type."),
    4000019: (400, "Multiple filters supplied."),
    4000005: (400, "Invalid request revision."),
    4000015: (400, "Invalid start date."),
    4000016: (400, "Invalid end date."),
    4000013: (400, "Start date after end date."),
    4000021: (400, "Invalid sort."),
    4000022: (400, "Invalid product type."),
    4000030: (400, "Invalid revoked."),
    4000031: (400, "Invalid status."),
    4000035: (400, "Invalid customer consented."),
    4000036: (400, "Invalid delivery status."),
    4000041: (400, "Invalid sample content provided."),
    4040002: (404, "Account not found. Please try again."),
    4040006: (404, "Original transaction id not found. Please try again."),
    4040010: (404, "Transaction id not found."),
    4290000: (429, "Rate limit exceeded."),
    5000000: (500, "An unknown error occurred."),
    5000001: (500, "An unknown error occurred. Please try again."),
}
ENDPOINT_RATE = {"status": 50, "history": 50, "transaction": 50, "notification": 50, "consumption": 50}
# Send Consumption Information (fact sheet "Refund requests"): the body's values.
DELIVERY_STATUSES = {"DELIVERED", "UNDELIVERED_QUALITY_ISSUE", "UNDELIVERED_WRONG_ITEM", "UNDELIVERED_SERVER_OUTAGE",
                     "UNDELIVERED_OTHER"}
REFUND_PREFERENCES = {"DECLINE", "GRANT_FULL", "GRANT_PRORATED"}
# Get Notification History (fact sheet §2.5): how far back startDate may go, per environment.
NOTIFICATION_RETENTION_MS = {"Production": 180 * DAY_MS, "Sandbox": 30 * DAY_MS}
# Apple's tolerance is not published: none here. The server's clock runs minutes ahead of a
# run's --as-of, as a real host's clock may lag Apple's, so a client that reads back exactly
# 180 days by its own clock is refused (4000012); churnwatch stays an hour inside.
NOTIFICATION_SLACK_MS = 0
NOTIFICATION_PAGE = 20
PAGINATION_TOKEN_TTL_S = 3600  # real seconds; an older token gets 4000017


class RateWindow:
    """Per-endpoint limit over a sliding one-second window (Apple enforces hourly; a second
    keeps a short check honest)."""

    def __init__(self, per_second: float):
        self.per_second = per_second
        self.stamps: list[float] = []
        self.lock = threading.Lock()

    def admit(self) -> float | None:
        """None if admitted, else the real time (s) from which a call will be admitted."""
        with self.lock:
            now = time.monotonic()
            self.stamps = [s for s in self.stamps if s > now - 1.0]
            if len(self.stamps) >= max(1, int(self.per_second * 1.2) + 1):
                return time.time() + (self.stamps[0] + 1.0 - now)
            self.stamps.append(now)
            return None


class AppStoreServer:
    """One environment (Production or Sandbox) on its own port, serving one or more apps of one
    team: `world` is the first app's; `apps` (default: that one alone) every app's world, each
    with its own bundle id and app Apple id. The request JWT's `bid` picks the app (a bid the
    server does not serve is 401); one team key signs for all of them. Per app: the rate
    buckets, the notification history, the transaction ids (another app's id is 4040010)."""

    def __init__(self, world: World, key: APIKey, pki: PKI, environment: str, port: int = 0, log=None, prefix: str = "",
                 tls: TLSIdentity | None = None, apps: list[World] | None = None):
        self.world, self.key, self.pki, self.environment = world, key, pki, environment
        self.apps: dict[str, World] = {world.bundle_id: world}
        for w in apps or []:
            self.apps.setdefault(w.bundle_id, w)
        self.prefix = prefix  # served below a path, as behind a gateway: {base}/inApps/...
        factor = 1.0 if environment == "Production" else 0.1
        # Apple's limits are per app and per endpoint: one set of buckets per app.
        self.app_rates = {b: {k: RateWindow(v * factor) for k, v in ENDPOINT_RATE.items()} for b in self.apps}
        self.rates = self.app_rates[world.bundle_id]
        self.log = log or (lambda line: None)
        self.calls: dict[str, int] = {}
        # Calls of the other apps, by bundle id (the first app's stay in `calls`).
        self.app_calls: dict[str, dict[str, int]] = {b: {} for b in self.apps if b != world.bundle_id}
        self.rejections: list[str] = []
        # Bundle ids whose every request is answered 401 for now (an app whose key Apple
        # refuses), and how many requests were refused so, by bundle id.
        self.refused: set[str] = set()
        self.refusals: dict[str, int] = {}
        # The faults below are the first app's: the other apps' calls never meet them.
        self.force_429: set[str] = set()  # endpoints whose next call gets a 429 regardless of rate
        # endpoint -> error codes the next calls get, in order (transient, retryable failures);
        # "endpoint:id" targets the calls for one id.
        self.faults: dict[str, list[int]] = {}
        # Subscriptions whose answers are signed by an untrusted chain (a forged answer) for now.
        self.forged: set[str] = set()
        # Status answers as sent, by (id, simulated now); `replay` maps an id to the simulated
        # moment whose answer is sent again (a lagging replica: an older signedDate).
        self.recorded: dict[tuple[str, int], dict] = {}
        self.replay: dict[str, int] = {}
        self.rogue: PKI | None = None
        self.requests = 0
        self.token_secret = uuid.uuid4().hex  # pagination tokens are opaque and tamper-evident
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # Keep-alive connections idle for more than a second are dropped without notice, as
            # a server's keep-alive timeout does: a client must not trust a pooled connection.
            timeout = 1.0

            def log_message(self, fmt, *args):  # quiet
                pass

            def do_GET(self):
                server.handle(self, "GET")

            def do_POST(self):
                server.handle(self, "POST")

            def do_PUT(self):
                server.handle(self, "PUT")

        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}{prefix}"
        if tls:  # HTTPS under a private CA; a client that does not trust it never gets to send a request
            self.httpd.socket = tls.context().wrap_socket(self.httpd.socket, server_side=True)
            self.url = f"https://localhost:{self.port}{prefix}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def start(self):
        self.thread.start()
        return self

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()

    # ---- responses ----
    def send(self, h, status: int, body: dict | None, extra: dict | None = None):
        self.requests += 1
        n = self.requests
        if body is None:
            data = b""
        elif n % 3 == 0:  # pretty-printed, \u escapes and escaped slashes: all the same JSON
            data = json.dumps(body, ensure_ascii=True, indent=2).replace("/", "\\/").encode("ascii")
        else:
            data = json.dumps(body, ensure_ascii=False).encode("utf-8")
        h.indie_answer = (status, body)  # what this request was answered (the consumption record reads it)
        h.send_response(status)
        if body is not None:  # header names are case-insensitive: some answers use lower case
            h.send_header("content-type" if n % 4 == 0 else "Content-Type", "application/json;charset=utf-8")
        # HTTP/1.1 chunked transfer coding instead of a length; a 202 with no body may come as
        # the last chunk alone (a zero-length body all the same).
        chunked = n % 5 == 0 and (len(data) > 0 or status == 202)
        if chunked:
            h.send_header("Transfer-Encoding", "chunked")
        else:
            h.send_header("Content-Length", str(len(data)))
        for k, v in (extra or {}).items():
            h.send_header(k, v)
        # Every seventh response closes the connection: clients must reconnect cleanly.
        if n % 7 == 0:
            h.send_header("Connection", "close")
            h.close_connection = True
        elif n % 11 == 0:
            h.close_connection = True  # closed after this answer without saying so (allowed: RFC 9112 §9.6)
        h.end_headers()
        if chunked:
            for i in range(0, len(data), 1000):
                piece = data[i:i + 1000]
                h.wfile.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
            h.wfile.write(b"0\r\n\r\n")
        else:
            h.wfile.write(data)

    def error(self, h, code: int, extra: dict | None = None):
        status, message = ERRORS[code]
        self.send(h, status, {"errorMessage": message, "errorCode": code}, extra)

    def handle(self, h, method: str):
        try:
            length = int(h.headers.get("Content-Length") or 0)
            raw_body = h.rfile.read(length) if length else b""
            parsed = urllib.parse.urlsplit(h.path)
            path = parsed.path
            if self.prefix:
                if not path.startswith(self.prefix + "/"):
                    self.log(f"[{self.environment}] 404 outside {self.prefix}: {method} {h.path}")
                    return self.send(h, 404, {"errorCode": 4040000, "errorMessage": "Not found."})
                path = path[len(self.prefix):]
            # '+' is a literal plus here (RFC 3986), as Apple's Swift library sends it unencoded.
            query: dict[str, list[str]] = {}
            for part in filter(None, parsed.query.split("&")):
                k, _, v = part.partition("=")
                query.setdefault(urllib.parse.unquote(k), []).append(urllib.parse.unquote(v))
            if path.startswith("/_indie/"):
                return self.control(h, method, path, query)
            if method == "POST" and path == "/verifyReceipt":  # legacy: no JWT, the shared secret instead
                self.log(f"[{self.environment}] POST /verifyReceipt")
                self.calls["receipt"] = self.calls.get("receipt", 0) + 1
                queued = self.faults.get("receipt")
                if queued:  # a temporary failure: 21005, or 21100-21199 with is_retryable
                    code = queued.pop(0)
                    self.calls[f"receipt_{code}"] = self.calls.get(f"receipt_{code}", 0) + 1
                    body = {"status": code, "environment": self.environment}
                    if 21100 <= code <= 21199:
                        body["is_retryable"] = True  # the current doc page's spelling
                    return self.send(h, 200, body)
                return self.verify_receipt(h, raw_body)
            self.log(f"[{self.environment}] {method} {h.path}")
            segs = path.split("/")
            if len(segs) == 6 and segs[1:5] == ["inApps", "v2", "transactions", "consumption"]:
                return self.consumption_received(h, method, urllib.parse.unquote(segs[5]), raw_body)
            why, bid = self.key.verify(h.headers.get("Authorization"), self.apps)
            if why is not None:
                self.rejections.append(f"{method} {path}: {why}")
                self.log(f"[{self.environment}] 401 {method} {path}: {why}")
                return self.send(h, 401, None)
            w = self.apps[bid]  # the app the token names
            if bid in self.refused:
                return self.refuse(h, bid, f"{method} {path}")
            # /inApps/v1/subscriptions/{id}
            if method == "GET" and len(segs) == 5 and segs[1:4] == ["inApps", "v1", "subscriptions"]:
                return self.limited(h, "status", lambda: self.statuses(h, w, urllib.parse.unquote(segs[4]), query),
                                    urllib.parse.unquote(segs[4]), w)
            if method == "GET" and len(segs) == 5 and segs[1:4] == ["inApps", "v2", "history"]:
                return self.limited(h, "history", lambda: self.history(h, w, urllib.parse.unquote(segs[4]), query),
                                    urllib.parse.unquote(segs[4]), w)
            if method == "GET" and len(segs) == 5 and segs[1:4] == ["inApps", "v1", "transactions"]:
                return self.limited(h, "transaction", lambda: self.transaction(h, w, urllib.parse.unquote(segs[4])), "", w)
            if method == "POST" and path == "/inApps/v1/notifications/history":
                return self.limited(h, "notification", lambda: self.notification_history(h, w, raw_body, query), "", w)
            self.log(f"[{self.environment}] 404 {method} {h.path}")
            return self.send(h, 404, {"errorCode": 4040000, "errorMessage": "Not found."})
        except (BrokenPipeError, ConnectionResetError):
            pass
        except Exception as e:  # noqa: BLE001
            self.log(f"[{self.environment}] 500 {h.path}: {e!r}")
            try:
                self.error(h, 5000000)
            except Exception:  # noqa: BLE001
                pass

    def refuse(self, h, bid: str, what: str):
        """401 for a request of an app the server refuses for now (its key rejected)."""
        self.refusals[bid] = self.refusals.get(bid, 0) + 1
        self.log(f"[{self.environment}] 401 {what}: app {bid} refused")
        return self.send(h, 401, None)

    def calls_of(self, w: World) -> dict[str, int]:
        return self.calls if w is self.world else self.app_calls[w.bundle_id]

    def limited(self, h, endpoint: str, answer, target: str = "", w: World | None = None):
        w = w or self.world
        calls = self.calls_of(w)
        calls[endpoint] = calls.get(endpoint, 0) + 1
        first = w is self.world  # the injected faults are the first app's
        queued = (self.faults.get(f"{endpoint}:{target}") or self.faults.get(endpoint)) if first else None
        if queued:
            code = queued.pop(0)
            calls[f"{endpoint}_{code}"] = calls.get(f"{endpoint}_{code}", 0) + 1
            return self.error(h, code)
        retry_at = None
        if first and endpoint in self.force_429:
            self.force_429.discard(endpoint)
            retry_at = time.time() + 1.2
        else:
            retry_at = self.app_rates[w.bundle_id][endpoint].admit()
        if retry_at is not None:
            calls[endpoint + "_429"] = calls.get(endpoint + "_429", 0) + 1
            return self.error(h, 4290000, {"Retry-After": str(int(retry_at * 1000))})
        with w.lock:
            return answer()

    # ---- Send Consumption Information (fact sheet "Refund requests") ----
    def consumption_received(self, h, method: str, tid: str, raw: bytes):
        """Every request to the consumption path is recorded for the truth of the app its token
        names (the first app's when it names none the server serves): the server's clock, the
        transaction id, the body as parsed, what it was answered; then answered."""
        w = self.apps.get(APIKey.claimed_bid(h.headers.get("Authorization")) or "", self.world)
        with w.lock:
            record = {"at": w.now_ms, "environment": self.environment, "method": method, "transactionId": tid}
            try:
                record["body"] = json.loads(raw.decode("utf-8")) if raw else None
            except Exception:  # noqa: BLE001
                record["body"] = raw.decode("utf-8", "replace")
            w.consumption_puts.append(record)
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
            status, body = getattr(h, "indie_answer", (None, None))
            record["status"] = status
            record["errorCode"] = body.get("errorCode") if isinstance(body, dict) else None
            self.log(f"[{self.environment}] consumption {tid} {json.dumps(record.get('body'), sort_keys=True)}: {status}"
                     f"{' ' + str(record['errorCode']) if record['errorCode'] else ''}")

    def consumption(self, h, w: World, tid: str, raw: bytes):
        """Apple's checks of a ConsumptionRequest body, then 202 Accepted with no body."""
        if self.lookup(h, w, tid) is None:
            return  # 4000006 or 4040010 sent
        try:
            body = json.loads(raw.decode("utf-8")) if raw else None
        except Exception:  # noqa: BLE001
            body = None
        if not isinstance(body, dict):
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

    # ---- Get Notification History (fact sheet §2.5) ----
    def _token(self, fhash: str, key: tuple[int, int]) -> str:
        raw = f"indie-nh|{fhash}|{key[0]}|{key[1]}|{int(time.time())}"
        mac = hashlib.sha256((self.token_secret + raw).encode()).hexdigest()[:16]
        return base64.urlsafe_b64encode(f"{raw}|{mac}".encode()).decode()

    def _untoken(self, token: str, fhash: str) -> tuple[int, int] | int:
        """The cursor (signedDate, sequence) of a pagination token, or the error code."""
        try:
            raw, mac = base64.urlsafe_b64decode(token.encode("ascii")).decode().rsplit("|", 1)
            if hashlib.sha256((self.token_secret + raw).encode()).hexdigest()[:16] != mac:
                return 4000014
            tag, fh, ms, seq, issued = raw.split("|")
            if tag != "indie-nh" or fh != fhash:
                return 4000014  # a token for another request body
            if time.time() - int(issued) > PAGINATION_TOKEN_TTL_S:
                return 4000017
            return int(ms), int(seq)
        except Exception:  # noqa: BLE001
            return 4000014

    def signed_notification(self, w: World, n: Notification) -> str:
        pki = self.rogue if n.forged and self.rogue else self.pki
        if id(pki) not in n.signed:  # signed once: a record reads the same on every page and every sync
            n.signed[id(pki)] = pki.sign_jws(w.notification_payload(n, pki))
        return n.signed[id(pki)]

    def notification_history(self, h, w: World, raw: bytes, query: dict):
        """The history of the app `w` alone (the token's bid): each app has its own."""
        calls = self.calls_of(w)
        calls["notification_pages"] = calls.get("notification_pages", 0) + 1
        try:
            body = json.loads(raw.decode("utf-8")) if raw else None
        except Exception:  # noqa: BLE001
            body = None
        if not isinstance(body, dict):
            return self.error(h, 4000000)
        now = w.now_ms

        def ms(v):
            return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else None
        start, end = ms(body.get("startDate")), ms(body.get("endDate"))
        if start is None:
            return self.error(h, 4000015)
        if end is None:
            return self.error(h, 4000016)
        if start >= end:
            return self.error(h, 4000013)
        end = min(end, now)  # an endDate in the future is treated as now
        if start < now - NOTIFICATION_RETENTION_MS[self.environment] - NOTIFICATION_SLACK_MS:
            return self.error(h, 4000012)
        if start >= end:
            return self.error(h, 4000013)
        ntype, nsub = body.get("notificationType"), body.get("notificationSubtype")
        if nsub is not None and (ntype is None or not isinstance(nsub, str)):
            return self.error(h, 4000018)  # a subtype needs its type
        if ntype is not None and (not isinstance(ntype, str) or ntype not in NOTIFICATION_TYPES):
            return self.error(h, 4000018)
        if nsub is not None and nsub not in NOTIFICATION_TYPES[ntype]:
            return self.error(h, 4000018)
        tid = body.get("transactionId")
        if tid is not None and ntype is not None:
            return self.error(h, 4000019)
        only_failures = body.get("onlyFailures", False)
        if not isinstance(only_failures, bool):
            return self.error(h, 4000000)
        customer = None
        if tid is not None:
            sub = self.lookup(h, w, tid if isinstance(tid, str) else "x")
            if sub is None:
                return  # 4000006 or 4040010 sent
            customer = sub.customer
        # A token is bound to the body, and for the other apps to the app too.
        bound = json.dumps(body, sort_keys=True) + ("" if w is self.world else "|" + w.bundle_id)
        fhash = hashlib.sha256(bound.encode()).hexdigest()[:12]
        cursor = None
        token = query.get("paginationToken", [None])[-1]
        if token is not None:
            cursor = self._untoken(token, fhash)
            if isinstance(cursor, int):
                return self.error(h, cursor)
        records = []
        for n in w.notifications:
            if n.environment != self.environment or not (start <= n.signed_ms < end):
                continue
            if ntype is not None and (n.notification_type != ntype or
                                      (nsub is not None and (n.subtype or "") != nsub)):
                continue
            if customer is not None and w.subs[n.otid].customer != customer:
                continue
            attempts = [(d, r) for d, r in n.attempts if d <= now]
            if only_failures and any(r == "SUCCESS" for _, r in attempts):
                continue
            if cursor is not None and (n.signed_ms, n.seq) <= cursor:
                continue
            records.append((n, attempts))
        records.sort(key=lambda x: (x[0].signed_ms, x[0].seq))
        page, rest = records[:NOTIFICATION_PAGE], records[NOTIFICATION_PAGE:]
        calls["notification_records"] = calls.get("notification_records", 0) + len(page)
        out = {"notificationHistory": [
                   {"sendAttempts": [{"attemptDate": d, "sendAttemptResult": r} for d, r in attempts],
                    "signedPayload": self.signed_notification(w, n)} for n, attempts in page],
               "hasMore": bool(rest)}
        if rest:
            out["paginationToken"] = self._token(fhash, (page[-1][0].signed_ms, page[-1][0].seq))
        app = "" if w is self.world else f" {w.bundle_id}"
        self.log(f"[{self.environment}{app}] notification history {json.dumps(body, sort_keys=True)}"
                 f"{' (next page)' if token else ''}: {len(page)} records, hasMore {bool(rest)}")
        self.send(h, 200, out)

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

    def control(self, h, method: str, path: str, query: dict | None = None):
        if method == "GET" and path == "/_indie/truth":
            # ?bundle_id= picks an app (its truth in the same format); without it the first app's,
            # with the list of apps beside it when there are more.
            wanted = (query or {}).get("bundle_id", [None])[-1]
            if wanted is not None:
                if wanted not in self.apps:
                    return self.send(h, 404, {"errorCode": 4040000, "errorMessage": f"unknown bundle_id {wanted}: "
                                              f"this server serves {', '.join(self.apps)}"})
                return self.send(h, 200, self.apps[wanted].truth())
            truth = self.world.truth()
            if len(self.apps) > 1:
                truth["apps"] = [{"bundleId": w.bundle_id, "appAppleId": w.app_apple_id, "subscribers": len(w.subs)}
                                 for w in self.apps.values()]
            return self.send(h, 200, truth)
        if method == "POST" and path.startswith("/_indie/clock/"):
            for w in self.apps.values():  # one clock for every app
                w.advance(int(path.rsplit("/", 1)[1]))
            return self.send(h, 200, {"now": self.world.now_ms})
        return self.send(h, 404, {"errorCode": 4040000, "errorMessage": "Not found."})


class Environments:
    """PKI + key + one server per environment, sharing one world per app: `world` is the first
    app's (the one churnwatch's APPSTORE_* environment names), `others` the further apps' (one
    team key signs for all; each server serves every app)."""

    def __init__(self, directory: str, world: World, log=None, others: list[World] | tuple = ()):
        self.directory = directory
        self.world = world
        self.worlds = [world, *others]
        self.issuer_id = str(uuid.UUID(int=random.getrandbits(128)))
        self.key_id = "INDIE" + "".join(random.choice("ABCDEFGHJKLMNPQRSTUVWXYZ23456789") for _ in range(5))
        self.pki = PKI(directory)
        self.key = APIKey(directory, self.key_id, self.issuer_id, world.bundle_id)
        # A look-alike chain (same OIDs, its own root) that churnwatch must not trust.
        self.rogue = PKI(os.path.join(directory, "untrusted"))
        self.production = AppStoreServer(world, self.key, self.pki, "Production", log=log, apps=self.worlds).start()
        self.sandbox = AppStoreServer(world, self.key, self.pki, "Sandbox", log=log, prefix="/sandbox-gw",
                                      apps=self.worlds).start()

        self.production.rogue = self.sandbox.rogue = self.rogue

    def env(self) -> dict[str, str]:
        """churnwatch's configuration: only docs/architecture.md §4 variables."""
        return {
            "APPSTORE_ISSUER_ID": self.issuer_id, "APPSTORE_KEY_ID": self.key_id,
            "APPSTORE_PRIVATE_KEY_PATH": self.key.path, "APPSTORE_BUNDLE_ID": self.world.bundle_id,
            "APPSTORE_APP_APPLE_ID": str(self.world.app_apple_id), "APPSTORE_ENVIRONMENT": "Production",
            # A trailing slash on one base URL, a path prefix on the other.
            "APPSTORE_BASE_URL": self.production.url.replace("127.0.0.1", "localhost") + "/", "APPSTORE_SANDBOX_BASE_URL": self.sandbox.url,
            # Both encodings of the same root, comma-separated.
            "APPSTORE_ROOT_CERTS": self.pki.root_pem_path + "," + self.pki.root_der_path,
            # docs/contracts.md: the app's shared secret for the legacy verifyReceipt path.
            "APPSTORE_SHARED_SECRET": self.world.shared_secret,
        }

    def refuse(self, bundle_ids):
        """Every request for these apps is answered 401 from now on (an empty set: none)."""
        self.production.refused = self.sandbox.refused = set(bundle_ids)

    def stop(self):
        self.production.stop()
        self.sandbox.stop()


def main(argv: list[str]) -> int:
    import argparse
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--dir", required=True, help="where the root certificate and the .p8 key are written")
    ap.add_argument("--apps", type=int, default=1, help="apps served (default 1); app k >= 2 is second_app.py's world")
    args = ap.parse_args(argv)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import first_app  # the scripted world (check.py's too)
    world, _ = first_app.build_world()
    others = []
    if args.apps > 1:
        import second_app
        others = [second_app.build_script(k).world for k in range(2, args.apps + 1)]
    envs = Environments(args.dir, world, log=lambda l: print(l, file=sys.stderr), others=others)
    with open(os.path.join(args.dir, "churnwatch.env"), "w") as f:
        for k, v in envs.env().items():
            f.write(f"{k}={v}\n")
    print(f"production {envs.production.url}  sandbox {envs.sandbox.url}  env {args.dir}/churnwatch.env", flush=True)
    for w in others:
        print(f"app {w.bundle_id} (app Apple id {w.app_apple_id}): {len(w.subs)} subscribers", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        envs.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
