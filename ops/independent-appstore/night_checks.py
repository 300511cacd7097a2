"""The checks of one night of the first app (and the hand-over to second_app.py for the others),
in the order nights.py runs them after `churnwatch run`: the run itself, segments, auto-renew
flips, identifiers (night 0), live win-back entries, the safety net, the further apps, and on
night 3 a re-run of the same night. Each takes the Nights (nights.py) and its Night."""
from __future__ import annotations

import json

import second_app
from expected import FEED_REASONS, expected_campaign, expected_segment
from scenario import APP_APPLE_ID, BUNDLE_ID, HOUR, iso

FLIPS = ("auto_renew_disabled", "auto_renew_enabled")


def check_run(ns, n, r):
    """Forged answers quarantined; churnwatch's exit (75 when an app was refused); the first
    app's churnwatch.runs row finished and done, with only the expected failures; with the feed
    alone planning, only feed reasons."""
    ck, k = ns.ck, n.k
    for o in n.forged:
        q = ck.psql(f"SELECT count(*) AS n FROM churnwatch.quarantine WHERE original_transaction_id = '{o}'")
        ck.check(int(q[0]["n"]) > 0, f"{ns.names[o]} ({o}) forged answer quarantined", k, "quarantined", "not quarantined")
    # An app refused tonight stops its run alone: churnwatch exits 75 (partial), the rest is done.
    refused = n.refused
    want_exit = 75 if refused else 0
    ck.check(r.returncode == want_exit, "churnwatch run", k, f"exit {want_exit}" + (f" ({refused.bundle_id} refused)" if refused else ""),
             f"exit {r.returncode}: {ck.last_words(r)}")
    if refused:
        print(f"night {k}: {refused.bundle_id} refused (401): churnwatch exit {r.returncode}, last line: "
              f"{(r.stderr.strip().splitlines() or [''])[-1][:300]}", flush=True)
    if ns.args.verbose:
        print(f"--- night {k} {iso(n.now)}\n{r.stdout.strip()}", flush=True)
    runs = ck.psql(f"SELECT id, status, finished_at, as_of, failed, counts FROM churnwatch.runs{ck.only_app1()} ORDER BY id DESC LIMIT 1")
    run = runs[0] if runs else {}
    ck.check(bool(run) and run.get("status") == "done" and bool(run.get("finished_at")), "churnwatch.runs", k,
             "a finished run with status done", run or "no run row")
    # Only the id Apple doesn't know and the forged answers may fail; transient faults must not.
    # (With the feed alone planning, the unknown id is polled again only if its failure makes it due.)
    expected_failed = sum(1 for o in ns.otids if o not in ns.world.subs) + len(n.forged)
    failures = ck.psql(f"SELECT original_transaction_id, outcome FROM churnwatch.run_items WHERE run_id = {int(run.get('id', 0))} AND status = 'failed'")
    failed_ok = (int(run.get("failed", -1)) == expected_failed if not n.feed_only else
                 all(f["original_transaction_id"] not in ns.world.subs for f in failures))
    ck.check(failed_ok, "churnwatch.runs.failed", k, expected_failed if not n.feed_only else "only the unknown id",
             f"{run.get('failed')}: " + "; ".join(f"{ns.names.get(f['original_transaction_id'], '?')}: {f['outcome']}" for f in failures))
    n.run, n.run_id = run, run.get("id", "0")
    if n.feed_only:
        try:
            due = json.loads(run.get("counts") or "{}").get("due_by_reason")
        except ValueError:
            due = run.get("counts")
        print(f"night {k} (windows select nothing by date): due by reason {due}", flush=True)
        # Planned by the feed: polled only where it is silent and should not be (docs/contracts.md).
        reasons = ck.psql(f"SELECT DISTINCT reason FROM churnwatch.run_items WHERE run_id = {int(run.get('id', 0))}")
        other = sorted({r_["reason"] for r_ in reasons} - FEED_REASONS)
        ck.check(not other, "planned by the change feed", k, "no date-window reasons", other)


def check_segments(ns, n):
    """Every subscriber's segment against the truth churnwatch can know tonight (an unnotified
    change it found early, polled for another reason, taken as known from then on)."""
    ck, k, names, truth, real_truth = ns.ck, n.k, ns.names, n.truth, n.real_truth
    got_seg = {r_["original_transaction_id"]: r_["segment"]
               for r_ in ck.psql(f"SELECT original_transaction_id, segment FROM churnwatch.subscription_segments{ck.only_app1()}")}
    expected_seg = {o: expected_segment(truth.get(o), n.now) for o in ns.otids}
    for o in ns.otids:
        real = expected_segment(real_truth.get(o), n.now)
        if real != expected_seg[o] and got_seg.get(o) == real and o not in n.forged and o not in n.replayed \
                and not real_truth[o]["notified"]:
            # An unnotified change churnwatch found before the period ended (polled for another
            # reason): not wrong, only earlier than the safety net promises.
            print(f"note: {names[o]} ({o}) night {k}: unnotified change already seen ({real})", flush=True)
            truth[o] = real_truth[o]
            expected_seg[o] = real
        ck.check(got_seg.get(o) == expected_seg[o], f"{names[o]} ({o}) segment", k, expected_seg[o], got_seg.get(o))
    n.expected_seg = expected_seg


def check_flips(ns, n):
    """Auto-renew flip events, from the feed and the polls alike (churn_events.run_id is NULL
    for the feed's): a flip between two consecutive observations churnwatch made of an active
    subscription (its last one, tonight's notifications, tonight's poll); none on the first
    night, none at all on the first night (the first sync establishes quietly)."""
    ck, k, names = ns.ck, n.k, ns.names
    events = ck.psql(f"SELECT original_transaction_id, event, run_id FROM churnwatch.churn_events WHERE id > {n.events_before}"
                     + ck.only_app1("AND"))
    if k == 0:
        ck.check(not events, "first night (feed and polls)", k, "no events",
                 f"{len(events)} events: " + ", ".join(f"{names.get(e['original_transaction_id'], e['original_transaction_id'])}:{e['event']}" for e in events[:8]))
    for o in ns.otids:
        t = n.truth.get(o)
        if t is None:
            continue
        seq = ([ns.last_obs[o]] if o in ns.last_obs else []) + n.notes.get(o, []) + [(t["status"], t["autoRenewStatus"])]
        exp = []
        if k > 0:
            for a, b in zip(seq, seq[1:]):
                if a[0] == 1 and b[0] == 1 and a[1] != b[1]:
                    exp.append("auto_renew_enabled" if b[1] == 1 else "auto_renew_disabled")
        ns.last_obs[o] = seq[-1]
        got = sorted(e["event"] for e in events if e["original_transaction_id"] == o and e["event"] in FLIPS)
        ck.check(got == sorted(exp), f"{names[o]} ({o}) auto-renew events", k, sorted(exp) or "none", got or "none")


def check_identifiers(ns, n):
    """The app's identifiers are carried into the segments table unchanged."""
    ck = ns.ck
    ident = {r_["original_transaction_id"]: r_ for r_ in ck.psql(
        "SELECT original_transaction_id, app_account_token, customer_ref FROM churnwatch.subscription_segments"
        + ck.only_app1())}
    for row in ns.script.rows:
        got = ident.get(row["original_transaction_id"], {})
        ck.check((got.get("app_account_token", ""), got.get("customer_ref")) == (row["app_account_token"], row["customer_ref"]),
                 f"{ns.names[row['original_transaction_id']]} identifiers", n.k,
                 (row["app_account_token"], row["customer_ref"]), (got.get("app_account_token"), got.get("customer_ref")))


def check_winback(ns, n):
    """Live win-back entries: one per subscriber whose segment has a campaign, none for others."""
    ck = ns.ck
    live = ck.psql("SELECT original_transaction_id, campaign, status FROM churnwatch.winback_queue "
                   "WHERE status IN ('pending', 'claimed')" + ck.only_app1("AND") + " ORDER BY id")
    for o in ns.otids:
        c = expected_campaign(n.truth.get(o), n.expected_seg[o], n.now)
        got = [e["campaign"] for e in live if e["original_transaction_id"] == o]
        ck.check(got == ([c] if c else []), f"{ns.names[o]} ({o}) live win-back ({n.expected_seg[o]})", n.k,
                 c or "none", ", ".join(got) or "none")


def check_safety_net(ns, n):
    """The subscription whose changes Apple never notified is polled once the period churnwatch
    knows has ended, for that reason."""
    ck, sub, known = ns.ck, ns.unnotified_sub, ns.known
    if n.feed_only and n.truth.get(sub) is n.real_truth.get(sub) and \
            known.get(sub, {}).get("status") == 1 and known[sub]["expiresDate"] + HOUR < n.now:
        item = ck.psql(f"SELECT reason, status FROM churnwatch.run_items WHERE run_id = {int(n.run_id)} "
                       f"AND original_transaction_id = '{sub}'")
        ck.check(bool(item) and item[0]["reason"] == "period_end_unnotified" and item[0]["status"] == "done",
                 f"{ns.names[sub]} ({sub}) polled by the safety net", n.k,
                 "period_end_unnotified, done", item[0] if item else "not planned")


def check_other_apps(ns, n):
    """The further apps' nights (second_app.py): the apps, runs per app, segments, flips, win-back."""
    ck, others, refused = ns.ck, ns.others, n.refused
    if others:
        second_app.check_apps_table(ck, BUNDLE_ID, APP_APPLE_ID, others, n.k)
        second_app.check_night_runs(ck, [BUNDLE_ID] + [o.bundle_id for o in others], n.k, n.now, n.runs_before,
                                    refused.bundle_id if refused else None)
    for o in others:
        o.after_run(ck, n.k, n.now, n.feed_only, n.refused_before if refused is o else None, n.runs_before)


def rerun(ns, n):
    """The same night again (an operator re-runs it): exit 0, nothing new (every app's rows)."""
    ck, k, now = ns.ck, n.k, n.now
    before = ck.psql("SELECT count(*) AS n FROM churnwatch.churn_events")[0]["n"]
    live_before = ck.psql("SELECT count(*) AS n FROM churnwatch.winback_queue WHERE status IN ('pending','claimed')")[0]["n"]
    notes_before = ck.psql("SELECT count(*) AS n FROM churnwatch.notifications")[0]["n"]
    r = ck.churnwatch(["run", "--as-of", iso(now), "--log-format", "json"] + ck.run_windows, ns.env)
    ns.invocations.append(now)
    ns.run_log.write(f"=== night {k} again {iso(now)} exit {r.returncode}\n{r.stdout}\n{r.stderr}\n")
    ck.check(r.returncode == 0, "churnwatch run (re-run)", k, "exit 0", f"exit {r.returncode}")
    after = ck.psql("SELECT count(*) AS n FROM churnwatch.churn_events")[0]["n"]
    live_after = ck.psql("SELECT count(*) AS n FROM churnwatch.winback_queue WHERE status IN ('pending','claimed')")[0]["n"]
    notes_after = ck.psql("SELECT count(*) AS n FROM churnwatch.notifications")[0]["n"]
    ck.check((before, live_before, notes_before) == (after, live_after, notes_after), "re-run of the same night", k,
             f"{before} events, {live_before} live entries, {notes_before} notifications",
             f"{after} events, {live_after} live entries, {notes_after} notifications")
