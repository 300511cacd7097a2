#!/usr/bin/env python3
"""Conformance check: churnwatch against the independent App Store server, night after night.

    check.py --churnwatch PATH --database-url URL [--nights 8] [--keep DIR] [--verbose] [--apps N [--refuse-app K]]

Starts the independent server (server.py, in this process: one port for Production, one for
Sandbox), writes churnwatch's configuration (docs/architecture.md §4 variables only), runs `churnwatch
migrate` and `churnwatch import`, then for every night sets the simulated clock and runs
`churnwatch run --as-of T`, and compares what churnwatch wrote in PostgreSQL (read with psql,
CSV output) with the server's ground truth and the docs/contracts.md contracts:

  * segment of every subscriber == docs/contracts.md table applied to the server's truth;
  * auto_renew_disabled / auto_renew_enabled events == the observable flips the script made
    (none on the first night, none for an expiry, a refund or a billing failure); the first
    night writes no events at all;
  * live win-back entries (pending/claimed) == exactly one per subscriber whose segment has a
    campaign (docs/contracts.md campaign table, within its timing window), none for others;
  * every run exits 0 and its churnwatch.runs row is finished with status done;
  * the change feed (on, the default; the server files a V2 notification for every change and
    serves Get Notification History): the first night writes no events at all; flips are
    counted whoever wrote them; two more nights with windows that select nothing by date keep
    every notified subscriber in its true segment and poll the unnotified one once its period
    has ended (period_end_unnotified); churnwatch.notifications holds every notification the
    server issued once, none quarantined but the forgeries;
  * refund requests (CONSUMPTION_REQUEST, then REFUND or REFUND_DECLINED): the check writes the
    app's churnwatch.refund_consent rows and runs `churnwatch notifications sync --as-of T` every
    10 minutes around the requests as cron would (one day with no sync for more than 12 hours),
    with CHURNWATCH_REFUND_DECLINE_AFTER=0.5; every request whose customer consented is answered
    exactly once (202 in the server's record) before its deadline with the body of the contract's
    policy, nothing is sent for the others; churnwatch.refund_requests (state, policy branch,
    body, Apple's decision) and `churnwatch refunds --json` agree with the server's truth;
  * --apps N (default 1): N apps of one team on the same servers in one database, apps 2..N
    registered with `churnwatch apps add` and imported with `churnwatch import --app`; the checks
    above read the first app's rows (bundle_id), second_app.py checks the others' and one finished
    run per app and night; --refuse-app K: app K refused (401) on one night, exit 75, the rest done.

Prints one line per mismatch and closes with "N passed, N failed"; exits 1 on any mismatch.
Exit 2: could not run at all (server, psql or churnwatch unusable).
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import sys
import tempfile
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import scenario  # noqa: E402
import second_app  # noqa: E402
import server as srv  # noqa: E402
from checker import Checker, bundle_filter, check_feed_table  # noqa: E402
from expected import FEED_REASONS, expected_campaign, expected_segment  # noqa: E402
from first_app import build_world  # noqa: E402
from scenario import APP_APPLE_ID, BUNDLE_ID, DAY, HOUR, SERVER_LEAD, Script, iso, night_ms  # noqa: E402

# After the --nights nights, FEED_ONLY_NIGHTS more with windows that select nothing by date (and
# the default --stale-after): the change feed alone keeps state current (docs/contracts.md
# "Planning with the change feed"), the safety net polls where it is silent and should not be.
FEED_ONLY_NIGHTS = 2
ZERO_WINDOWS = ["--start-window", "0s", "--end-window", "0s", "--lapsed-window", "0s"]
REFUND_DECLINE_AFTER = 0.5   # CHURNWATCH_REFUND_DECLINE_AFTER: DECLINE a delivered purchase from half its period on
# Send Consumption Information answers that are the injected transient faults (or the rate
# limit), not a refusal: churnwatch tries again.
TRANSIENT_CODES = {5000001, 4290000}


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description="churnwatch against the independent App Store server")
    ap.add_argument("--churnwatch", required=True, help="path of the churnwatch binary")
    ap.add_argument("--database-url", required=True, help="an empty PostgreSQL database (libpq URL)")
    ap.add_argument("--nights", type=int, default=8, help="nights to run (at least 6)")
    ap.add_argument("--keep", help="directory for keys, certificates, env and logs (default: a temp dir)")
    ap.add_argument("--verbose", action="store_true", help="print churnwatch's summary of each night")
    ap.add_argument("--default-windows", action="store_true",
                    help="run with churnwatch's default windows only (changes outside them are, by design, seen later)")
    ap.add_argument("--first-night", help="night 0's moment, ISO 8601 (default 2026-12-01T02:00:00Z): every "
                    "simulated moment moves with it; churnwatch's answers must not depend on the machine's clock")
    ap.add_argument("--apps", type=int, default=1,
                    help="apps in the one database (default 1): app k >= 2 is second_app.py's, registered with "
                    "`churnwatch apps add` and imported with `churnwatch import --app`")
    ap.add_argument("--refuse-app", type=int, metavar="K",
                    help="on one night the server answers 401 to every request of app K (2..--apps): "
                    "churnwatch exits 75, the other apps' runs done; app K resumes the next night")
    args = ap.parse_args(argv)
    if args.first_night:
        scenario.set_first_night(args.first_night)
    if args.nights < 6:
        ap.error("--nights must be at least 6")
    if args.apps < 1:
        ap.error("--apps must be at least 1")
    if args.refuse_app is not None and not 2 <= args.refuse_app <= args.apps:
        ap.error(f"--refuse-app takes an app 2..--apps ({args.apps}): the first app's checks need its nights")
    workdir = args.keep or tempfile.mkdtemp(prefix="indie-appstore-")
    os.makedirs(workdir, exist_ok=True)
    server_log = open(os.path.join(workdir, "server.log"), "a", encoding="utf-8")

    def log(line: str):
        server_log.write(line + "\n")
        server_log.flush()

    world, script = build_world(feed_night=args.nights)
    others = []
    if args.apps > 1:
        others = [second_app.SecondApp(k, feed_night=args.nights) for k in range(2, args.apps + 1)]
    envs = srv.Environments(workdir, world, log=log, others=[o.world for o in others])
    ck = Checker(args)
    if others:
        ck.app1_bundle = BUNDLE_ID
    status = 2
    try:
        status = run_nights(ck, args, workdir, world, script, envs, others)
        return status
    except Exception as e:  # noqa: BLE001
        print(f"ERROR: {e}", flush=True)
        print(f"{ck.passed} passed, {ck.failed + 1} failed")
        return 2
    finally:
        envs.stop()
        for server in (envs.production, envs.sandbox):
            if server.rejections:
                print(f"note: {server.environment} server rejected {len(server.rejections)} request JWTs, "
                      f"first: {server.rejections[0]}")
            for bid, n in server.refusals.items():
                print(f"note: {server.environment} server refused {n} requests of {bid} (--refuse-app)")
        server_log.close()
        if not args.keep:
            if status == 0:
                import shutil
                shutil.rmtree(workdir, ignore_errors=True)
            else:
                print(f"logs kept in {workdir} (server.log, churnwatch.log)")


def run_nights(ck: Checker, args, workdir: str, world: srv.World, script: Script, envs: srv.Environments,
               others: list = ()) -> int:
    env = envs.env()
    env["DATABASE_URL"] = args.database_url
    # churnwatch's limiter at Apple's production rates; the server enforces the same (sandbox 10 %).
    env.update({"APPSTORE_STATUS_RATE": "50", "APPSTORE_HISTORY_RATE": "50", "APPSTORE_TRANSACTION_RATE": "50"})
    # Refund requests are answered (the default), with DECLINE for a delivered purchase of which
    # at least half the period had passed when the customer asked (docs/contracts.md).
    env["CHURNWATCH_REFUND_DECLINE_AFTER"] = str(REFUND_DECLINE_AFTER)
    with open(os.path.join(workdir, "churnwatch.env"), "w") as f:
        for k, v in env.items():
            f.write(f"{k}={v}\n")
    csv_path = os.path.join(workdir, "subscriptions.csv")
    with open(csv_path, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=["original_transaction_id", "app_account_token", "customer_ref", "environment"])
        w.writeheader()
        w.writerows(r_ for r_ in script.rows if "receipt_data" not in r_)
    # The legacy subscribers come with their stored receipts (docs/contracts.md: the optional 5th column).
    legacy_path = os.path.join(workdir, "subscriptions-with-receipts.csv")
    with open(legacy_path, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=["original_transaction_id", "app_account_token", "customer_ref", "environment",
                                          "receipt_data"])
        w.writeheader()
        w.writerows(r_ for r_ in script.rows if "receipt_data" in r_)
    print(f"independent App Store server: production {envs.production.url}, sandbox {envs.sandbox.url}; "
          f"{len(script.rows)} subscribers, {args.nights} nights; files in {workdir}", flush=True)

    for cmd in (["migrate"], ["import", csv_path], ["import", legacy_path]):
        r = ck.churnwatch(cmd, env)
        ck.check(r.returncode == 0, f"churnwatch {cmd[0]}", "-", "exit 0", f"exit {r.returncode}: {r.stderr.strip()[-500:]}")
        if r.returncode != 0:
            raise RuntimeError(f"churnwatch {cmd[0]} failed")
        if cmd == ["migrate"]:
            for o in others:  # `churnwatch apps add`: the further apps, before any import
                o.register(ck, env)
    for o in others:  # `churnwatch import --app`
        o.import_subscribers(ck, env, workdir)
    if others:
        second_app.check_apps_table(ck, BUNDLE_ID, APP_APPLE_ID, others, "-")

    names = script.names
    otids = [row["original_transaction_id"] for row in script.rows]
    actions = list(script.actions)
    # The moments (--as-of) of every churnwatch sync on this database: cron's and the nights'.
    invocations: list[int] = []
    consents = Consents(ck, world, script)
    consents.write_until(night_ms(0) - DAY)  # the app's rows so far, right after the import
    previous_truth: dict | None = None
    # What churnwatch could know of each subscription after the last night (the truth of its
    # last verified observation), and that observation as (status, autoRenewStatus).
    known: dict[str, dict] = {}
    last_obs: dict[str, tuple] = {}
    unnotified_sub = next(o for o, n in names.items() if n == "unnotified-off-nF-expires-nF1")
    run_log = open(os.path.join(workdir, "churnwatch.log"), "a", encoding="utf-8")
    for k in range(args.nights + FEED_ONLY_NIGHTS):
        now = night_ms(k)
        feed_only = k >= args.nights
        windows = ZERO_WINDOWS if feed_only else ck.run_windows
        forged = script.forged.get(k, set())

        def mark_forged(until_ms: int):
            # The night's notifications about a forged subscription are forged too (served signed by
            # the untrusted chain): quarantined, they must change nothing either.
            for n_ in world.notifications:
                if n_.otid in forged and night_ms(k - 1) < n_.signed_ms <= until_ms:
                    n_.forged = True
        # Events are the night's whoever wrote them: cron's syncs since the last night, and the run.
        events_before = int(ck.psql("SELECT coalesce(max(id), 0) AS n FROM churnwatch.churn_events")[0]["n"])
        # cron's `churnwatch notifications sync` (every 10 minutes around the refund requests):
        # the world moves to the sync's moment (the server's clock minutes ahead, as at night),
        # the app's consent rows written by then are in the database, and each sync answers the
        # open requests it read.
        for tick in [t for t in script.cron if night_ms(k - 1) < t < now]:
            while actions and actions[0][0] <= tick + SERVER_LEAD:
                at, otid, action, kw = actions.pop(0)
                world.act(otid, action, at, **kw)
            world.advance(tick + SERVER_LEAD)
            mark_forged(tick + SERVER_LEAD)
            for o in others:
                o.advance_to(tick + SERVER_LEAD)
            consents.write_until(tick)
            saved = (envs.production.faults, envs.production.force_429)
            injected = script.cron_faults.get(tick, {})
            envs.production.faults = {k_: list(v) for k_, v in injected.get("faults", {}).items()}
            envs.production.force_429 = set(injected.get("force_429", set()))
            envs.production.log(f"=== cron {iso(tick)}")
            r = ck.churnwatch(["notifications", "sync", "--as-of", iso(tick)], env)
            envs.production.faults, envs.production.force_429 = saved
            invocations.append(tick)
            run_log.write(f"=== cron notifications sync {iso(tick)} exit {r.returncode}\n{r.stdout}\n{r.stderr}\n")
            ck.check(r.returncode == 0, f"churnwatch notifications sync {iso(tick)}", k, "exit 0",
                     f"exit {r.returncode}: {ck.last_words(r)}")
        while actions and actions[0][0] <= now:
            at, otid, action, kw = actions.pop(0)
            world.act(otid, action, at, **kw)
        mark_forged(now)
        # The notifications churnwatch's sync gets tonight (Production: the environment it syncs;
        # signed before the run's moment, its endDate), per subscription, in order.
        notes: dict[str, list] = {}
        for n_ in sorted(world.notifications, key=lambda n_: (n_.signed_ms, n_.seq)):
            if (n_.environment == "Production" and not n_.forged and n_.status is not None
                    and (k == 0 or night_ms(k - 1) <= n_.signed_ms) and n_.signed_ms < now):
                notes.setdefault(n_.otid, []).append((n_.status, n_.auto_renew))
        if feed_only:
            # What the feed can tell at the run's moment: the truth just before it (a change at
            # the very moment is filed then, and read by the next night's sync).
            world.advance(now - 1)
            feed_truth = world.truth()["subscriptions"]
        world.advance(now + SERVER_LEAD)
        real_truth = world.truth()["subscriptions"]
        envs.production.forged = set(forged)
        replayed = script.replayed.get(k, {})
        envs.production.replay = {o: night_ms(n) + SERVER_LEAD for o, n in replayed.items()}

        def knowable(o, t):
            # A forged or stale answer changes nothing, so the last verified truth stands.
            if (o in forged or o in replayed) and previous_truth:
                return previous_truth[o]
            # A change Apple never notified, while the feed alone plans: churnwatch learns it when
            # the period it knows has ended (period_end_unnotified), not before.
            if feed_only and t is not None and not t["notified"] and o in known:
                kn = known[o]
                if not (kn["status"] == 1 and kn["expiresDate"] + HOUR < now):
                    return kn
                return t  # polled: the server's answer
            return feed_truth.get(o) if feed_only else t
        truth = {o: knowable(o, t) for o, t in real_truth.items()}
        # Transient, retryable failures churnwatch must ride out (docs/architecture.md §3: retryable errors back off).
        # GeneralInternal (5000000, "try again later") on the one subscriber that changes that night.
        trial = next(o for o, n in names.items() if n == "trial-off-expires-n7")
        # With the change feed, churnwatch reads the transaction history mostly on the first night:
        # its faults are there too, so they still fire.
        faults = {0: {"history": [5000001, 4040006]}, 2: {"status": [5000001]}, 3: {"history": [5000001]}, 4: {"status": [4040002], "history": [4040006]},
                  5: {"receipt": [21005]}, 6: {"status": [5000001, 5000001], "receipt": [21100]},
                  7: {f"status:{trial}": [5000000]}}
        envs.production.faults = {k_: list(v) for k_, v in faults.get(k, {}).items()}
        if k == 2:
            envs.production.force_429.add("history")
        if k == 5:  # the change feed too: one 429 (Retry-After in epoch ms), then one retryable 5000001
            envs.production.force_429.add("notification")
            envs.production.faults["notification"] = [5000001]
        # One 429 (Retry-After in epoch ms) on the first status call of every second night.
        if k % 2 == 1:
            envs.production.force_429.add("status")
        # The further apps: their world at tonight's moment; the one --refuse-app names refused tonight.
        refused = next((o for o in others if o.k == args.refuse_app and k == o.refuse_night), None)
        for o in others:
            o.before_run(k, now, feed_only)
        refused_before = refused.snapshot(ck) if refused else None  # what of the refused app must not change tonight
        runs_before = int(ck.psql("SELECT coalesce(max(id), 0) AS n FROM churnwatch.runs")[0]["n"]) if others else 0
        if refused:
            envs.refuse({refused.bundle_id})

        envs.production.log(f"=== night {k} {iso(now)}")
        consents.write_until(now)
        r = ck.churnwatch(["run", "--as-of", iso(now), "--log-format", "json"] + windows, env)
        envs.refuse(())
        invocations.append(now)
        run_log.write(f"=== night {k} {iso(now)} {' '.join(windows)} exit {r.returncode}\n{r.stdout}\n{r.stderr}\n")
        run_log.flush()
        for o in forged:
            q = ck.psql(f"SELECT count(*) AS n FROM churnwatch.quarantine WHERE original_transaction_id = '{o}'")
            ck.check(int(q[0]["n"]) > 0, f"{names[o]} ({o}) forged answer quarantined", k, "quarantined", "not quarantined")
        # An app refused tonight stops its run alone: churnwatch exits 75 (partial), the rest is done.
        want_exit = 75 if refused else 0
        ck.check(r.returncode == want_exit, "churnwatch run", k, f"exit {want_exit}" + (f" ({refused.bundle_id} refused)" if refused else ""),
                 f"exit {r.returncode}: {ck.last_words(r)}")
        if refused:
            print(f"night {k}: {refused.bundle_id} refused (401): churnwatch exit {r.returncode}, last line: "
                  f"{(r.stderr.strip().splitlines() or [''])[-1][:300]}", flush=True)
        if args.verbose:
            print(f"--- night {k} {iso(now)}\n{r.stdout.strip()}", flush=True)
        runs = ck.psql(f"SELECT id, status, finished_at, as_of, failed, counts FROM churnwatch.runs{ck.only_app1()} ORDER BY id DESC LIMIT 1")
        run = runs[0] if runs else {}
        ck.check(bool(run) and run.get("status") == "done" and bool(run.get("finished_at")), "churnwatch.runs", k,
                 "a finished run with status done", run or "no run row")
        # Only the id Apple doesn't know and the forged answers may fail; transient faults must not.
        # (With the feed alone planning, the unknown id is polled again only if its failure makes it due.)
        expected_failed = sum(1 for o in otids if o not in world.subs) + len(forged)
        failures = ck.psql(f"SELECT original_transaction_id, outcome FROM churnwatch.run_items WHERE run_id = {int(run.get('id', 0))} AND status = 'failed'")
        failed_ok = (int(run.get("failed", -1)) == expected_failed if not feed_only else
                     all(f["original_transaction_id"] not in world.subs for f in failures))
        ck.check(failed_ok, "churnwatch.runs.failed", k, expected_failed if not feed_only else "only the unknown id",
                 f"{run.get('failed')}: " + "; ".join(f"{names.get(f['original_transaction_id'], '?')}: {f['outcome']}" for f in failures))
        run_id = run.get("id", "0")
        if feed_only:
            try:
                due = json.loads(run.get("counts") or "{}").get("due_by_reason")
            except ValueError:
                due = run.get("counts")
            print(f"night {k} (windows select nothing by date): due by reason {due}", flush=True)
            # Planned by the feed: polled only where it is silent and should not be (docs/contracts.md).
            reasons = ck.psql(f"SELECT DISTINCT reason FROM churnwatch.run_items WHERE run_id = {int(run.get('id', 0))}")
            other = sorted({r_["reason"] for r_ in reasons} - FEED_REASONS)
            ck.check(not other, "planned by the change feed", k, "no date-window reasons", other)

        # Segments
        got_seg = {r_["original_transaction_id"]: r_["segment"]
                   for r_ in ck.psql(f"SELECT original_transaction_id, segment FROM churnwatch.subscription_segments{ck.only_app1()}")}
        expected_seg = {o: expected_segment(truth.get(o), now) for o in otids}
        for o in otids:
            real = expected_segment(real_truth.get(o), now)
            if real != expected_seg[o] and got_seg.get(o) == real and o not in forged and o not in replayed \
                    and not real_truth[o]["notified"]:
                # An unnotified change churnwatch found before the period ended (polled for another
                # reason): not wrong, only earlier than the safety net promises.
                print(f"note: {names[o]} ({o}) night {k}: unnotified change already seen ({real})", flush=True)
                truth[o] = real_truth[o]
                expected_seg[o] = real
            ck.check(got_seg.get(o) == expected_seg[o], f"{names[o]} ({o}) segment", k, expected_seg[o], got_seg.get(o))

        # Auto-renew flip events, from the feed and the polls alike (churn_events.run_id is NULL
        # for the feed's): a flip between two consecutive observations churnwatch made of an
        # active subscription (its last one, tonight's notifications, tonight's poll); none on
        # the first night, none at all on the first night (the first sync establishes quietly).
        events = ck.psql(f"SELECT original_transaction_id, event, run_id FROM churnwatch.churn_events WHERE id > {events_before}"
                         + ck.only_app1("AND"))
        if k == 0:
            ck.check(not events, "first night (feed and polls)", k, "no events",
                     f"{len(events)} events: " + ", ".join(f"{names.get(e['original_transaction_id'], e['original_transaction_id'])}:{e['event']}" for e in events[:8]))
        for o in otids:
            t = truth.get(o)
            if t is None:
                continue
            seq = ([last_obs[o]] if o in last_obs else []) + notes.get(o, []) + [(t["status"], t["autoRenewStatus"])]
            exp = []
            if k > 0:
                for a, b in zip(seq, seq[1:]):
                    if a[0] == 1 and b[0] == 1 and a[1] != b[1]:
                        exp.append("auto_renew_enabled" if b[1] == 1 else "auto_renew_disabled")
            last_obs[o] = seq[-1]
            got = sorted(e["event"] for e in events if e["original_transaction_id"] == o
                         and e["event"] in ("auto_renew_disabled", "auto_renew_enabled"))
            ck.check(got == sorted(exp), f"{names[o]} ({o}) auto-renew events", k, sorted(exp) or "none", got or "none")

        # The app's identifiers are carried into the segments table unchanged
        if k == 0:
            ident = {r_["original_transaction_id"]: r_ for r_ in ck.psql(
                "SELECT original_transaction_id, app_account_token, customer_ref FROM churnwatch.subscription_segments"
                + ck.only_app1())}
            for row in script.rows:
                got = ident.get(row["original_transaction_id"], {})
                ck.check((got.get("app_account_token", ""), got.get("customer_ref")) == (row["app_account_token"], row["customer_ref"]),
                         f"{names[row['original_transaction_id']]} identifiers", k,
                         (row["app_account_token"], row["customer_ref"]), (got.get("app_account_token"), got.get("customer_ref")))

        # Live win-back entries
        live = ck.psql("SELECT original_transaction_id, campaign, status FROM churnwatch.winback_queue "
                       "WHERE status IN ('pending', 'claimed')" + ck.only_app1("AND") + " ORDER BY id")
        for o in otids:
            c = expected_campaign(truth.get(o), expected_seg[o], now)
            got = [e["campaign"] for e in live if e["original_transaction_id"] == o]
            ck.check(got == ([c] if c else []), f"{names[o]} ({o}) live win-back ({expected_seg[o]})", k,
                     c or "none", ", ".join(got) or "none")

        # The safety net: the subscription whose changes Apple never notified is polled once the
        # period churnwatch knows has ended, for that reason.
        if feed_only and truth.get(unnotified_sub) is real_truth.get(unnotified_sub) and \
                known.get(unnotified_sub, {}).get("status") == 1 and known[unnotified_sub]["expiresDate"] + HOUR < now:
            item = ck.psql(f"SELECT reason, status FROM churnwatch.run_items WHERE run_id = {int(run_id)} "
                           f"AND original_transaction_id = '{unnotified_sub}'")
            ck.check(bool(item) and item[0]["reason"] == "period_end_unnotified" and item[0]["status"] == "done",
                     f"{names[unnotified_sub]} ({unnotified_sub}) polled by the safety net", k,
                     "period_end_unnotified, done", item[0] if item else "not planned")
        previous_truth = truth
        known = {o: t for o, t in truth.items() if t is not None}
        # The further apps' nights (second_app.py): the apps, runs per app, segments, flips, win-back.
        if others:
            second_app.check_apps_table(ck, BUNDLE_ID, APP_APPLE_ID, others, k)
            second_app.check_night_runs(ck, [BUNDLE_ID] + [o.bundle_id for o in others], k, now, runs_before,
                                        refused.bundle_id if refused else None)
        for o in others:
            o.after_run(ck, k, now, feed_only, refused_before if refused is o else None, runs_before)

        if k == 3:
            # The same night again (an operator re-runs it): exit 0, nothing new (every app's rows).
            before = ck.psql("SELECT count(*) AS n FROM churnwatch.churn_events")[0]["n"]
            live_before = ck.psql("SELECT count(*) AS n FROM churnwatch.winback_queue WHERE status IN ('pending','claimed')")[0]["n"]
            notes_before = ck.psql("SELECT count(*) AS n FROM churnwatch.notifications")[0]["n"]
            r = ck.churnwatch(["run", "--as-of", iso(now), "--log-format", "json"] + ck.run_windows, env)
            invocations.append(now)
            run_log.write(f"=== night {k} again {iso(now)} exit {r.returncode}\n{r.stdout}\n{r.stderr}\n")
            ck.check(r.returncode == 0, "churnwatch run (re-run)", k, "exit 0", f"exit {r.returncode}")
            after = ck.psql("SELECT count(*) AS n FROM churnwatch.churn_events")[0]["n"]
            live_after = ck.psql("SELECT count(*) AS n FROM churnwatch.winback_queue WHERE status IN ('pending','claimed')")[0]["n"]
            notes_after = ck.psql("SELECT count(*) AS n FROM churnwatch.notifications")[0]["n"]
            ck.check((before, live_before, notes_before) == (after, live_after, notes_after), "re-run of the same night", k,
                     f"{before} events, {live_before} live entries, {notes_before} notifications",
                     f"{after} events, {live_after} live entries, {notes_after} notifications")

    last = args.nights + FEED_ONLY_NIGHTS - 1
    check_feed_table(ck, args.database_url, world, script, "Production", night_ms(0) - 179 * DAY, night_ms(last), "change feed",
                     bundle_id=ck.app1_bundle)
    for o in others:
        o.finish(ck, args.database_url, world, last)
    check_refunds(ck, args, world, script, consents, invocations, night_ms(last))
    answers = len(world.consumption_puts)
    sandbox_app(ck, args, workdir, world, script, envs, first_night=last + 1)
    https_app(ck, args, workdir, world, script, envs, night=last + 3)
    # Their databases hold no consent and read every request long after its deadline.
    ck.check(len(world.consumption_puts) == answers, "refund answers from the sandbox and HTTPS deployments", "-",
             "none", [f"{p['transactionId']} {p['status']}" for p in world.consumption_puts[answers:]][:5])

    calls = {env_.environment: dict(env_.calls) for env_ in (envs.production, envs.sandbox)}
    print(f"server calls: {calls}", flush=True)
    for o in others:
        print(f"server calls of {o.bundle_id}: "
              f"{ {env_.environment: dict(env_.app_calls[o.bundle_id]) for env_ in (envs.production, envs.sandbox)} }", flush=True)
    print(f"{ck.passed} passed, {ck.failed} failed", flush=True)
    return 0 if ck.failed == 0 else 1


class Consents:
    """The app's side of refund requests: its churnwatch.refund_consent rows, written with the
    contract's upsert when their moment comes, and which row churnwatch reads at a moment."""

    def __init__(self, ck: Checker, world: srv.World, script: Script):
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


def expected_refund_answers(world: srv.World, consents: Consents, invocations: list[int], until_ms: int) -> dict[str, dict]:
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


def check_refunds(ck: Checker, args, world: srv.World, script: Script, consents: Consents, invocations: list[int],
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


def sandbox_app(ck: Checker, args, workdir: str, world: srv.World, script: Script, envs: srv.Environments,
                first_night: int):
    """A sandbox-only deployment, configured as a tester would: APPSTORE_ENVIRONMENT=Sandbox, only
    APPSTORE_SANDBOX_BASE_URL (no production URL, no app Apple ID), and an import whose
    environment column is empty (the app's configured environment, ops/churnwatch.env.example).
    Two nights on a second database next to the first."""
    side = side_database(ck, args, "_sbx", "sandbox-app")
    if side is None:
        return
    db, url = side
    try:
        env = envs.env()
        for k_ in ("APPSTORE_BASE_URL", "APPSTORE_APP_APPLE_ID"):
            env.pop(k_)
        env.update({"APPSTORE_ENVIRONMENT": "Sandbox", "DATABASE_URL": url})
        sandbox_rows = rows_in(script, world, "Sandbox")
        migrate_and_import(ck, env, os.path.join(workdir, "sandbox-app.csv"),
                           [dict(r_, environment="") for r_ in sandbox_rows], "sandbox app")
        for k in (first_night, first_night + 1):
            now = night_ms(k)
            world.advance(now + SERVER_LEAD)
            truth = world.truth()["subscriptions"]
            r = ck.churnwatch(["run", "--as-of", iso(now), "--log-format", "json"] + ck.run_windows, env)
            ck.check(r.returncode == 0, "sandbox app: churnwatch run", k, "exit 0", f"exit {r.returncode}")
            check_segments(ck, url, script, sandbox_rows, {o: expected_segment(t, now) for o, t in truth.items()}, k, "sandbox app",
                           bundle_id=ck.app1_bundle)
        # Its feed: the sandbox server's own notifications (Sandbox keeps 30 days).
        check_feed_table(ck, url, world, script, "Sandbox", night_ms(first_night) - 29 * DAY, night_ms(first_night + 1),
                         "sandbox app: change feed", bundle_id=ck.app1_bundle)
    finally:
        ck.psql(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')


def side_database(ck: Checker, args, suffix: str, phase: str) -> tuple[str, str] | None:
    """A new, empty database next to --database-url's (name + suffix) and its URL; None, with a
    note, when that URL does not name a database."""
    parts = urllib.parse.urlsplit(args.database_url)
    if not parts.scheme.startswith("postgres") or not parts.path.strip("/"):
        print(f"note: {phase} phase skipped: --database-url is not a postgresql://.../DB URL")
        return None
    db = parts.path.strip("/") + suffix
    ck.psql(f'DROP DATABASE IF EXISTS "{db}"')
    ck.psql(f'CREATE DATABASE "{db}"')
    return db, urllib.parse.urlunsplit(parts._replace(path="/" + db))


def rows_in(script: Script, world: srv.World, environment: str) -> list[dict]:
    """The import rows of the subscribers that live in `environment`."""
    return [r_ for r_ in script.rows
            if r_["original_transaction_id"] in world.subs and world.subs[r_["original_transaction_id"]].environment == environment]


def migrate_and_import(ck: Checker, env: dict, path: str, rows: list[dict], phase: str):
    """Writes `rows` as an import CSV at `path`, then `churnwatch migrate` and `import` (each checked)."""
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=["original_transaction_id", "app_account_token", "customer_ref", "environment",
                                          "receipt_data"])
        w.writeheader()
        w.writerows(rows)
    for cmd in (["migrate"], ["import", path]):
        r = ck.churnwatch(cmd, env)
        ck.check(r.returncode == 0, f"{phase}: churnwatch {cmd[0]}", "-", "exit 0", f"exit {r.returncode}")


def check_segments(ck: Checker, url: str, script: Script, rows: list[dict], expected: dict[str, str], night, phase: str,
                   bundle_id: str | None = None):
    """Each row's segment in the database at `url` against `expected` (by original transaction id)."""
    got = {r_["original_transaction_id"]: r_["segment"] for r_ in ck.psql_url(
        url, "SELECT original_transaction_id, segment FROM churnwatch.subscription_segments" + bundle_filter(bundle_id))}
    for row in rows:
        o = row["original_transaction_id"]
        ck.check(got.get(o) == expected[o], f"{phase}: {script.names[o]} ({o}) segment", night, expected[o], got.get(o))


def https_app(ck: Checker, args, workdir: str, world: srv.World, script: Script, envs: srv.Environments, night: int):
    """The production server again, over HTTPS with a certificate from a private CA (a server
    behind a company CA or a TLS-inspecting proxy). Without APPSTORE_TLS_ROOT_CERTS churnwatch
    must refuse the server before sending it anything (no request, so no JWT, reaches it), stop
    in one line naming the setting (exit 69) and write no subscription state; with it, the
    same command resumes the run and gets every segment right. One night on a third database."""
    side = side_database(ck, args, "_tls", "https-app")
    if side is None:
        return
    db, url = side
    tls = srv.TLSIdentity(os.path.join(workdir, "tls"))
    server = srv.AppStoreServer(world, envs.key, envs.pki, "Production", tls=tls).start()
    try:
        env = envs.env()
        env.update({"APPSTORE_BASE_URL": server.url, "DATABASE_URL": url})
        rows = rows_in(script, world, "Production")
        migrate_and_import(ck, env, os.path.join(workdir, "https-app.csv"), rows, "https app")
        now = night_ms(night)
        world.advance(now + SERVER_LEAD)
        truth = world.truth()["subscriptions"]
        run = ["run", "--as-of", iso(now), "--log-format", "json"] + ck.run_windows

        r = ck.churnwatch(run, env)
        last = (r.stderr.strip().splitlines() or [""])[-1]
        ck.check(r.returncode == 69, "https app, CA not trusted: churnwatch run", night, "exit 69", f"exit {r.returncode}")
        ck.check("untrusted server" in last and "APPSTORE_TLS_ROOT_CERTS" in last,
                 "https app, CA not trusted: last line", night, "untrusted server ... APPSTORE_TLS_ROOT_CERTS", last[:300])
        ck.check(server.requests == 0, "https app, CA not trusted: requests that reached the server", night, 0, server.requests)
        polled = int(ck.psql_url(url, "SELECT count(*) AS n FROM churnwatch.subscription_segments"
                                 + ck.only_app1())[0]["n"])
        ck.check(polled == 0, "https app, CA not trusted: subscriptions with a segment", night, 0, polled)

        env["APPSTORE_TLS_ROOT_CERTS"] = tls.ca_path
        r = ck.churnwatch(run, env)
        ck.check(r.returncode == 0, "https app, CA trusted: churnwatch run", night, "exit 0", f"exit {r.returncode}")
        expected = {o: expected_segment(t, now) for o, t in truth.items()}
        # Subscriptions registered with an id and a receipt are polled through the Server API
        # from their first poll (issue 19), which names the expiration intent even when the
        # receipt's pending_renewal_info lost it: no exception for them any more.
        check_segments(ck, url, script, rows, expected, night, "https app", bundle_id=ck.app1_bundle)
    finally:
        server.stop()
        ck.psql(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
