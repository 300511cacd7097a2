#!/usr/bin/env python3
"""ops/bench outcomes, the cancel page: what serve's answers save, against the simulator's truth.

`experiment` runs one population (ops/bench has started a simulator whose customers open the
subscription page, posting Apple's requests to serve's PORT, and a migrated, imported database):
a message, a switch-plan suggestion and a promotional offer uploaded, a default message (at Apple
and churnwatch's own), one rule per kind of answer (by segment, then tenure, then everyone), each
holding half out; serve started on PORT; NIGHTS nightly runs while the customers view, then
sparse nights until every horizon has passed. `summarize` prints the keys over several files.

Scored, per population:
- cancel_page_uplift, _low, _high: `churnwatch outcomes --campaign cancel_page` over every kind
  of answer together (the treated and held-out subscribers of all rules, summed), with Newcombe's
  95 % interval computed here from the sums the command prints (the same arithmetic);
- cancel_page_true_effect: from the simulator's potential outcomes (`/_sim/retention/potential`):
  over the subscribers whose first recorded view a rule matched (treated and held out) and whose
  horizon passed, the mean of (still subscribed past the horizon with the rule's kind of answer)
  minus (with the default), both drawn with the same random numbers: what the uplift estimates;
- cancel_page_true_effect_averted: issue 38's truth, kept to compare: of the treated among them,
  the share with a view whose answer averted their cancellation before the horizon (it counts
  customers who would have stayed anyway, and is not what the holdout comparison estimates);
- cancel_page_holdout_shown_other: views of held-out subscribers at which the simulator showed
  anything but the default message (must be 0).
"""
import datetime as dt
import json
import math
import os
import signal
import subprocess
import sys
import urllib.request

M_DEFAULT, M_OFFER, M_SWITCH, M_STAY = ("00000000-0000-4000-8000-00000000d0d0", "11111111-1111-4111-8111-111111111111",
                                        "22222222-2222-4222-8222-222222222222", "33333333-3333-4333-8333-333333333333")
TAIL_DAYS = [7, 21, 40]


def iso(t):
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def http(sim, method, path):
    req = urllib.request.Request(sim + path, method=method)
    with urllib.request.urlopen(req, timeout=900) as r:
        return json.loads(r.read() or b"null")


def churnwatch(bin_dir, *args):
    r = subprocess.run([os.path.join(bin_dir, "churnwatch"), *args], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"{os.path.basename(sys.argv[0])}: churnwatch {' '.join(args[:3])} exited {r.returncode}: {r.stderr.strip()[-400:]}")
    return r.stdout


def sql(query):
    r = subprocess.run(["psql", os.environ["DATABASE_URL"], "-XqAt", "-F", "\t", "-c", query], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"{os.path.basename(sys.argv[0])}: psql: {r.stderr.strip()}")
    return [line.split("\t") for line in r.stdout.splitlines() if line]


def wilson(s, n):
    z = 1.959963984540054
    p = s / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return centre - half, centre + half


def newcombe(s1, n1, s2, n2):
    p1, p2 = s1 / n1, s2 / n2
    (l1, u1), (l2, u2) = wilson(s1, n1), wilson(s2, n2)
    d = p1 - p2
    return d, d - math.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2), d + math.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2)


def setup(bin_dir):
    for m in (M_DEFAULT, M_OFFER, M_SWITCH, M_STAY):
        churnwatch(bin_dir, "messages", "upload", "--message", m, "--header", "Before you go", "--body", f"Message {m[:8]}")
    product = sql("SELECT product_id FROM churnwatch.subscriptions WHERE product_id IS NOT NULL ORDER BY 1 LIMIT 1")[0][0]
    # At Apple too: what the App Store (the simulator) shows as the default.
    churnwatch(bin_dir, "messages", "default", "set", "--product", product, "--locale", "en-US", "--message", M_DEFAULT)
    churnwatch(bin_dir, "messages", "default", "set", "--message", M_DEFAULT)
    churnwatch(bin_dir, "messages", "rules", "set", "--name", "save", "--priority", "10", "--kind", "promotional_offer",
               "--message", M_OFFER, "--offer-id", "SAVE30", "--segments", "will_not_renew,billing_retry,grace_period", "--holdout", "0.5")
    churnwatch(bin_dir, "messages", "rules", "set", "--name", "abroad", "--priority", "20", "--kind", "alternate_product",
               "--message", M_SWITCH, "--alternate-product", product, "--locales", "de,fr,ja,es", "--holdout", "0.5")
    churnwatch(bin_dir, "messages", "rules", "set", "--name", "everyone", "--priority", "100", "--kind", "message",
               "--message", M_STAY, "--holdout", "0.5")


def night(bin_dir, sim, t):
    http(sim, "POST", f"/_sim/clock?set={iso(t)}")
    churnwatch(bin_dir, "run", "--as-of", iso(t), "--status-rate", "1000000", "--history-rate", "1000000",
               "--concurrency", "32", "--log-level", "warning")


def experiment(bin_dir, sim, night0, nights, out, port):
    night(bin_dir, sim, night0)
    setup(bin_dir)
    log = open(out + ".serve.log", "w")
    serve = subprocess.Popen([os.path.join(bin_dir, "churnwatch"), "serve", "--listen", f"127.0.0.1:{port}", "--retention-max-skew", "off",
                              "--log-format", "json"], stdout=subprocess.PIPE, stderr=log, text=True)
    if "listening on" not in serve.stdout.readline():
        sys.exit("bench_cancel_page: serve did not start")
    for n in range(1, nights + 1):
        night(bin_dir, sim, night0 + dt.timedelta(days=n))
    last = night0 + dt.timedelta(days=nights)
    for d in TAIL_DAYS:
        night(bin_dir, sim, last + dt.timedelta(days=d))
    final = last + dt.timedelta(days=TAIL_DAYS[-1])
    serve.send_signal(signal.SIGTERM)
    serve.wait()
    rows = [json.loads(l) for l in churnwatch(bin_dir, "outcomes", "--campaign", "cancel_page", "--json", "--since", iso(night0),
                                               "--as-of", iso(final)).splitlines() if l.strip()]
    views = http(sim, "GET", f"/_sim/retention/views?from={iso(night0)}&to={iso(final)}")["views"]
    potential = http(sim, "GET", f"/_sim/retention/potential?from={iso(night0)}&to={iso(final)}")["views"]
    # The horizon as `outcomes --campaign cancel_page` sets it (docs/contracts.md "The cancel page").
    recorded = {r[0]: (r[1], r[2], float(r[3]), r[4]) for r in sql("""
        SELECT f.request_identifier::text, f.arm, f.original_transaction_id,
               extract(epoch FROM churnwatch.cancel_page_horizon(f.signed_at, f.period_ends_at,
                   ((s.snapshot->>'period_end_ms')::bigint - (s.snapshot->>'period_start_ms')::bigint) * interval '1 millisecond')),
               coalesce(f.rule_kind, '')
        FROM churnwatch.retention_message_requests f LEFT JOIN churnwatch.subscriptions s ON s.original_transaction_id = f.original_transaction_id""")}
    json.dump({"rows": rows, "views": views, "potential": potential, "recorded": recorded, "final": iso(final), "night0": iso(night0)},
              open(out, "w"))


def figures(result):
    rows = result["rows"]
    t_s, t_n = sum(r["saved"] for r in rows), sum(r["decided"] for r in rows)
    h_s, h_n = sum(r["holdout_saved"] for r in rows), sum(r["holdout_decided"] for r in rows)
    uplift, low, high = newcombe(t_s, t_n, h_s, h_n) if t_n and h_n else (float("nan"),) * 3
    recorded = result["recorded"]
    views = [v for v in result["views"] if v["posted"] and v["request_identifier"].lower() in recorded]
    arm = {v["request_identifier"].lower(): recorded[v["request_identifier"].lower()][0] for v in views}
    shown_other = sum(1 for v in views if arm[v["request_identifier"].lower()] == "holdout" and v["shown"] != "default")
    by_sub = {}
    for v in sorted(views, key=lambda v: v["at"]):
        by_sub.setdefault(v["original_transaction_id"], []).append(v)
    final = dt.datetime.strptime(result["final"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.timezone.utc).timestamp()
    treated = averted = 0
    for subs_views in by_sub.values():
        first = next((v for v in subs_views if arm[v["request_identifier"].lower()] in ("treated", "holdout")), None)
        if first is None or arm[first["request_identifier"].lower()] != "treated":
            continue
        horizon = recorded[first["request_identifier"].lower()][2]
        if horizon > final - 86_400:
            continue  # not decided by the end
        treated += 1
        averted += any(v["averted"] for v in subs_views
                       if dt.datetime.strptime(v["at"][:19], "%Y-%m-%dT%H:%M:%S").replace(tzinfo=dt.timezone.utc).timestamp() <= horizon)
    # The truth the estimate targets (issue 50): over every subscriber whose first recorded view a
    # rule matched (treated and held out alike) and whose horizon passed, the mean of the potential
    # outcome with the rule's kind of answer minus the one with the default, at the same horizon.
    pot = {p["original_transaction_id"]: p for p in result.get("potential", [])}
    diffs = []
    for otid, subs_views in by_sub.items():
        first = next((v for v in subs_views if arm[v["request_identifier"].lower()] in ("treated", "holdout")), None)
        if first is None or otid not in pot:
            continue
        rec = recorded[first["request_identifier"].lower()]
        if rec[2] > final - 86_400 or len(rec) < 4 or rec[3] not in pot[otid]["y"]:
            continue
        diffs.append(int(pot[otid]["y"][rec[3]]) - int(pot[otid]["y_default"]))
    return {"cancel_page_views": len(views), "cancel_page_treated_decided": t_n, "cancel_page_holdout_decided": h_n,
            "cancel_page_uplift": uplift, "cancel_page_uplift_low": low, "cancel_page_uplift_high": high,
            "cancel_page_true_effect_averted": averted / treated if treated else float("nan"),
            "cancel_page_true_effect": sum(diffs) / len(diffs) if diffs else float("nan"),
            "cancel_page_holdout_shown_other": shown_other}


def summarize(files):
    covered = 0
    for f in files:
        fig = figures(json.load(open(f)))
        seed = os.path.basename(f).split("_s")[-1].split(".")[0]
        ok = fig["cancel_page_uplift_low"] <= fig["cancel_page_true_effect"] <= fig["cancel_page_uplift_high"]
        covered += ok
        print(f"cancel_page_seed_{seed}=" + " ".join(f"{k[len('cancel_page_'):]}={v:.4f}" if isinstance(v, float) else f"{k[len('cancel_page_'):]}={v}"
                                                  for k, v in fig.items()) + f" covered={int(ok)}")
        for k, v in fig.items():
            print(f"{k}_s{seed}={v:.4f}" if isinstance(v, float) else f"{k}_s{seed}={v}")
    print(f"cancel_page_interval_covers_truth={covered} of {len(files)}")


if __name__ == "__main__":
    if len(sys.argv) >= 8 and sys.argv[1] == "experiment":
        _, _, bin_dir, sim, night0, nights, out, port = sys.argv[:8]
        experiment(bin_dir, sim, dt.datetime.strptime(night0, "%Y-%m-%dT%H:%M:%SZ"), int(nights), out, int(port))
    elif len(sys.argv) >= 2 and sys.argv[1] == "summarize":
        summarize(sys.argv[2:])
    else:
        sys.exit("usage: bench_cancel_page.py experiment BIN SIM_URL NIGHT0 NIGHTS OUT.json PORT | summarize FILE...")
