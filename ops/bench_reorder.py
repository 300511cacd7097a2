#!/usr/bin/env python3
"""ops/bench detect, its reordered phase: the event log does not depend on the order Apple's
notifications arrive in (issue 47). Called by ops/bench with a simulator started to deliver its
notifications to 127.0.0.1:PORT and to drop a share of the attempts (each dropped attempt is
retried 1, 12, 24, 48 and 72 simulated hours later, Apple's schedule), and two fresh databases.

  both       a first `notifications sync` at FROM establishes every subscription (45 days back).
  reordered  `churnwatch serve` on PORT over REORDERED_URL; the simulator's clock moved an hour at
             a time from FROM to TO plus seven days (Apple's last retry comes 157 hours after
             the first attempt), each step waited for: every attempt due made and the inbox
             applied. Late deliveries arrive after newer notifications of the same subscription.
             Then a last `notifications sync` reads what was never delivered (the net).
  in order   the same notifications (Get Notification History, FROM..TO plus seven days)
             ingested into IN_ORDER_URL in signedDate order.

Prints key=value lines:
  reorder_notifications, reorder_late_deliveries   what was delivered, and how many arrived late
  notified_recall_in_order, notified_recall_reordered   of the true notified changes (but a
      subscription's very first notification, its baseline), the share logged (live) with the
      same kind within a day of the true moment: goal the reordered equal to the in-order
  events_order_dependent   live events logged in one order and not the other: goal 0
  reorder_placed_late, reorder_stale   notifications that arrived after a newer one of their
      subscription and were placed by their signedDate, and those that could not be (goal 0)
  reorder_events_superseded   events the late deliveries showed were derived from the wrong neighbours
usage: bench_reorder.py BIN WORK PORT SIM_URL REORDERED_URL IN_ORDER_URL FROM TO
"""
import json, os, subprocess, sys, time, urllib.request
from datetime import datetime, timedelta, timezone

bin_dir, work, port, sim_url, reordered_url, in_order_url, start, end = sys.argv[1:9]
env = dict(os.environ)


def psql(url, sql):
    out = subprocess.run(["psql", "-qAtX", url, "-c", sql], capture_output=True, text=True, check=True).stdout
    return [line.split("|") for line in out.strip().splitlines() if line]


def get(path):
    with urllib.request.urlopen(sim_url + path, timeout=60) as r:
        return json.load(r)


def set_clock(t):
    req = urllib.request.Request(sim_url + "/_sim/clock?set=" + iso(t), method="POST")
    urllib.request.urlopen(req, timeout=120).read()


def parse(s):
    return datetime.fromisoformat(s.replace("Z", "+00:00"))


def iso(t):
    return t.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def wait(what, ok, seconds=300):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if ok():
            return
        time.sleep(0.05)
    sys.exit(f"bench_reorder: {what} did not happen within {seconds} s")


def sync(url, at):
    subprocess.run([f"{bin_dir}/churnwatch", "notifications", "sync", "--as-of", iso(at), "--notifications-lookback", "45d"],
                   env=dict(env, DATABASE_URL=url), stdout=subprocess.DEVNULL, check=True)


def reordered():
    e = dict(env, DATABASE_URL=reordered_url)
    log = open(f"{work}/reorder_serve.log", "a")
    p = subprocess.Popen([f"{bin_dir}/churnwatch", "serve", "--listen", f"127.0.0.1:{port}", "--log-format", "json"],
                         env=e, stdout=subprocess.PIPE, stderr=log, text=True)
    if "listening on" not in p.stdout.readline():
        sys.exit("bench_reorder: serve did not start: " + open(f"{work}/reorder_serve.log").read()[-2000:])
    t = parse(start)
    while t <= last:
        set_clock(t)
        wait("the deliveries due", lambda: get("/_sim/deliveries")["idle"])
        wait("the inbox applied", lambda: psql(reordered_url, "SELECT count(*) FROM churnwatch.notification_inbox WHERE processed_at IS NULL")[0][0] == "0")
        t += timedelta(hours=1)
    p.terminate()
    p.wait(timeout=60)
    sync(reordered_url, last)
    d = get("/_sim/deliveries")
    return len(d["delivered"]), d["failed"]


def in_order():
    dump = f"{work}/reorder_history.jsonl"
    with open(dump, "w") as f:
        subprocess.run([f"{bin_dir}/churnwatch-bench", "history-dump", start, iso(last)], stdout=f, env=env, check=True)
    subprocess.run([f"{bin_dir}/churnwatch", "notifications", "ingest", dump], env=dict(env, DATABASE_URL=in_order_url),
                   stdout=subprocess.DEVNULL, check=True)


def live(url):
    return {tuple(r) for r in psql(url, """
        SELECT original_transaction_id, event, (extract(epoch FROM occurred_at) * 1000)::bigint
        FROM churnwatch.churn_events WHERE superseded_at IS NULL""")}


def recall(events, truth, first):
    by_sub = {}
    for otid, kind, ms in events:
        by_sub.setdefault((otid, kind), []).append(int(ms) / 1000)
    wanted = [e for e in truth if e["notified"] and e.get("notification_uuid") not in first]
    found = 0
    for e in wanted:
        at = parse(e["occurred_at"]).timestamp()
        times = by_sub.get((e["original_transaction_id"], e["event"]), [])
        near = [x for x in times if abs(x - at) <= 86_400]
        if near:
            times.remove(near[0])
            found += 1
    return found / len(wanted) if wanted else float("nan"), len(wanted)


last = parse(end) + timedelta(days=7)
set_clock(parse(start))
sync(reordered_url, parse(start))
sync(in_order_url, parse(start))
delivered, failed = reordered()
in_order()
# A subscription's very first notification is its baseline (no event), wherever it falls.
notes = get(f"/_sim/notifications?from={iso(parse(start) - timedelta(days=45))}&to={iso(last)}")["notifications"]
first = {}
for n in notes:
    if n["notified"]:
        first.setdefault(n["original_transaction_id"], n["notification_uuid"])
truth = get(f"/_sim/events?from={start}&to={iso(last)}")["events"]
a, b = live(in_order_url), live(reordered_url)
r_in, wanted = recall(a, truth, set(first.values()))
r_re, _ = recall(b, truth, set(first.values()))
superseded = psql(reordered_url, "SELECT count(*) FROM churnwatch.churn_events WHERE superseded_at IS NOT NULL")[0][0]
placed = psql(reordered_url, "SELECT count(*) FROM churnwatch.notifications WHERE reason LIKE 'signed before the stored state%'")[0][0]
stale = psql(reordered_url, "SELECT count(*) FROM churnwatch.notifications WHERE outcome = 'stale'")[0][0]
print(f"reorder_notifications={delivered}")
print(f"reorder_late_deliveries={failed}")
print(f"reorder_true_changes={wanted}")
print(f"notified_recall_in_order={r_in:.4f}")
print(f"notified_recall_reordered={r_re:.4f}")
print(f"events_order_dependent={len(a ^ b)}")
print(f"reorder_placed_late={placed}")
print(f"reorder_stale={stale}")
print(f"reorder_events_superseded={superseded}")
for row in sorted(a ^ b)[:10]:
    print(f"# only {'in order' if row in a else 'reordered'}: {' '.join(row)}", file=sys.stderr)
