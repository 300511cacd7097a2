#!/usr/bin/env python3
"""Scores what churnwatch detected against the simulator's ground truth (`ops/bench detect`).

    bench_detect.py SIM_URL FROM TO EVENTS_CSV SUFFIX SUBSCRIBERS NIGHTS CALLS

Every true event of `/_sim/events` with FROM < occurred_at <= TO (the nights after the first,
which only establishes state) is matched with a `churn_events` row of the same subscription
and kind: each row goes to the latest change not yet matched at or before the row's
`occurred_at` (EVENTS_CSV: original_transaction_id, event, occurred_at and detected_at as epoch
seconds). A change is detected at its row's `detected_at`. Prints, with SUFFIX appended to every key:

  coverage_24h            share of true events detected within 24 hours
  coverage_24h_<event>    the same for each event kind (every kind of the vocabulary; `nan`
                          when the truth had none)
  detected_share          share detected at all by the last night
  calls_per_sub_night     Apple calls of the nights after the first / (subscribers x nights)
  coverage_24h_notified   coverage_24h of the changes Apple notified
  unnotified_events, unnotified_detected_share
                          the changes Apple never notified, and the share of them detected by
                          the last night (the safety net: their period's end, or a poll of
                          billing trouble without news)
  unnotified_due_by_next_window, unnotified_caught_by_next_window
                          of the changes Apple never notified whose next window has come (the
                          subscription's next period boundary, a true renewal or expiry, plus
                          24 hours, before TO), how many, and the share detected by then; a
                          renewal, expiry or start of billing trouble is its own boundary
A notified change not seen within 24 hours is printed on stderr (the first ten; with the feed),
and so is an unnotified change not seen by its next window (the first ten).
"""
import csv
import datetime
import json
import sys
import urllib.request
from collections import defaultdict

KINDS = [
    "auto_renew_disabled", "auto_renew_enabled", "billing_retry_started", "grace_period_started",
    "grace_period_expired", "billing_recovered", "renewed", "expired", "refunded", "refund_reversed",
    "plan_change_scheduled", "plan_change_cancelled", "plan_changed", "price_increase_pending",
    "price_increase_accepted", "resubscribed",
]


def parse(iso: str) -> float:
    return datetime.datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def main(argv: list[str]) -> int:
    sim_url, start, end, events_csv, suffix = argv[1:6]
    subscribers, nights, calls = int(argv[6]), int(argv[7]), int(argv[8])
    with urllib.request.urlopen(f"{sim_url}/_sim/events?from={start}&to={end}") as r:
        truth = json.load(r)["events"]
    lo, hi = parse(start), parse(end)
    truth = [e for e in truth if lo < parse(e["occurred_at"]) <= hi]
    # Each detected row stands for the latest change of its subscription and kind at or before
    # the time it gives (`occurred_at`): a change that a later one of the same kind undid
    # before anyone could see it (or that Apple never notified) is not credited with the later
    # one's detection.
    rows: dict[tuple[str, str], list[tuple[float, float]]] = defaultdict(list)
    with open(events_csv, newline="") as f:
        for otid, event, occurred, at in csv.reader(f):
            rows[(otid, event)].append((float(occurred), float(at)))
    changes: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for e in sorted(truth, key=lambda e: parse(e["occurred_at"])):
        changes[(e["original_transaction_id"], e["event"])].append(e)
    seen_at: dict[int, float] = {}
    for key, found_rows in rows.items():
        candidates = changes.get(key, [])
        for occurred, at in sorted(found_rows):
            best = None
            for e in candidates:
                if parse(e["occurred_at"]) > occurred + 1:
                    break
                if id(e) not in seen_at:
                    best = e
            if best is not None:
                seen_at[id(best)] = at
    # Period boundaries of each subscription (true renewals and expiries), for the safety net's
    # deadline: a change Apple never notified is due by its subscription's next boundary + 24 h.
    boundaries: dict[str, list[float]] = defaultdict(list)
    for e in truth:
        if e["event"] in ("renewed", "expired"):
            boundaries[e["original_transaction_id"]].append(parse(e["occurred_at"]))
    for times in boundaries.values():
        times.sort()
    due = caught = 0
    late = []
    within: dict[str, int] = defaultdict(int)
    total: dict[str, int] = defaultdict(int)
    found = 0
    # Changes Apple never notified (the simulator says which): the safety net's share.
    unnotified = unnotified_found = notified_within = 0
    misses = []
    for e in sorted(truth, key=lambda e: parse(e["occurred_at"])):
        kind, t = e["event"], parse(e["occurred_at"])
        total[kind] += 1
        silent = e.get("notified") is False
        unnotified += silent
        at = seen_at.get(id(e))
        if silent:
            if kind in ("renewed", "expired", "billing_retry_started", "grace_period_started"):
                boundary = t
            else:
                boundary = next((b for b in boundaries[e["original_transaction_id"]] if b > t), None)
            if boundary is not None and boundary + 86_400 <= hi:
                due += 1
                if at is not None and at <= boundary + 86_400:
                    caught += 1
                else:
                    late.append(f"{e['original_transaction_id']} {kind} at {e['occurred_at']}, boundary "
                                f"{datetime.datetime.fromtimestamp(boundary, datetime.timezone.utc):%Y-%m-%dT%H:%M}Z: "
                                + (f"{(at - boundary) / 3600:.0f} h after it" if at is not None else "never"))
        if at is not None:
            found += 1
            unnotified_found += silent
            if at - t <= 86_400:
                within[kind] += 1
                notified_within += not silent
            elif not silent:
                misses.append(f"{e['original_transaction_id']} {kind} at {e['occurred_at']}: {(at - t) / 3600:.0f} h late")
        elif not silent:
            misses.append(f"{e['original_transaction_id']} {kind} at {e['occurred_at']}: never")
    n = sum(total.values())
    for line in misses[:10] if not suffix else []:
        print(f"bench_detect{suffix}: a notified change not seen within 24 h: {line}", file=sys.stderr)
    for line in late[:10]:
        print(f"bench_detect{suffix}: an unnotified change not seen by its next window: {line}", file=sys.stderr)
    print(f"coverage_24h{suffix}={sum(within.values()) / n:.4f}" if n else f"coverage_24h{suffix}=nan")
    for kind in KINDS:
        value = f"{within[kind] / total[kind]:.4f}" if total[kind] else "nan"
        print(f"coverage_24h_{kind}{suffix}={value}")
    print(f"detected_share{suffix}={found / n:.4f}" if n else f"detected_share{suffix}=nan")
    print(f"calls_per_sub_night{suffix}={calls / (subscribers * nights):.4f}")
    print(f"detect_true_events{suffix}={n}")
    if n - unnotified:
        print(f"coverage_24h_notified{suffix}={notified_within / (n - unnotified):.4f}")
    print(f"unnotified_events{suffix}={unnotified}")
    if unnotified:
        print(f"unnotified_detected_share{suffix}={unnotified_found / unnotified:.4f}")
    print(f"unnotified_due_by_next_window{suffix}={due}")
    if due:
        print(f"unnotified_caught_by_next_window{suffix}={caught / due:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
