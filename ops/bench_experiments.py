#!/usr/bin/env python3
"""ops/bench experiments: an adaptive four-arm cancel-page experiment against the simulator's truth.

`experiment` runs one population (ops/bench_experiments.sh has started a simulator whose customers
open the subscription page, posting Apple's requests to serve's PORT, with a true effect per arm,
and a migrated, imported database): four messages uploaded, a default message, one rule for
everyone, an experiment on it with four arms (two messages, two offers), adaptive, a fixed 20 %
holdout; serve started; NIGHTS nightly runs each followed by `experiments update`, then sparse
nights until the horizons have passed. With SKEW > 0 a share of the subscribers is assigned to
arm `a` by hand before the first night (a broken importer): the sample-ratio check must fire.
`summarize` prints the keys over several files.

The truth (`/_sim/retention/potential`): for each subscriber's first posted view, both potential
outcomes at the horizon (still subscribed past the period's end with each arm's answer, and
with the default), drawn with common random numbers, and each answer's revenue per save.
- an arm's true effect: the mean over the exposed subscribers (every arm and the holdout) whose
  horizon passed of y[arm] - y_default: what `outcomes --experiment` estimates;
- the truly best arm by revenue: the largest true effect times revenue per save;
- revenue kept (incremental, in full prices): over the treated subscribers, y[shown] - y_default
  times the shown arm's revenue per save; the oracle shows the best arm to all of them, uniform
  the mean over the four arms.
"""
import datetime as dt
import json
import math
import os
import signal
import subprocess
import sys
import urllib.request

# The same small helpers as the cancel page's bench (iso, the simulator's HTTP, the binary, psql).
from bench_cancel_page import churnwatch, http, iso, sql

M_DEFAULT = "00000000-0000-4000-8000-00000000d0d0"
ARMS = {  # arm: (message, kind, extra, discount)
    "a": ("a1111111-1111-4111-8111-111111111111", "message", None, 0.0),
    "b": ("b2222222-2222-4222-8222-222222222222", "message", None, 0.0),
    "c": ("c3333333-3333-4333-8333-333333333333", "promotional_offer", "SAVE20", 0.2),
    "d": ("d4444444-4444-4444-8444-444444444444", "promotional_offer", "SAVE50", 0.5),
}
TAIL_DAYS = [7, 21, 40]


def parse(s):
    return dt.datetime.strptime(s[:19], "%Y-%m-%dT%H:%M:%S").replace(tzinfo=dt.timezone.utc)


def key(arm):
    message, kind, extra, _ = ARMS[arm]
    return f"offer:{extra}" if kind == "promotional_offer" else f"message:{message}"


def setup(bin_dir, night0, skew):
    for m in [M_DEFAULT] + [a[0] for a in ARMS.values()]:
        churnwatch(bin_dir, "messages", "upload", "--message", m, "--header", "Before you go", "--body", f"Message {m[:8]}")
    product = sql("SELECT product_id FROM churnwatch.subscriptions WHERE product_id IS NOT NULL ORDER BY 1 LIMIT 1")[0][0]
    # At Apple too (the simulator then knows the message as a default: shown to the holdout as the default).
    churnwatch(bin_dir, "messages", "default", "set", "--product", product, "--locale", "en-US", "--message", M_DEFAULT)
    churnwatch(bin_dir, "messages", "default", "set", "--message", M_DEFAULT)
    churnwatch(bin_dir, "messages", "rules", "set", "--name", "everyone", "--kind", "message", "--message", ARMS["a"][0])
    specs = []
    for name, (message, kind, extra, discount) in ARMS.items():
        specs += ["--arm", f"{name}:{kind}:{message}" + (f":{extra}" if extra else "") + (f"@{discount}" if discount else "")]
    churnwatch(bin_dir, "experiments", "add", "exp", "--rule", "everyone", *specs, "--holdout", "0.2", "--allocation", "adaptive",
               "--as-of", iso(night0))
    if skew > 0:
        # A broken importer: a share of the subscribers recorded in arm a before any view.
        sql(f"""INSERT INTO churnwatch.experiment_assignments (bundle_id, experiment, original_transaction_id, arm, period, assigned_at)
                SELECT bundle_id, 'exp', original_transaction_id, 'a', 0, '{iso(night0)}' FROM churnwatch.subscriptions
                WHERE abs(hashtext(original_transaction_id)) % 1000 < {int(skew * 1000)}""")


def night(bin_dir, sim, t):
    http(sim, "POST", f"/_sim/clock?set={iso(t)}")
    churnwatch(bin_dir, "run", "--as-of", iso(t), "--status-rate", "1000000", "--history-rate", "1000000",
               "--concurrency", "32", "--log-level", "warning")
    return churnwatch(bin_dir, "experiments", "update", "--as-of", iso(t)).strip()


def experiment(bin_dir, sim, night0, nights, out, port, skew):
    # Serve first: the views of the population's past (before night 0) are answered at once (no
    # rule yet), not left to time out one by one against a closed port.
    log = open(out + ".serve.log", "w")
    serve = subprocess.Popen([os.path.join(bin_dir, "churnwatch"), "serve", "--listen", f"127.0.0.1:{port}", "--retention-max-skew", "off",
                              "--no-webhooks", "--log-format", "json"], stdout=subprocess.PIPE, stderr=log, text=True)
    if "listening on" not in serve.stdout.readline():
        sys.exit("bench_experiments: serve did not start")
    night(bin_dir, sim, night0)
    setup(bin_dir, night0, skew)
    updates = []
    for n in range(1, nights + 1):
        updates.append(night(bin_dir, sim, night0 + dt.timedelta(days=n)))
        print(f"night {n}: {updates[-1]}", file=sys.stderr, flush=True)
    last = night0 + dt.timedelta(days=nights)
    for d in TAIL_DAYS:
        night(bin_dir, sim, last + dt.timedelta(days=d))
    final = last + dt.timedelta(days=TAIL_DAYS[-1])
    serve.send_signal(signal.SIGTERM)
    serve.wait()
    readout = [json.loads(l) for l in churnwatch(bin_dir, "outcomes", "--experiment", "exp", "--json", "--as-of", iso(final)).splitlines() if l.strip()]
    potential = http(sim, "GET", f"/_sim/retention/potential?from={iso(night0)}&to={iso(final)}")
    views = http(sim, "GET", f"/_sim/retention/views?from={iso(night0)}&to={iso(final)}")["views"]
    # The horizon as `outcomes --experiment` sets it (docs/contracts.md "The cancel page").
    recorded = {r[0]: {"otid": r[1], "arm": r[2], "period": int(r[3]), "at": r[4], "horizon": float(r[5])} for r in sql("""
        SELECT f.request_identifier::text, f.original_transaction_id, f.experiment_arm, f.experiment_period,
               to_char(f.signed_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS'),
               extract(epoch FROM churnwatch.cancel_page_horizon(f.signed_at, f.period_ends_at,
                   ((s.snapshot->>'period_end_ms')::bigint - (s.snapshot->>'period_start_ms')::bigint) * interval '1 millisecond'))
        FROM churnwatch.retention_message_requests f LEFT JOIN churnwatch.subscriptions s ON s.original_transaction_id = f.original_transaction_id
        WHERE f.experiment = 'exp'""")}
    # Each subscriber's long outcome as churnwatch judges it (saved, lost, or none yet), to set beside the truth's.
    labels = {r[0]: r[1] for r in sql(f"""
        SELECT s.original_transaction_id,
               CASE WHEN EXISTS (SELECT 1 FROM churnwatch.churn_events ev WHERE ev.original_transaction_id = f.original_transaction_id
                                 AND ev.event = 'expired' AND ev.superseded_at IS NULL AND ev.occurred_at > f.signed_at
                                 AND ev.occurred_at <= h.horizon + interval '1 day') THEN 'lost'
                    WHEN s.expires_at > h.horizon THEN 'saved' WHEN h.horizon <= '{iso(final)}' AND s.last_success_at > h.horizon THEN 'lost'
                    ELSE '' END
        FROM (SELECT DISTINCT ON (original_transaction_id) original_transaction_id, signed_at, period_ends_at
              FROM churnwatch.retention_message_requests WHERE experiment = 'exp' ORDER BY original_transaction_id, signed_at) f
        JOIN churnwatch.subscriptions s ON s.original_transaction_id = f.original_transaction_id
        CROSS JOIN LATERAL (SELECT churnwatch.cancel_page_horizon(f.signed_at, f.period_ends_at,
            ((s.snapshot->>'period_end_ms')::bigint - (s.snapshot->>'period_start_ms')::bigint) * interval '1 millisecond') AS horizon) h""")}
    json.dump({"labels": labels, "readout": readout, "potential": potential, "views": views, "recorded": recorded, "updates": updates,
               "night0": iso(night0), "nights": nights, "final": iso(final), "skew": skew}, open(out, "w"))


def first_exposures(result):
    """Per subscriber, the first recorded request in the experiment (its arm, and its horizon)."""
    first = {}
    for rid, r in sorted(result["recorded"].items(), key=lambda kv: kv[1]["at"]):
        first.setdefault(r["otid"], dict(r, rid=rid))
    return first


def figures(result):
    first = first_exposures(result)
    final = parse(result["final"]).timestamp()
    pot = {p["original_transaction_id"]: p for p in result["potential"]["views"]}
    # The estimand's population: exposed subscribers whose horizon (as churnwatch sets it) passed.
    decided = [(otid, f) for otid, f in first.items() if otid in pot and f["horizon"] <= final - 86_400]
    rps = {a: None for a in ARMS}
    truth = {}
    for a in ARMS:
        k = key(a)
        diffs = [int(pot[o]["y"][k]) - int(pot[o]["y_default"]) for o, _ in decided]
        truth[a] = sum(diffs) / len(diffs) if diffs else float("nan")
        vals = [pot[o]["revenue_per_save"][k] for o, _ in decided]
        rps[a] = sum(vals) / len(vals) if vals else 1 - ARMS[a][3]
    best = max(ARMS, key=lambda a: truth[a] * rps[a])
    rows = {r["arm"]: r for r in result["readout"] if "arm" in r}
    summary = next(r for r in result["readout"] if "srm_flagged" in r)
    out = {"best_arm": best, "decided_subscribers": len(decided)}
    for a in ARMS:
        r = rows[a]
        out[f"arm_{a}_truth"], out[f"arm_{a}_uplift"] = truth[a], r.get("uplift")
        out[f"arm_{a}_low"], out[f"arm_{a}_high"] = r.get("uplift_low"), r.get("uplift_high")
        out[f"arm_{a}_naive_low"], out[f"arm_{a}_naive_high"] = r.get("naive_low"), r.get("naive_high")
        out[f"arm_{a}_naive_uplift"] = r.get("naive_uplift")
        out[f"arm_{a}_exposed"], out[f"arm_{a}_p_best"] = r["exposed"], r.get("probability_best")
    # Revenue kept, over every treated first exposure (decided or not: the truth knows them all).
    treated = [(o, f) for o, f in first.items() if o in pot and f["arm"] in ARMS]
    def kept(choose):
        return sum((int(pot[o]["y"][key(choose(f))]) - int(pot[o]["y_default"])) * rps[choose(f)] for o, f in treated)
    actual, oracle = kept(lambda f: f["arm"]), kept(lambda f: best)
    uniform = sum(sum((int(pot[o]["y"][key(a)]) - int(pot[o]["y_default"])) * rps[a] for a in ARMS) / len(ARMS) for o, _ in treated)
    out["revenue_kept_vs_oracle"] = actual / oracle if oracle else float("nan")
    out["revenue_kept_vs_uniform"] = actual / uniform if uniform else float("nan")
    out["uniform_vs_oracle"] = uniform / oracle if oracle else float("nan")
    # The last 30 nights' treated views: shown the truly best arm?
    cutoff = parse(result["night0"]) + dt.timedelta(days=result["nights"] - 30)
    last = [r for r in result["recorded"].values() if r["arm"] in ARMS and parse(r["at"]) > cutoff
            and parse(r["at"]) <= parse(result["night0"]) + dt.timedelta(days=result["nights"])]
    out["best_arm_share_last_30_nights"] = sum(r["arm"] == best for r in last) / len(last) if last else float("nan")
    shown = {v["request_identifier"].lower(): v for v in result["views"]}
    out["holdout_shown_other"] = sum(1 for rid, r in result["recorded"].items() if r["arm"] == "holdout"
                                     and rid.lower() in shown and shown[rid.lower()]["shown"] != "default")
    out["srm_flagged"], out["srm_p_value"] = int(summary["srm_flagged"]), summary["srm_p_value"]
    out["periods"] = summary["period"]
    # Consistency of the truth: the outcome as it happened equals the potential outcome of what was shown.
    real = [(o, f) for o, f in decided if pot[o].get("realized") is not None]
    agree = sum(1 for o, f in real if pot[o]["realized"] == (pot[o]["y"][key(f["arm"])] if f["arm"] in ARMS else pot[o]["y_default"]))
    out["truth_consistent_share"] = agree / len(real) if real else float("nan")
    # Issue 38's truth against this one, on the same treated decided subscribers: the share whose
    # view "averted a cancellation" before the horizon, and the mean of y[shown] - y_default; the
    # averted who would have stayed anyway (y_default = 1) are the difference.
    averted_by = {}
    for v in result["views"]:
        if v["averted"]:
            averted_by.setdefault(v["original_transaction_id"], []).append(parse(v["at"]).timestamp())
    tr = [(o, f) for o, f in decided if f["arm"] in ARMS]
    if tr:
        out["old_truth_averted_share"] = sum(any(t <= f["horizon"] for t in averted_by.get(o, [])) for o, f in tr) / len(tr)
        out["truth_effect_on_treated"] = sum(int(pot[o]["y"][key(f["arm"])]) - int(pot[o]["y_default"]) for o, f in tr) / len(tr)
        out["averted_but_would_have_stayed"] = sum(1 for o, f in tr if averted_by.get(o) and pot[o]["y_default"]) / len(tr)
    return out


def summarize(files):
    covered = naive_covered = n = 0
    errors, halves = [], []
    for f in files:
        result = json.load(open(f))
        fig = figures(result)
        seed = os.path.basename(f).split("_s")[-1].split(".")[0]
        for k, v in fig.items():
            print(f"experiments_s{seed}_{k}=" + (f"{v:.4f}" if isinstance(v, float) else f"{v}"))
        if result["skew"] > 0:
            continue
        for a in ARMS:
            t, lo, hi = fig[f"arm_{a}_truth"], fig[f"arm_{a}_low"], fig[f"arm_{a}_high"]
            if lo is None or hi is None:
                continue
            n += 1
            covered += lo <= t <= hi
            nl, nh = fig[f"arm_{a}_naive_low"], fig[f"arm_{a}_naive_high"]
            naive_covered += nl is not None and nl <= t <= nh
            errors.append(fig[f"arm_{a}_uplift"] - t)
            halves.append((hi - lo) / 2)
    if n:
        mean = sum(errors) / n
        se = math.sqrt(sum((e - mean) ** 2 for e in errors) / (n - 1) / n) if n > 1 else float("nan")
        print(f"arm_interval_coverage={covered / n:.4f} ({covered} of {n})")
        print(f"arm_interval_coverage_naive={naive_covered / n:.4f}")
        print(f"arm_bias={mean:+.4f} se={se:.4f}")
        print(f"arm_interval_half_width_mean={sum(halves) / n:.4f}")


if __name__ == "__main__":
    if len(sys.argv) >= 9 and sys.argv[1] == "experiment":
        _, _, bin_dir, sim, night0, nights, out, port, skew = sys.argv[:9]
        experiment(bin_dir, sim, parse(night0), int(nights), out, int(port), float(skew))
    elif len(sys.argv) >= 2 and sys.argv[1] == "summarize":
        summarize(sys.argv[2:])
    else:
        sys.exit("usage: bench_experiments.py experiment BIN SIM_URL NIGHT0 NIGHTS OUT.json PORT SKEW | summarize FILE...")
