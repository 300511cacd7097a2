#!/usr/bin/env python3
"""ops/bench outcomes: the retention loop's figures against the simulator's truth.

`experiment` runs one population (a simulator and a migrated, imported database are ready):
a save offer with a 30 % holdout set before the first night; NIGHTS nights at 02:00 after which
every claimed entry is acked and 60 % of them redeemed at the simulator; then the offer removed
and sparse nights until every horizon has passed; then scores every entry of the offer against
the simulator's truth and writes one JSON file. `summarize` prints the keys of several files.

Truth, per entry (docs/churn-model.md, "Outcomes"):
- at risk: on the night the entry first appeared, the subscription's true segment calls for a
  save offer (will_not_renew or price_increase_pending);
- horizon: the true period end on that night;
- label: saved when the subscription is active, in billing retry or in grace a minute after the
  horizon (it renewed, or was still set to renew), lost otherwise;
- days to save: from that night to the first true good sign (auto-renew on, price increase
  accepted, plan change scheduled) since the last bad one (auto-renew off, price increase
  pending) before the horizon; the horizon itself without one.
The true effect is intention-to-treat: treated entries whose outcome the offer changed
(`/_sim/offers`, changed_outcome) over treated entries.
"""
import datetime as dt
import hashlib
import json
import os
import statistics
import subprocess
import sys
import urllib.request

SAVE_SEGMENTS = {"will_not_renew", "price_increase_pending"}
GOOD_SIGNS = {"auto_renew_enabled", "price_increase_accepted", "plan_change_scheduled"}
BAD_SIGNS = {"auto_renew_disabled", "price_increase_pending"}
OFFER = "SAVE30"
TAIL_DAYS = [7, 35, 120, 250, 400]


def iso(t):
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def parse(s):
    s = s.rstrip("Z")
    fmt = "%Y-%m-%dT%H:%M:%S.%f" if "." in s else "%Y-%m-%dT%H:%M:%S"
    return dt.datetime.strptime(s, fmt)


def http(sim, method, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(sim + path, data=data, method=method, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        return json.loads(r.read() or b"null")


def churnwatch(bin_dir, *args):
    r = subprocess.run([os.path.join(bin_dir, "churnwatch"), *args], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"bench_outcomes: churnwatch {' '.join(args[:2])} exited {r.returncode}: {r.stderr.strip()[-400:]}")
    return r.stdout


def sql(query):
    r = subprocess.run(["psql", os.environ["DATABASE_URL"], "-XqAt", "-F", "\t", "-c", query], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"bench_outcomes: psql: {r.stderr.strip()}")
    return [line.split("\t") for line in r.stdout.splitlines() if line]


def redeems(otid):
    """60 % of delivered offers are redeemed, the same ones on every run."""
    return int(hashlib.sha256(otid.encode()).hexdigest()[:8], 16) % 100 < 60


def night(bin_dir, sim, t):
    http(sim, "POST", f"/_sim/clock?set={iso(t)}")
    churnwatch(bin_dir, "run", "--as-of", iso(t), "--status-rate", "1000000", "--history-rate", "1000000",
               "--concurrency", "32", "--log-level", "warning")


def experiment(bin_dir, sim, night0, nights, out):
    churnwatch(bin_dir, "offers", "set", "--campaign", "save_offer", "--offer-id", OFFER, "--holdout", "0.3")
    first_seen = {}  # entry id -> (night index, otid)
    opened_truth = {}  # entry id -> the subscription's true state that night
    for n in range(nights):
        t = night0 + dt.timedelta(days=n)
        night(bin_dir, sim, t)
        new = [r for r in sql(f"SELECT id, original_transaction_id FROM churnwatch.winback_queue "
                              f"WHERE campaign = 'save_offer' AND offer_id = '{OFFER}'") if int(r[0]) not in first_seen]
        if new:
            truth = {s["original_transaction_id"]: s for s in http(sim, "GET", f"/_sim/truth?at={iso(t)}")["subscriptions"]}
            for id_, otid in new:
                first_seen[int(id_)] = (n, otid)
                opened_truth[int(id_)] = truth.get(otid)
        at = t + dt.timedelta(hours=1)
        claimed = [json.loads(line) for line in churnwatch(
            bin_dir, "winback", "claim", "--campaign", "save_offer", "--consumer", "bench", "--limit", "10000",
            "--as-of", iso(at)).splitlines() if line.strip()]
        if claimed:
            churnwatch(bin_dir, "winback", "ack", "--consumer", "bench", *[str(c["id"]) for c in claimed])
        for c in claimed:
            if c.get("offer") and redeems(c["original_transaction_id"]):
                http(sim, "POST", "/_sim/offers/redeem", {"original_transaction_id": c["original_transaction_id"], "at": iso(at)})
    churnwatch(bin_dir, "offers", "remove", "--campaign", "save_offer")
    last = night0 + dt.timedelta(days=nights - 1)
    for d in TAIL_DAYS:
        night(bin_dir, sim, last + dt.timedelta(days=d))
    end = last + dt.timedelta(days=TAIL_DAYS[-1] + 1)
    outcomes = [json.loads(l) for l in churnwatch(bin_dir, "outcomes", "--json", "--as-of", iso(end)).splitlines() if l.strip()]
    row = next((o for o in outcomes if o.get("campaign") == "save_offer" and o.get("offer_id") == OFFER), None)
    has_opened = sql("SELECT count(*) FROM information_schema.columns WHERE table_schema = 'churnwatch' "
                     "AND table_name = 'winback_queue' AND column_name = 'opened_at'")[0][0] == "1"
    opened = "w.opened_at" if has_opened else "coalesce(r.as_of, w.created_at)"
    stored = {int(r[0]): r for r in sql(
        f"SELECT w.id, w.holdout::text, coalesce(w.outcome, ''), coalesce(to_char(w.outcome_at AT TIME ZONE 'UTC', "
        f"'YYYY-MM-DD\"T\"HH24:MI:SS'), ''), to_char(w.expires_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS'), "
        f"to_char({opened} AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS') "
        f"FROM churnwatch.winback_queue w LEFT JOIN churnwatch.runs r ON r.id = w.run_id "
        f"WHERE w.campaign = 'save_offer' AND w.offer_id = '{OFFER}'")}
    events = http(sim, "GET", f"/_sim/events?from={iso(night0 - dt.timedelta(days=1))}&to={iso(end)}")["events"]
    signs = {}
    for e in events:
        if e["event"] in GOOD_SIGNS or e["event"] in BAD_SIGNS:
            signs.setdefault(e["original_transaction_id"], []).append((parse(e["occurred_at"]), e["event"] in GOOD_SIGNS))
    asks, entries = [], []
    for id_, (n, otid) in sorted(first_seen.items()):
        t = opened_truth[id_]
        horizon = parse(t["expires_at"]) if t and t.get("expires_at") else None
        entries.append((id_, n, otid, t, horizon))
        if horizon:
            asks.append({"original_transaction_id": otid, "at": iso(horizon + dt.timedelta(minutes=1))})
    at_horizon = http(sim, "POST", "/_sim/truth/at", asks)["states"] if asks else []
    states = iter(at_horizon)
    scored = []
    for id_, n, otid, t, horizon in entries:
        opened_night = night0 + dt.timedelta(days=n)
        s = next(states) if horizon else None
        true_label = "saved" if s and s.get("status") in (1, 3, 4) else "lost"
        sign = None
        for at, good in sorted(signs.get(otid, [])):
            if opened_night < at <= (horizon or opened_night):
                sign = (sign or at) if good else None
        row_ = stored.get(id_)
        scored.append({
            "id": id_, "otid": otid, "night": n, "holdout": row_[1] == "true" if row_ else None,
            "at_risk": bool(t and t["segment"] in SAVE_SEGMENTS),
            "truth_segment": t["segment"] if t else None,
            "label": (row_[2] or None) if row_ else None, "true_label": true_label,
            "horizon_ok": bool(row_ and horizon and abs((parse(row_[4]) - horizon).total_seconds()) < 1),
            "opened_ok": bool(row_ and row_[5] and parse(row_[5]) == opened_night),
            "days_to_save": ((parse(row_[3]) - opened_night).total_seconds() / 86400) if row_ and row_[2] == "saved" and row_[3] else None,
            "true_days_to_save": (((sign or horizon) - opened_night).total_seconds() / 86400) if true_label == "saved" and horizon else None,
        })
    redemptions = http(sim, "GET", "/_sim/offers")["redemptions"]
    result = {"entries": scored, "outcomes": row, "changed_outcome": sum(1 for r in redemptions if r["changed_outcome"])}
    with open(out, "w") as f:
        json.dump(result, f)


def figures(result):
    e = result["entries"]
    row = result["outcomes"] or {}
    treated = [x for x in e if not x["holdout"]]
    agree = sum(1 for x in e if x["label"] == x["true_label"])
    true_days = [x["true_days_to_save"] for x in treated if x["true_label"] == "saved" and x["true_days_to_save"] is not None]
    f = {
        "entries": len(e),
        "entries_not_at_risk": sum(1 for x in e if not x["at_risk"]),
        "outcome_label_agreement": agree / len(e) if e else 0.0,
        "labels_saved_truth_lost": sum(1 for x in e if x["label"] == "saved" and x["true_label"] == "lost"),
        "labels_lost_truth_saved": sum(1 for x in e if x["label"] == "lost" and x["true_label"] == "saved"),
        "labels_open": sum(1 for x in e if x["label"] is None),
        "horizon_agreement": sum(1 for x in e if x["horizon_ok"]) / len(e) if e else 0.0,
        "opened_agreement": sum(1 for x in e if x["opened_ok"]) / len(e) if e else 0.0,
        "uplift": row.get("uplift"), "uplift_low": row.get("uplift_low"), "uplift_high": row.get("uplift_high"),
        "true_effect": result["changed_outcome"] / len(treated) if treated else 0.0,
        "median_days_to_save": row.get("median_days_to_save"),
        "true_median_days_to_save": statistics.median(true_days) if true_days else None,
    }
    lo, hi = f["uplift_low"], f["uplift_high"]
    f["uplift_covers_true_effect"] = int(lo is not None and hi is not None and lo <= f["true_effect"] <= hi)
    if f["median_days_to_save"] is not None and f["true_median_days_to_save"] is not None:
        f["median_days_to_save_error"] = abs(f["median_days_to_save"] - f["true_median_days_to_save"])
    return f


def summarize(files):
    """key_<label>=value per population, then the worst of them unsuffixed."""
    def show(v):
        return f"{v:.4f}" if isinstance(v, float) else str(v)
    all_f = []
    for path in files:
        label = os.path.basename(path).removesuffix(".json").removeprefix("outcomes_")
        f = figures(json.load(open(path)))
        all_f.append(f)
        for k, v in f.items():
            print(f"{k}_{label}={show(v)}")
    if not all_f:
        return
    print(f"outcome_label_agreement={min(f['outcome_label_agreement'] for f in all_f):.4f}")
    print(f"entries_not_at_risk={sum(f['entries_not_at_risk'] for f in all_f)}")
    print(f"horizon_agreement={min(f['horizon_agreement'] for f in all_f):.4f}")
    print(f"opened_agreement={min(f['opened_agreement'] for f in all_f):.4f}")
    print(f"uplift_covers_true_effect={sum(f['uplift_covers_true_effect'] for f in all_f)}/{len(all_f)}")
    errs = [f.get("median_days_to_save_error") for f in all_f]
    print("median_days_to_save_error_max=" + (f"{max(errs):.2f}" if None not in errs else "none"))


if __name__ == "__main__":
    if len(sys.argv) >= 7 and sys.argv[1] == "experiment":
        _, _, bin_dir, sim, night0, nights, out = sys.argv[:7]
        experiment(bin_dir, sim, parse(night0), int(nights), out)
    elif len(sys.argv) >= 2 and sys.argv[1] == "summarize":
        summarize(sys.argv[2:])
    else:
        sys.exit("usage: bench_outcomes.py experiment BIN SIM_URL NIGHT0 NIGHTS OUT.json | summarize FILE...")
