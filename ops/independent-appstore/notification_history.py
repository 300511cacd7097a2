"""Get Notification History (fact sheet §2.5) of the independent server: the records of one
app's V2 notifications in its environment, filtered, 20 a page, with opaque tamper-evident
pagination tokens bound to the request body. A mixin of AppStoreServer (server.py)."""
from __future__ import annotations

import base64
import hashlib
import json
import time

from model import DAY_MS, NOTIFICATION_TYPES, Notification, json_object
from world import World

# Get Notification History (fact sheet §2.5): how far back startDate may go, per environment.
NOTIFICATION_RETENTION_MS = {"Production": 180 * DAY_MS, "Sandbox": 30 * DAY_MS}
# Apple's tolerance is not published: none here. The server's clock runs minutes ahead of a
# run's --as-of, as a real host's clock may lag Apple's, so a client that reads back exactly
# 180 days by its own clock is refused (4000012); churnwatch stays an hour inside.
NOTIFICATION_SLACK_MS = 0
NOTIFICATION_PAGE = 20
PAGINATION_TOKEN_TTL_S = 3600  # real seconds; an older token gets 4000017


class NotificationHistory:
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
        req = self._history_request(h, w, raw)
        if req is None:
            return  # its error sent
        body = req["body"]
        # A token is bound to the body, and for the other apps to the app too.
        bound = json.dumps(body, sort_keys=True) + ("" if w is self.world else "|" + w.bundle_id)
        fhash = hashlib.sha256(bound.encode()).hexdigest()[:12]
        cursor = None
        token = query.get("paginationToken", [None])[-1]
        if token is not None:
            cursor = self._untoken(token, fhash)
            if isinstance(cursor, int):
                return self.error(h, cursor)
        records = self._history_records(w, req, cursor)
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

    def _history_request(self, h, w: World, raw: bytes) -> dict | None:
        """The request body and its filters, checked as Apple does (fact sheet §2.5); None when
        it was refused (the error is sent)."""
        body = json_object(raw)
        if body is None:
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
                return None  # 4000006 or 4040010 sent
            customer = sub.customer
        return {"body": body, "now": now, "start": start, "end": end, "ntype": ntype, "nsub": nsub,
                "only_failures": only_failures, "customer": customer}

    def _history_records(self, w: World, req: dict, cursor: tuple[int, int] | None) -> list[tuple[Notification, list]]:
        """The app's notifications the request selects after `cursor`, each with its send
        attempts so far, in order."""
        now, start, end, ntype, nsub, customer = req["now"], req["start"], req["end"], req["ntype"], req["nsub"], req["customer"]
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
            if req["only_failures"] and any(r == "SUCCESS" for _, r in attempts):
                continue
            if cursor is not None and (n.signed_ms, n.seq) <= cursor:
                continue
            records.append((n, attempts))
        records.sort(key=lambda x: (x[0].signed_ms, x[0].seq))
        return records
