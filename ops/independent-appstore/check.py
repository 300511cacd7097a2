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
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import scenario  # noqa: E402
import second_app  # noqa: E402
import server as srv  # noqa: E402
from checker import Checker  # noqa: E402
from first_app import build_world  # noqa: E402
from nights import run_nights  # noqa: E402


def arguments(argv: list[str]) -> argparse.Namespace:
    """The command line; night 0 moved as --first-night says."""
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
    return args


def main(argv: list[str]) -> int:
    """Starts the servers on the scripted worlds (first_app.py, second_app.py) and runs the
    check (nights.py); says what the servers rejected or refused; keeps the logs of a failure."""
    args = arguments(argv)
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
        ck.app1_bundle = scenario.BUNDLE_ID
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
        say_rejections(envs)
        server_log.close()
        if not args.keep:
            if status == 0:
                shutil.rmtree(workdir, ignore_errors=True)
            else:
                print(f"logs kept in {workdir} (server.log, churnwatch.log)")


def say_rejections(envs: srv.Environments):
    """The request JWTs each server rejected (the first one's reason), and the requests it
    refused (--refuse-app)."""
    for server in (envs.production, envs.sandbox):
        if server.rejections:
            print(f"note: {server.environment} server rejected {len(server.rejections)} request JWTs, "
                  f"first: {server.rejections[0]}")
        for bid, n in server.refusals.items():
            print(f"note: {server.environment} server refused {n} requests of {bid} (--refuse-app)")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
