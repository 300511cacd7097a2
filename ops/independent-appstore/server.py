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

import json
import os
import random
import sys
import threading
import time
import urllib.parse
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from endpoints import TransactionEndpoints
from notification_history import NotificationHistory
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


class AppStoreServer(TransactionEndpoints, NotificationHistory):
    """One environment (Production or Sandbox) on its own port, serving one or more apps of one
    team: `world` is the first app's; `apps` (default: that one alone) every app's world, each
    with its own bundle id and app Apple id. The request JWT's `bid` picks the app (a bid the
    server does not serve is 401); one team key signs for all of them. Per app: the rate
    buckets, the notification history, the transaction ids (another app's id is 4040010).
    Here: the port, the routing, the rate limits and injected faults, the wire habits of the
    answers, the control endpoints; the endpoints themselves in endpoints.py and
    notification_history.py."""

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
        record = getattr(h, "indie_record", None)
        if record is not None:  # a consumption record holds its answer before the client can read it
            record["status"] = status
            record["errorCode"] = body.get("errorCode") if isinstance(body, dict) else None
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
