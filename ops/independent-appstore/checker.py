"""Running churnwatch and psql for the check, counting what matched (Checker), and the checks
the first app and app k share (their notifications in churnwatch.notifications)."""
from __future__ import annotations

import csv
import io
import os
import subprocess

from scenario import Script, iso
from world import World


# How the scripted changes are made observable on the night they happen: every change is
# scheduled 6 hours before a night (between two nights), and each run is told
# `--stale-after 20h`, so every subscriber was last polled 24 h earlier and is due every night
# (stale) on top of the default windows. The default windows alone would, by design, see a
# mid-period auto-renew flip only near the period's start or end.
RUN_WINDOWS = ["--stale-after", "20h"]


def bundle_filter(bundle_id: str | None, conj: str = "WHERE") -> str:
    """` WHERE bundle_id = '...'` (or ` AND ...`) for one app's rows; empty for None."""
    return f" {conj} bundle_id = '{bundle_id}'" if bundle_id else ""


class Checker:
    def __init__(self, args):
        self.args = args
        self.passed = 0
        self.failed = 0
        # With --apps N > 1 the contract tables hold every app's rows (a bundle_id column): the
        # first app's checks read its rows alone. None: one app, the queries are as they were.
        self.app1_bundle: str | None = None
        self.repo = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
        # `churnwatch run`'s windows on the nights (--default-windows: churnwatch's own alone).
        self.run_windows = [] if args.default_windows else RUN_WINDOWS

    def check(self, ok: bool, subject: str, night, expected, got):
        if ok:
            self.passed += 1
        else:
            self.failed += 1
            print(f"MISMATCH {subject} night {night}: expected {expected}, got {got}", flush=True)

    def last_words(self, r: subprocess.CompletedProcess) -> list[str] | str:
        """What a failed command said last: its last line; with several apps, each app's line
        (churnwatch says one per app that did not finish, then a summary)."""
        if not r.stderr.strip():
            return ""
        lines = r.stderr.strip().splitlines()
        if self.app1_bundle is None:
            return lines[-1:]
        return [line for line in lines if line.startswith("churnwatch: ")][-6:] or lines[-1:]

    def only_app1(self, conj: str = "WHERE") -> str:
        """The condition that keeps the first app's rows of a contract table (with --apps 1, nothing)."""
        return bundle_filter(self.app1_bundle, conj)

    def psql(self, sql: str) -> list[dict]:
        return self.psql_url(self.args.database_url, sql)

    def psql_url(self, url: str, sql: str) -> list[dict]:
        out = subprocess.run(["psql", url, "-X", "-q", "--csv", "-v", "ON_ERROR_STOP=1", "-c", sql],
                             capture_output=True, text=True)
        if out.returncode != 0:
            raise RuntimeError(f"psql failed: {out.stderr.strip()}")
        return list(csv.DictReader(io.StringIO(out.stdout)))

    def churnwatch(self, args: list[str], env: dict) -> subprocess.CompletedProcess:
        return subprocess.run([self.args.churnwatch] + args, env=env, cwd=self.repo, capture_output=True, text=True,
                              timeout=600)



def check_feed_table(ck: Checker, url: str, world: World, script: Script, environment: str, since_ms: int,
                     until_ms: int, phase: str, bundle_id: str | None = None):
    """churnwatch.notifications against the notifications the server filed for `environment`:
    every one signed in [since_ms, until_ms) is there once (by notification_uuid), with its type,
    subtype and subscription, read from Apple's history; none quarantined but the deliberate
    forgeries; one-time purchases ignored; nothing the server never issued."""
    rows = ck.psql_url(url, "SELECT notification_uuid, notification_type, subtype, original_transaction_id, environment, "
                            "source, outcome, reason FROM churnwatch.notifications" + bundle_filter(bundle_id))
    by_uuid: dict[str, list[dict]] = {}
    for r_ in rows:
        if r_["notification_uuid"]:
            by_uuid.setdefault(r_["notification_uuid"], []).append(r_)
    issued = {n.uuid: n for n in world.notifications}
    expected = [n for n in world.notifications
                if n.environment == environment and not n.forged and since_ms <= n.signed_ms < until_ms]
    name = lambda o: script.names.get(o, o)  # noqa: E731
    missing = [n for n in expected if n.uuid not in by_uuid]
    ck.check(not missing, f"{phase}: notifications recorded", "-", f"all {len(expected)} issued",
             f"{len(missing)} missing, e.g. " + ", ".join(f"{name(n.otid)} {n.notification_type}/{n.subtype} {iso(n.signed_ms)}"
                                                            for n in missing[:6]))
    dup = {u: len(v) for u, v in by_uuid.items() if len(v) > 1}
    ck.check(not dup, f"{phase}: notifications recorded once", "-", "no duplicates", dup)
    stranger = [u for u in by_uuid if u not in issued]
    ck.check(not stranger, f"{phase}: notifications the server issued", "-", "only those", stranger[:5])
    wrong, outcomes = [], {}
    for n in expected:
        for r_ in by_uuid.get(n.uuid, [])[:1]:
            outcomes[r_["outcome"]] = outcomes.get(r_["outcome"], 0) + 1
            # A one-time purchase is about its own transaction (its originalTransactionId), verified and ignored.
            want_outcome = ("applied", "stale") if n.status is not None else ("ignored",)
            if (r_["notification_type"], r_["subtype"] or None, r_["original_transaction_id"], r_["source"]) != \
                    (n.notification_type, n.subtype, n.transaction["originalTransactionId"], "history") \
                    or r_["outcome"] not in want_outcome:
                wrong.append(f"{name(n.otid)} {n.notification_type}/{n.subtype}: {dict(r_)}")
    ck.check(not wrong, f"{phase}: notifications as issued", "-", "type, subtype, subscription, source history, outcome",
             f"{len(wrong)} differ, e.g. {wrong[:3]}")
    forged = {n.otid for n in world.notifications if n.forged and n.environment == environment}
    quarantined = [r_ for r_ in rows if r_["outcome"] == "quarantined"]
    ck.check(all(r_["original_transaction_id"] in forged or not r_["original_transaction_id"] for r_ in quarantined)
             and (bool(quarantined) or not forged),
             f"{phase}: quarantined notifications", "-", f"only the forged ones ({', '.join(name(o) for o in forged) or 'none'})",
             [f"{name(r_['original_transaction_id'])}: {r_['reason']}" for r_ in quarantined][:5] or "none")
    print(f"{phase}: {len(rows)} notifications recorded ({len(expected)} expected), outcomes {outcomes}, "
          f"{len(quarantined)} quarantined", flush=True)
