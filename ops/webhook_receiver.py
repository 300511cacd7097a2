#!/usr/bin/env python3
"""A test receiver for Standard Webhooks (github.com/standard-webhooks/standard-webhooks,
spec/standard-webhooks.md), for churnwatch's Swift tests and benchmark. Standard library only.

  webhook_receiver.py --port 0 --secret whsec_... [--secret ...] --record FILE [--ready-file FILE]
                      [--reference]    (also verify with PyPI standardwebhooks; exits 2 without)
  webhook_receiver.py --summary RECORD_FILE [RECORD_FILE ...]    (their stats; no server)

It prints `listening on http://127.0.0.1:PORT` (also to --ready-file, atomically); SIGTERM/SIGINT
stop it. A POST to any non-control path is a delivery: verified, answered as the mode in force
says, recorded as a JSON line in --record before the answer leaves (so a SIGKILL loses none).
POST /_control {"mode": ok | 500 | 503 | 429 | 410 | slow | close | redirect | huge, "path": prefix
(default all), "count": N (then the rule below; in the end ok), "retry_after": s, "delay_ms": N,
"location": URL} replaces the rules under its prefix ({"mode": "ok"} resets all). GET /_control,
/_stats, /_ids[?path=P]: the rules; the stats (as --summary prints them); the ids answered 2xx.
"""
import argparse, asyncio, base64, contextlib, hashlib, hmac, json, os, re, signal, sys, time
from collections import Counter, namedtuple
from http import HTTPStatus
from urllib.parse import parse_qs

MAX_BODY = 1 << 20                  # larger bodies are answered 413
MAX_HEAD = 64 << 10                 # larger request heads are answered 431
TOLERANCE_S = 5 * 60                # the spec's replay window: timestamps further from now fail
HUGE_SIZE = 1 << 30                 # mode huge: the Content-Length of the body streamed
HUGE_CHUNK = memoryview(b"x" * (1 << 20))
DEFAULT_LOCATION = "http://169.254.169.254/latest/meta-data"
ANSWERS = {"ok": 200, "slow": 200, "redirect": 302, "500": 500, "503": 503, "429": 429, "410": 410,
           "huge": 200, "close": None}     # mode -> status answered (close: none)
CONTROL_PATHS = ("/_control", "/_stats", "/_ids")
COUNTS = ("deliveries", "accepted", "unique_ids", "valid", "invalid", "reference_valid",
          "reference_invalid", "duplicates", "duplicate_ids_with_other_body", "order_violations")
DIGITS = re.compile(r"[0-9]+")
ID_SEQUENCE = re.compile(r"msg_[0-9a-f]{8}_([0-9]+)")
Request = namedtuple("Request", "method target headers body keep_alive")


class BadRequest(Exception):
    """args: (HTTP status, why). Answered, then the connection is closed."""


def decode_secret(secret):
    """`whsec_` + base64 of the key. Missing base64 padding is tolerated, as the reference does."""
    b64 = secret.removeprefix("whsec_")
    key = base64.b64decode(b64 + "=" * (-len(b64) % 4), validate=True)
    if b64 == secret or not key:
        raise ValueError("a secret is whsec_ and the base64 of a key")
    return key


def verify(keys, headers, body, now):
    """Standard Webhooks, symmetric scheme: True when the delivery carries a valid v1 signature by
    any of `keys` (secret rotation) and a timestamp within 5 minutes of `now`."""
    msg_id, stamp, sigs = (headers.get("webhook-" + h) for h in ("id", "timestamp", "signature"))
    # webhook-timestamp is an integer of Unix seconds; anything else (a fraction, a sign) fails.
    if not (msg_id and sigs and stamp and DIGITS.fullmatch(stamp)) \
            or abs(now - int(stamp)) > TOLERANCE_S:
        return False
    # The signed content is `{id}.{timestamp}.{body}`, the body as the raw bytes received (header
    # values were decoded as latin-1, so encoding them back gives the bytes on the wire).
    signed = b"%s.%s.%s" % (msg_id.encode("latin-1"), stamp.encode("latin-1"), body)
    expected = [hmac.new(key, signed, hashlib.sha256).digest() for key in keys]
    # The header is a space-separated list of `version,base64`; one match among them is enough.
    # v1a (ed25519) and unknown versions are not ours to check and are skipped.
    for entry in sigs.split(" "):
        version, _, b64 = entry.partition(",")
        if version != "v1":
            continue
        with contextlib.suppress(ValueError):      # binascii.Error: not base64, skipped
            given = base64.b64decode(b64, validate=True)
            if any(hmac.compare_digest(mac, given) for mac in expected):
                return True
    return False


def reference_verify(hooks, headers, body):
    """The reference library's verdict: valid if any secret's Webhook.verify passes.
    json_parse=False: only the signature is compared, as in verify() (a non-JSON body is valid)."""
    for hook in hooks:      # it raises WebhookVerificationError, or ValueErrors on bad input
        with contextlib.suppress(Exception):
            hook.verify(body, headers, json_parse=False)
            return True
    return False


class Stats:
    """Counts deliveries from their records, in the order recorded (server and --summary)."""

    def __init__(self, reference):
        self.counts, self.by_type, self.by_path = Counter(), Counter(), Counter()
        self.reference = reference      # whether reference verdicts exist (else they are null)
        self.first_sha = {}             # (path, id) -> body_sha256 of its first 2xx receipt
        self.highest = {}               # (path, key) -> highest sequence first-received

    def add(self, rec):
        c, status, ref = self.counts, rec.get("status"), rec.get("reference_valid")
        c["deliveries"] += 1
        self.reference = self.reference or ref is not None
        if not (isinstance(status, int) and 200 <= status < 300):
            return      # not received, as far as the sender can tell: counted no further
        c["accepted"] += 1
        c["valid" if rec.get("valid") else "invalid"] += 1
        if ref is not None:
            c["reference_valid" if ref else "reference_invalid"] += 1
        path, msg_id, kind = rec.get("path"), rec.get("id"), rec.get("type")
        self.by_type[kind if isinstance(kind, str) else json.dumps(kind)] += 1  # none: "null"
        self.by_path[path] += 1
        if msg_id is None:
            return
        if (path, msg_id) in self.first_sha:
            c["duplicates"] += 1
            if self.first_sha[(path, msg_id)] != rec.get("body_sha256"):
                c["duplicate_ids_with_other_body"] += 1
            return
        self.first_sha[(path, msg_id)] = rec.get("body_sha256")
        # Order: ids are msg_<8 hex>_<sequence>, the sequence increasing in the sender's write
        # order. A first receipt below the highest sequence already first-received for its
        # (path, key) came out of order. Deliveries without a key or a sequence have no order.
        m = ID_SEQUENCE.fullmatch(msg_id)
        if m and rec.get("key") is not None:
            group, seq = (path, rec["key"]), int(m.group(1))
            if seq < self.highest.get(group, -1):
                c["order_violations"] += 1
            else:
                self.highest[group] = seq

    def snapshot(self):
        out = {k: self.counts[k] for k in COUNTS} | {"unique_ids": len(self.first_sha)}
        if not self.reference:
            out["reference_valid"] = out["reference_invalid"] = None
        return out | {"by_type": dict(self.by_type), "by_path": dict(self.by_path)}


def summarize(files):
    """--summary: the stats of record files (say, one per receiver run), their records merged
    in the order they were written ("at", the time each was recorded; ties keep file order)."""
    records = []
    for name in files:
        with open(name, "rb") as f:
            for number, line in enumerate(f, 1):
                try:
                    records.append(dict(json.loads(line), body=None))   # body: not needed here
                except (ValueError, TypeError):
                    print(f"{name}:{number}: not a record, skipped", file=sys.stderr)
    stats = Stats(reference=False)
    for rec in sorted(records, key=lambda r: r.get("at") or 0):
        stats.add(rec)
    return stats.snapshot()


def make_rule(spec):
    """A control rule from the JSON of POST /_control (ValueError when it is not one)."""
    def need(ok, what):
        if not ok:
            raise ValueError(what)
    need(isinstance(spec, dict) and spec.get("mode") in ANSWERS, f"mode: one of {[*ANSWERS]}")
    mode, count, retry = spec["mode"], spec.get("count"), spec.get("retry_after")
    rule = {"mode": mode, "path": spec.get("path") or "", "count": count,
            "retry_after": 1 if retry is None and mode == "429" else retry,
            "delay_ms": spec.get("delay_ms", 1000 if mode == "slow" else 0),
            "location": spec.get("location") or DEFAULT_LOCATION}
    need(count is None or type(count) is int and count > 0, "count is a positive integer")
    need(type(rule["delay_ms"]) in (int, float) and 0 <= rule["delay_ms"] < 1e15, "delay_ms: ms")
    need(type(retry) in (type(None), int, str), "retry_after is seconds or a string")
    need(isinstance(rule["path"], str) and isinstance(rule["location"], str), "not a string")
    need(not re.search("[\r\n]", f"{retry}{rule['location']}"), "no line breaks in headers")
    return rule


def response(status, body=b"", extra=(), close=False, ctype="text/plain", length=None):
    """An HTTP/1.1 answer; a body that is not bytes is sent as JSON."""
    if not isinstance(body, bytes):
        body, ctype = json.dumps(body).encode(), "application/json"
    head = [f"HTTP/1.1 {status} {HTTPStatus(status).phrase}",
            f"Content-Length: {len(body) if length is None else length}", f"Content-Type: {ctype}"]
    head += [f"{name}: {value}" for name, value in extra] + ["Connection: close"] * close
    return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body


class Connection:
    """A client connection: an HTTP/1.1 parser over its own buffer (kept while slow waits)."""

    def __init__(self, reader, writer):
        self.reader, self.writer, self.buf = reader, writer, bytearray()

    async def fill(self):
        data = await self.reader.read(65536)
        self.buf += data
        return bool(data)

    async def read_request(self):
        """The next request, or None when the client closed between requests."""
        while (end := self.buf.find(b"\r\n\r\n")) < 0 or end > MAX_HEAD:
            if len(self.buf) > MAX_HEAD:
                raise BadRequest(431, "request head too large")
            if not await self.fill():
                return None
        lines = self.buf[:end].decode("latin-1").split("\r\n")
        del self.buf[:end + 4]
        parts = lines[0].split(" ")
        if len(parts) != 3 or parts[2] not in ("HTTP/1.1", "HTTP/1.0"):
            raise BadRequest(400, "bad request line")
        headers = {}
        for line in lines[1:]:
            name, colon, value = line.partition(":")
            if not colon or not name or name != name.strip():
                raise BadRequest(400, "bad header line")
            name, value = name.lower(), value.strip(" \t")
            if name == "content-length" and headers.get(name, value) != value:
                raise BadRequest(400, "conflicting Content-Length")
            headers.setdefault(name, value)         # a repeated header: the first one counts
        if "transfer-encoding" in headers:
            raise BadRequest(411, "chunked bodies are not accepted: send Content-Length")
        length = headers.get("content-length", "0")
        if not DIGITS.fullmatch(length) or int(length) > MAX_BODY:
            raise BadRequest(413 if DIGITS.fullmatch(length) else 400,
                             f"bad Content-Length (at most {MAX_BODY} bytes)")
        length = int(length)
        if headers.get("expect", "").lower() == "100-continue" and len(self.buf) < length:
            self.writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")     # curl waits for it
        while len(self.buf) < length:
            if not await self.fill():
                raise ConnectionResetError("client closed in the middle of a body")
        body = bytes(self.buf[:length])
        del self.buf[:length]
        tokens = {t.strip().lower() for t in headers.get("connection", "").split(",")}
        keep = "close" not in tokens and (parts[2] == "HTTP/1.1" or "keep-alive" in tokens)
        return Request(parts[0], parts[1], headers, body, keep)

    async def wait_alive(self, seconds):
        """Waits `seconds`, unless the client closes first: returns whether it is still there."""
        try:
            async with asyncio.timeout(min(seconds, 1e9)):
                while await self.fill():
                    pass                # bytes of a next request: kept in the buffer
            return False
        except TimeoutError:
            return True

    async def stream_huge(self, close):
        """200 with a 1 GiB body, one reusable chunk at a time, until done or the client leaves."""
        self.writer.write(response(200, b"", (), close, "application/octet-stream", HUGE_SIZE))
        for _ in range(HUGE_SIZE // len(HUGE_CHUNK)):
            self.writer.write(HUGE_CHUNK)
            await self.writer.drain()   # raises ConnectionResetError once the client has closed


class Receiver:
    def __init__(self, keys, hooks, record_path):
        self.keys, self.hooks, self.stats = keys, hooks, Stats(reference=hooks is not None)
        self.rules = []                 # newest first; the first whose prefix matches applies
        self.record_fd = os.open(record_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self.tasks = set()

    async def serve_connection(self, reader, writer):
        self.tasks.add(asyncio.current_task())
        conn = Connection(reader, writer)
        try:
            while (req := await conn.read_request()) is not None:
                path, _, query = req.target.partition("?")
                if req.method == "POST" and path not in CONTROL_PATHS:
                    await self.deliver(conn, req, path)
                else:
                    writer.write(self.control(req, path, query))
                if not req.keep_alive:
                    break
                await writer.drain()
        except BadRequest as e:
            writer.write(response(e.args[0], f"{e.args[1]}\n".encode(), close=True))
        except (ConnectionError, asyncio.CancelledError):
            pass                        # the client left, or the receiver is stopping
        finally:
            writer.close()              # after sending what is buffered
            self.tasks.discard(asyncio.current_task())

    def control(self, req, path, query):
        """The answer to a request other than a delivery."""
        close, wanted = not req.keep_alive, (path, req.method)
        if wanted == ("/_control", "POST"):
            try:
                rule = make_rule(json.loads(req.body))
            except ValueError as e:
                return response(400, {"error": str(e)}, close=close)
            self.rules = [rule] + [r for r in self.rules if not r["path"].startswith(rule["path"])]
        if path == "/_control" and req.method in ("GET", "POST"):
            return response(200, {"rules": self.rules}, close=close)
        if wanted == ("/_stats", "GET"):
            return response(200, self.stats.snapshot(), close=close)
        if wanted == ("/_ids", "GET"):
            only = parse_qs(query).get("path", [None])[0]     # first_sha: in order first answered
            ids = dict.fromkeys(i for p, i in self.stats.first_sha if only in (None, p))
            return response(200, list(ids), close=close)
        return response(405 if path in CONTROL_PATHS or req.method != "GET" else 404, close=close)

    async def deliver(self, conn, req, path):
        """Answers a delivery as the rule in force says (counted against its count), records it."""
        rule = next((r for r in self.rules if path.startswith(r["path"])), {"mode": "ok"})
        if rule.get("count") is not None:
            rule["count"] -= 1
            if rule["count"] == 0:
                self.rules.remove(rule)
        rec, mode = self.describe(req, path, rule["mode"]), rule["mode"]
        if mode == "slow":
            try:
                alive = await conn.wait_alive(rule["delay_ms"] / 1000)
            except asyncio.CancelledError:
                alive = False           # the receiver stops during the wait
            mode = "slow" if alive else "close"
        self.record(rec, ANSWERS[mode])     # in the file before the sender sees an answer
        if mode == "close":                 # (recorded with status null: no answer)
            raise ConnectionResetError("closed without an answer")
        if mode == "huge":
            return await conn.stream_huge(not req.keep_alive)
        status, extra = ANSWERS[mode], []
        if mode in ("429", "503") and rule["retry_after"] is not None:
            extra.append(("Retry-After", rule["retry_after"]))
        if mode == "redirect":
            extra.append(("Location", rule["location"]))
        body = b"ok" if status == 200 else HTTPStatus(status).phrase.lower().encode()
        conn.writer.write(response(status, body, extra, not req.keep_alive))

    def describe(self, req, path, mode):
        """The record of one delivery, but for the time and status (set when answered)."""
        headers, now = req.headers, time.time()
        body = None     # unless JSON: int("NaN") raises, as NaN and Infinity are not JSON
        with contextlib.suppress(ValueError):
            body = json.loads(req.body, parse_constant=int)
        obj = body if isinstance(body, dict) else {}
        data = obj.get("data") if isinstance(obj.get("data"), dict) else {}
        bundle, original = data.get("bundle_id"), data.get("original_transaction_id")
        stamp = headers.get("webhook-timestamp") or ""
        return {"at": now, "path": path, "id": headers.get("webhook-id"),
                "timestamp": int(stamp) if DIGITS.fullmatch(stamp) else None,
                "valid": verify(self.keys, headers, req.body, now),
                "reference_valid": None if self.hooks is None
                else reference_verify(self.hooks, headers, req.body),
                "status": None, "mode": mode, "body_sha256": hashlib.sha256(req.body).hexdigest(),
                "type": obj.get("type"), "body": body,
                "key": None if bundle is None or original is None else f"{bundle}/{original}"}

    def record(self, rec, status):
        rec["at"], rec["status"] = time.time(), status
        self.stats.add(rec)
        # One write per record, before the answer leaves: in the OS (the page cache) at once, so
        # a record is never lost when the receiver is killed, and never waits on a timer.
        line = (json.dumps(rec, separators=(",", ":")) + "\n").encode()
        while line:
            line = line[os.write(self.record_fd, line):]


async def serve(args, keys, hooks):
    receiver = Receiver(keys, hooks, args.record)
    loop, stop = asyncio.get_running_loop(), asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    server = await asyncio.start_server(receiver.serve_connection, "127.0.0.1", args.port)
    line = f"listening on http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    print(line, flush=True)
    if args.ready_file:                 # a temporary name, then a rename: never seen half-written
        with open(f"{args.ready_file}.{os.getpid()}.tmp", "w") as f:
            f.write(line + "\n")
        os.replace(f.name, args.ready_file)
    await stop.wait()
    server.close()
    for task in list(receiver.tasks):
        task.cancel()
    await asyncio.gather(*receiver.tasks, return_exceptions=True)
    os.close(receiver.record_fd)
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--secret", action="append", default=[], help="whsec_...; repeat to rotate")
    p.add_argument("--record", help="the file deliveries are appended to, a JSON line each")
    p.add_argument("--ready-file")
    p.add_argument("--reference", action="store_true", help="also verify with standardwebhooks")
    p.add_argument("--summary", nargs="+", metavar="RECORD_FILE", help="print their stats")
    args = p.parse_args()
    if args.summary:
        print(json.dumps(summarize(args.summary)))
        return 0
    if not args.secret or not args.record:
        p.error("--secret and --record are required (unless --summary)")
    try:
        keys, hooks = [decode_secret(s) for s in args.secret], None
        if args.reference:
            import standardwebhooks
            hooks = [standardwebhooks.Webhook(s) for s in args.secret]
    except (ValueError, ImportError) as e:
        print(f"webhook_receiver: {e} (a --secret is whsec_<base64>; --reference needs "
              "standardwebhooks: `. ops/lib.sh && ensure_python_webhooks`)", file=sys.stderr)
        return 2
    return asyncio.run(serve(args, keys, hooks))


if __name__ == "__main__":
    sys.exit(main())
