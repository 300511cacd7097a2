"""Refund requests (docs/contracts.md "Refund requests"): the app's consent rows (Consents),
what churnwatch should have answered (expected_refund_answers) and the checks after the last
night against the server's record, churnwatch.refund_requests and `churnwatch refunds --json`."""
from __future__ import annotations

import json
import os

from checker import Checker
from scenario import DAY, Script, iso, night_ms
from world import World

REFUND_DECLINE_AFTER = 0.5   # CHURNWATCH_REFUND_DECLINE_AFTER: DECLINE a delivered purchase from half its period on
# Send Consumption Information answers that are the injected transient faults (or the rate
# limit), not a refusal: churnwatch tries again.
TRANSIENT_CODES = {5000001, 4290000}


class Consents:
    """The app's side of refund requests: its churnwatch.refund_consent rows, written with the
    contract's upsert when their moment comes, and which row churnwatch reads at a moment."""

    def __init__(self, ck: Checker, world: World, script: Script):
        self.ck, self.world = ck, world
        # Rows with no moment first (written right after the import), then by their moment.
        self.pending = sorted(script.consents, key=lambda c: (c["at"] is not None, c["at"] or 0))
        self.written: list[tuple[int, dict]] = []  # (the moment from which it is on record, row)

    def write_until(self, moment_ms: int):
        while self.pending and (self.pending[0]["at"] is None or self.pending[0]["at"] <= moment_ms):
            c = self.pending.pop(0)
            column, value = (("app_account_token", self.world.subs[c["otid"]].app_account_token) if c["key"] == "token"
                             else ("original_transaction_id", c["otid"]))
            delivery = f"'{c['delivery']}'" if c["delivery"] else "NULL"
            sample = "NULL" if c["sample"] is None else str(c["sample"]).lower()
            self.ck.psql(f"""
                INSERT INTO churnwatch.refund_consent ({column}, customer_consented, delivery_status, sample_content_provided)
                VALUES ('{value}', {str(c['consented']).lower()}, {delivery}, {sample})
                ON CONFLICT ({column}) WHERE {column} IS NOT NULL
                DO UPDATE SET customer_consented = excluded.customer_consented, delivery_status = excluded.delivery_status,
                              sample_content_provided = excluded.sample_content_provided, updated_at = now()""")
            self.written.append((-1 if c["at"] is None else c["at"], c))

    def at(self, otid: str, moment_ms: int) -> dict | None:
        """The row for the customer of `otid` on record at `moment_ms`: by its original
        transaction id if there is one, else by its app account token (the latest write wins)."""
        rows = [c for at, c in self.written if at <= moment_ms and c["otid"] == otid]
        return ([c for c in rows if c["key"] == "otid"] or [c for c in rows if c["key"] == "token"] or [None])[-1]


def expected_refund_answers(world: World, consents: Consents, invocations: list[int], until_ms: int) -> dict[str, dict]:
    """Each CONSUMPTION_REQUEST signed before `until_ms`, by notification UUID: the policy branch
    docs/contracts.md gives it, the body to send (None: nothing), and Apple's decision on it
    (the first REFUND / REFUND_DECLINED about its transaction after it and before the next
    request about the same transaction)."""
    requests = sorted((r for r in world.refund_requests if r["signedDate"] < until_ms), key=lambda r: r["signedDate"])
    out = {}
    for r in requests:
        # The first sync that reads it: history up to a sync's moment (endDate) holds what was signed before it.
        first = min((t for t in invocations if t > r["signedDate"]), default=None)
        sub = world.subs[r["originalTransactionId"]]
        consent = consents.at(sub.otid, first) if first is not None else None
        body = None
        if first is None or first >= r["deadline"]:
            branch = "expired"
        elif consent is None or not consent["consented"]:
            branch = "no_consent"
        else:
            delivery = consent["delivery"] or "DELIVERED"
            sample = consent["sample"] if consent["sample"] is not None else \
                any(t.offer_type == 1 and t.price == 0 for t in sub.txns)  # a free trial on record
            body = {"customerConsented": True, "deliveryStatus": delivery, "sampleContentProvided": sample}
            share = (r["signedDate"] - r["purchaseDate"]) / (r["expiresDate"] - r["purchaseDate"])
            if delivery != "DELIVERED":
                branch = "undelivered"
            elif share >= REFUND_DECLINE_AFTER:
                branch = "decline_consumed"
                body["refundPreference"] = "DECLINE"
            else:
                branch = "no_preference"
        same = lambda x: x["transactionId"] == r["transactionId"] and x["environment"] == r["environment"]  # noqa: E731
        next_ask = min((q["signedDate"] for q in requests if same(q) and q["signedDate"] > r["signedDate"]), default=None)
        decided = [d for d in world.refund_decisions if same(d) and r["signedDate"] <= d["signedDate"] < until_ms
                   and (next_ask is None or d["signedDate"] < next_ask)]
        decision = {"REFUND": "refunded", "REFUND_DECLINED": "declined"}[decided[0]["decision"]] if decided else None
        out[r["notificationUUID"]] = {"request": r, "branch": branch, "body": body, "decision": decision, "first_sync": first}
    return out


def check_refunds(ck: Checker, args, world: World, script: Script, consents: Consents, invocations: list[int],
                  until_ms: int):
    """Refund requests against the server's record of what it was sent: every request whose
    customer consented answered exactly once (202) before its deadline with the body of the
    contract's policy, nothing sent for the others (no consent, or no sync inside the 12 hours),
    no answer refused but by the injected transient faults; churnwatch.refund_requests (state,
    branch, body, decision) and `churnwatch refunds --json` counts agree."""
    name = lambda o: script.names.get(o, o)  # noqa: E731
    expected = expected_refund_answers(world, consents, invocations, until_ms)
    label = {u: f"refund request {name(e['request']['originalTransactionId'])} {iso(e['request']['signedDate'])}"
             for u, e in expected.items()}
    check_answers_received(ck, world, expected, label)
    check_recorded_requests(ck, expected, label, name)
    got_counts, want_branches = check_refunds_command(ck, args, expected, until_ms)
    check_faults_met(ck, world, script, expected, invocations, got_counts, want_branches)


def check_answers_received(ck: Checker, world: World, expected: dict[str, dict], label: dict[str, str]):
    """The server's record: each consented request answered once (202) before its deadline with
    the policy's body, nothing for the others, nothing refused but the injected faults."""
    # What the server received, by the request it answers: the latest about its transaction signed before it.
    received: dict[str, list[dict]] = {u: [] for u in expected}
    for p in world.consumption_puts:
        asked = [e for e in expected.values() if e["request"]["transactionId"] == p["transactionId"]
                 and e["request"]["environment"] == p["environment"] and e["request"]["signedDate"] <= p["at"]]
        if not asked:
            ck.check(False, f"consumption information for {p['transactionId']} ({p['environment']}) at {iso(p['at'])}", "-",
                     "only answers to refund requests", f"an answer to none: {p.get('body')} -> {p['status']}")
            continue
        r = max(asked, key=lambda e: e["request"]["signedDate"])["request"]
        received[r["notificationUUID"]].append(p)
        if p["status"] != 202:
            ck.check(p["errorCode"] in TRANSIENT_CODES, f"{label[r['notificationUUID']]}: server's answer", "-",
                     "202, or an injected transient fault", f"{p['status']} {p['errorCode']} for {p.get('body')}")
    for u, e in expected.items():
        r, puts = e["request"], received[u]
        accepted = [p for p in puts if p["status"] == 202]
        if e["body"] is None:
            ck.check(not puts, f"{label[u]} ({e['branch']}): consumption information sent", "-", "none",
                     [f"{iso(p['at'])} {p.get('body')} -> {p['status']}" for p in puts])
            continue
        ck.check(len(accepted) == 1, f"{label[u]} ({e['branch']}): answers accepted", "-", 1,
                 f"{len(accepted)}: " + "; ".join(f"{iso(p['at'])} {p.get('body')}" for p in accepted))
        late = [p for p in puts if p["at"] >= r["deadline"]]
        ck.check(not late, f"{label[u]}: answers at or after the deadline {iso(r['deadline'])}", "-", "none",
                 [f"{iso(p['at'])} -> {p['status']}" for p in late])
        for p in accepted[:1]:
            ck.check(p.get("body") == e["body"], f"{label[u]} ({e['branch']}): body", "-", e["body"], p.get("body"))


def check_recorded_requests(ck: Checker, expected: dict[str, dict], label: dict[str, str], name):
    """churnwatch.refund_requests: each request once, its facts, state, policy branch, body sent,
    answered_at and Apple's decision; no row for a request the server never filed."""
    # churnwatch's own record of each request.
    rows = ck.psql("""SELECT notification_uuid, original_transaction_id, transaction_id, environment, reason,
                             (extract(epoch FROM requested_at) * 1000)::bigint AS requested_ms,
                             (extract(epoch FROM deadline) * 1000)::bigint AS deadline_ms, state, policy_branch,
                             sent::text AS sent, (extract(epoch FROM answered_at) * 1000)::bigint AS answered_ms, decision,
                             last_error
                      FROM churnwatch.refund_requests""" + ck.only_app1())
    by_uuid = {r_["notification_uuid"]: r_ for r_ in rows}
    stranger = [r_ for u, r_ in by_uuid.items() if u not in expected]
    ck.check(not stranger, "churnwatch.refund_requests: rows for requests the server filed", "-", "only those",
             [f"{name(r_['original_transaction_id'])} {r_['transaction_id']}" for r_ in stranger][:5])
    for u, e in expected.items():
        r, row = e["request"], by_uuid.get(u)
        if row is None:
            ck.check(False, f"{label[u]}: churnwatch.refund_requests row", "-", "recorded", "missing")
            continue
        facts = (row["original_transaction_id"], row["transaction_id"], row["environment"], row["reason"],
                 int(row["requested_ms"]), int(row["deadline_ms"]))
        want = (r["originalTransactionId"], r["transactionId"], r["environment"], r["reason"], r["signedDate"], r["deadline"])
        ck.check(facts == want, f"{label[u]}: recorded request", "-", want, facts)
        state = "answered" if e["body"] is not None else "not_sent"
        ck.check((row["state"], row["policy_branch"]) == (state, e["branch"]), f"{label[u]}: state and policy branch", "-",
                 f"{state} {e['branch']}", f"{row['state']} {row['policy_branch']} {row.get('last_error') or ''}".strip())
        if e["body"] is not None:
            sent = json.loads(row["sent"]) if row["sent"] else None
            ck.check(sent == e["body"], f"{label[u]}: refund_requests.sent", "-", e["body"], sent)
            ck.check(bool(row["answered_ms"]) and int(row["answered_ms"]) < r["deadline"], f"{label[u]}: answered_at", "-",
                     f"before {iso(r['deadline'])}", iso(int(row["answered_ms"])) if row["answered_ms"] else "none")
        ck.check((row["decision"] or None) == e["decision"], f"{label[u]}: Apple's decision", "-", e["decision"] or "none",
                 row["decision"] or "none")


def check_refunds_command(ck: Checker, args, expected: dict[str, dict], until_ms: int) -> tuple[dict, dict]:
    """`churnwatch refunds --json` counts and by_branch against the expected answers: (the counts
    it gave, the expected by branch)."""
    # churnwatch refunds --json: the counts over every request.
    since = night_ms(0) - DAY
    # With several apps, the first app's requests (--app); one app: the command as it always was.
    r = ck.churnwatch(["refunds", "--json", "--since", iso(since), "--as-of", iso(until_ms)]
                      + (["--app", ck.app1_bundle] if ck.app1_bundle else []),
                      dict(os.environ, DATABASE_URL=args.database_url))
    try:
        got = json.loads(r.stdout.splitlines()[0])
    except (ValueError, IndexError):
        got = {}
    ck.check(r.returncode == 0 and bool(got), "churnwatch refunds --json", "-", "exit 0 and the counts",
             f"exit {r.returncode}: {(r.stderr.strip().splitlines() or [''])[-1][:200]}")
    es = list(expected.values())
    want_counts = {"requests": len(es), "answered_in_time": sum(e["body"] is not None for e in es),
                   "not_sent": sum(e["body"] is None for e in es), "failed": 0, "open": 0,
                   "refunded": sum(e["decision"] == "refunded" for e in es), "declined": sum(e["decision"] == "declined" for e in es)}
    got_counts = {k_: got.get(k_) for k_ in want_counts}
    ck.check(got_counts == want_counts, "churnwatch refunds --json counts", "-", want_counts, got_counts)
    want_branches = {}
    for e in es:
        b = want_branches.setdefault(e["branch"], [0, 0, 0])
        b[0] += 1
        b[1] += e["decision"] == "refunded"
        b[2] += e["decision"] == "declined"
    got_branches = {b["branch"]: [b["requests"], b["refunded"], b["declined"]] for b in got.get("by_branch", [])}
    ck.check(got_branches == want_branches, "churnwatch refunds --json by_branch", "-", want_branches, got_branches)
    return got_counts, want_branches


def check_faults_met(ck: Checker, world: World, script: Script, expected: dict[str, dict], invocations: list[int],
                     got_counts: dict, want_branches: dict):
    """The faults injected on Send Consumption Information met; the refund requests' summary line."""
    es = list(expected.values())
    puts = world.consumption_puts
    injected = sum(1 for p in puts if p["errorCode"] in TRANSIENT_CODES)
    # The faults injected on Send Consumption Information were met (and ridden out, above).
    want_faults = sorted(c for f in script.cron_faults.values() for c in
                         f.get("faults", {}).get("consumption", []) + [4290000] * ("consumption" in f.get("force_429", set())))
    got_faults = sorted(p["errorCode"] for p in puts if p["errorCode"] in TRANSIENT_CODES)
    ck.check(got_faults == want_faults, "transient faults on Send Consumption Information met", "-", want_faults, got_faults)
    branches = ", ".join(f"{b} {v[0]}" for b, v in sorted(want_branches.items()))
    print(f"refund requests: {len(es)} ({branches}); consumption information received {len(puts)} times "
          f"({sum(p['status'] == 202 for p in puts)} accepted, {injected} transient faults); "
          f"{len(invocations)} syncs (cron and nights); churnwatch refunds: {got_counts}", flush=True)
