"""The nights: churnwatch set up against the servers, then night after night cron's syncs, the
scripted changes, the injected faults and `churnwatch run`, each night checked against the
truth (night_checks.py); after the last, the feed, the refund requests and the other
deployments (phases.py). run_nights is what check.py runs."""
from __future__ import annotations

import csv
import os
from dataclasses import dataclass, field

import night_checks
import second_app
import server as srv
from checker import Checker, check_feed_table
from phases import https_app, sandbox_app
from refunds import REFUND_DECLINE_AFTER, Consents, check_refunds
from scenario import APP_APPLE_ID, BUNDLE_ID, DAY, HOUR, SERVER_LEAD, Script, iso, night_ms
from world import World

# After the --nights nights, FEED_ONLY_NIGHTS more with windows that select nothing by date (and
# the default --stale-after): the change feed alone keeps state current (docs/contracts.md
# "Planning with the change feed"), the safety net polls where it is silent and should not be.
FEED_ONLY_NIGHTS = 2
ZERO_WINDOWS = ["--start-window", "0s", "--end-window", "0s", "--lapsed-window", "0s"]


def night_faults(k: int, trial: str) -> dict[str, list[int]]:
    """Transient, retryable failures churnwatch must ride out on night k (docs/architecture.md
    §3: retryable errors back off); GeneralInternal (5000000, "try again later") on `trial`, the
    one subscriber that changes that night. With the change feed, churnwatch reads the
    transaction history mostly on the first night: its faults are there too, so they still fire."""
    faults = {0: {"history": [5000001, 4040006]}, 2: {"status": [5000001]}, 3: {"history": [5000001]}, 4: {"status": [4040002], "history": [4040006]},
              5: {"receipt": [21005]}, 6: {"status": [5000001, 5000001], "receipt": [21100]},
              7: {f"status:{trial}": [5000000]}}
    return {k_: list(v) for k_, v in faults.get(k, {}).items()}


@dataclass
class Night:
    """One night's moment and what is known of it as it goes."""
    k: int
    now: int
    feed_only: bool  # windows that select nothing by date: the change feed alone plans
    windows: list[str]
    forged: set[str]  # subscriptions whose answer (and notifications) are forged tonight
    replayed: dict[str, int] = field(default_factory=dict)  # subscription -> night whose answer is sent again
    events_before: int = 0  # the last churn_events id before tonight's syncs and run
    notes: dict[str, list] = field(default_factory=dict)  # (status, autoRenewStatus) per notification synced tonight
    feed_truth: dict | None = None  # the truth just before the run (what the feed can tell)
    real_truth: dict = field(default_factory=dict)  # the server's truth at the run
    truth: dict = field(default_factory=dict)  # what churnwatch can know tonight
    refused: object = None  # the further app refused tonight (second_app.SecondApp), if any
    refused_before: dict | None = None
    runs_before: int = 0
    run: dict = field(default_factory=dict)  # the first app's churnwatch.runs row
    run_id: str = "0"
    expected_seg: dict[str, str] = field(default_factory=dict)


class Nights:
    """The run of the check on --database-url: what carries from night to night (the scripted
    changes not yet made, churnwatch's syncs, its last observations) and the steps of a night."""

    def __init__(self, ck: Checker, args, workdir: str, world: World, script: Script, envs: srv.Environments,
                 others: list = ()):
        self.ck, self.args, self.workdir, self.world, self.script, self.envs = ck, args, workdir, world, script, envs
        self.others = others
        self.env: dict = {}

    # ---- before the first night ----
    def set_up(self):
        """churnwatch's configuration, its import files, migrate and import (and the further
        apps registered and imported), then what the nights carry."""
        self.env = self.churnwatch_env()
        csv_path, legacy_path = self.write_imports()
        print(f"independent App Store server: production {self.envs.production.url}, sandbox {self.envs.sandbox.url}; "
              f"{len(self.script.rows)} subscribers, {self.args.nights} nights; files in {self.workdir}", flush=True)
        self.migrate_and_import(csv_path, legacy_path)
        self.names = self.script.names
        self.otids = [row["original_transaction_id"] for row in self.script.rows]
        self.actions = list(self.script.actions)
        # The moments (--as-of) of every churnwatch sync on this database: cron's and the nights'.
        self.invocations: list[int] = []
        self.consents = Consents(self.ck, self.world, self.script)
        self.consents.write_until(night_ms(0) - DAY)  # the app's rows so far, right after the import
        self.previous_truth: dict | None = None
        # What churnwatch could know of each subscription after the last night (the truth of its
        # last verified observation), and that observation as (status, autoRenewStatus).
        self.known: dict[str, dict] = {}
        self.last_obs: dict[str, tuple] = {}
        self.unnotified_sub = next(o for o, n in self.names.items() if n == "unnotified-off-nF-expires-nF1")
        self.run_log = open(os.path.join(self.workdir, "churnwatch.log"), "a", encoding="utf-8")

    def churnwatch_env(self) -> dict:
        env = self.envs.env()
        env["DATABASE_URL"] = self.args.database_url
        # churnwatch's limiter at Apple's production rates; the server enforces the same (sandbox 10 %).
        env.update({"APPSTORE_STATUS_RATE": "50", "APPSTORE_HISTORY_RATE": "50", "APPSTORE_TRANSACTION_RATE": "50"})
        # Refund requests are answered (the default), with DECLINE for a delivered purchase of which
        # at least half the period had passed when the customer asked (docs/contracts.md).
        env["CHURNWATCH_REFUND_DECLINE_AFTER"] = str(REFUND_DECLINE_AFTER)
        with open(os.path.join(self.workdir, "churnwatch.env"), "w") as f:
            for k, v in env.items():
                f.write(f"{k}={v}\n")
        return env

    def write_imports(self) -> tuple[str, str]:
        """The import CSV (4 columns) and the legacy subscribers' with their stored receipts
        (docs/contracts.md: the optional 5th column)."""
        csv_path = os.path.join(self.workdir, "subscriptions.csv")
        with open(csv_path, "w", newline="", encoding="utf-8") as f:
            w = csv.DictWriter(f, fieldnames=["original_transaction_id", "app_account_token", "customer_ref", "environment"])
            w.writeheader()
            w.writerows(r_ for r_ in self.script.rows if "receipt_data" not in r_)
        legacy_path = os.path.join(self.workdir, "subscriptions-with-receipts.csv")
        with open(legacy_path, "w", newline="", encoding="utf-8") as f:
            w = csv.DictWriter(f, fieldnames=["original_transaction_id", "app_account_token", "customer_ref", "environment",
                                              "receipt_data"])
            w.writeheader()
            w.writerows(r_ for r_ in self.script.rows if "receipt_data" in r_)
        return csv_path, legacy_path

    def migrate_and_import(self, csv_path: str, legacy_path: str):
        ck, env = self.ck, self.env
        for cmd in (["migrate"], ["import", csv_path], ["import", legacy_path]):
            r = ck.churnwatch(cmd, env)
            ck.check(r.returncode == 0, f"churnwatch {cmd[0]}", "-", "exit 0", f"exit {r.returncode}: {r.stderr.strip()[-500:]}")
            if r.returncode != 0:
                raise RuntimeError(f"churnwatch {cmd[0]} failed")
            if cmd == ["migrate"]:
                for o in self.others:  # `churnwatch apps add`: the further apps, before any import
                    o.register(ck, env)
        for o in self.others:  # `churnwatch import --app`
            o.import_subscribers(ck, env, self.workdir)
        if self.others:
            second_app.check_apps_table(ck, BUNDLE_ID, APP_APPLE_ID, self.others, "-")

    # ---- a night ----
    def night(self, k: int):
        now = night_ms(k)
        feed_only = k >= self.args.nights
        n = Night(k, now, feed_only, ZERO_WINDOWS if feed_only else self.ck.run_windows, self.script.forged.get(k, set()))
        # Events are the night's whoever wrote them: cron's syncs since the last night, and the run.
        n.events_before = int(self.ck.psql("SELECT coalesce(max(id), 0) AS n FROM churnwatch.churn_events")[0]["n"])
        for tick in [t for t in self.script.cron if night_ms(k - 1) < t < now]:
            self.cron_sync(n, tick)
        self.apply_actions(now)
        self.mark_forged(n, now)
        n.notes = self.synced_notes(n)
        self.tonights_truth(n)
        self.inject_faults(n)
        self.prepare_apps(n)
        r = self.run(n)
        night_checks.check_run(self, n, r)
        night_checks.check_segments(self, n)
        night_checks.check_flips(self, n)
        if k == 0:
            night_checks.check_identifiers(self, n)
        night_checks.check_winback(self, n)
        night_checks.check_safety_net(self, n)
        self.previous_truth = n.truth
        self.known = {o: t for o, t in n.truth.items() if t is not None}
        night_checks.check_other_apps(self, n)
        if k == 3:
            night_checks.rerun(self, n)

    def apply_actions(self, until_ms: int):
        """The scripted changes due by `until_ms`, in order."""
        while self.actions and self.actions[0][0] <= until_ms:
            at, otid, action, kw = self.actions.pop(0)
            self.world.act(otid, action, at, **kw)

    def mark_forged(self, n: Night, until_ms: int):
        """The night's notifications about a forged subscription are forged too (served signed by
        the untrusted chain): quarantined, they must change nothing either."""
        for n_ in self.world.notifications:
            if n_.otid in n.forged and night_ms(n.k - 1) < n_.signed_ms <= until_ms:
                n_.forged = True

    def cron_sync(self, n: Night, tick: int):
        """cron's `churnwatch notifications sync` (every 10 minutes around the refund requests):
        the world moves to the sync's moment (the server's clock minutes ahead, as at night), the
        app's consent rows written by then are in the database, and each sync answers the open
        requests it read."""
        ck, envs = self.ck, self.envs
        self.apply_actions(tick + SERVER_LEAD)
        self.world.advance(tick + SERVER_LEAD)
        self.mark_forged(n, tick + SERVER_LEAD)
        for o in self.others:
            o.advance_to(tick + SERVER_LEAD)
        self.consents.write_until(tick)
        saved = (envs.production.faults, envs.production.force_429)
        injected = self.script.cron_faults.get(tick, {})
        envs.production.faults = {k_: list(v) for k_, v in injected.get("faults", {}).items()}
        envs.production.force_429 = set(injected.get("force_429", set()))
        envs.production.log(f"=== cron {iso(tick)}")
        r = ck.churnwatch(["notifications", "sync", "--as-of", iso(tick)], self.env)
        envs.production.faults, envs.production.force_429 = saved
        self.invocations.append(tick)
        self.run_log.write(f"=== cron notifications sync {iso(tick)} exit {r.returncode}\n{r.stdout}\n{r.stderr}\n")
        ck.check(r.returncode == 0, f"churnwatch notifications sync {iso(tick)}", n.k, "exit 0",
                 f"exit {r.returncode}: {ck.last_words(r)}")

    def synced_notes(self, n: Night) -> dict[str, list]:
        """The notifications churnwatch's sync gets tonight (Production: the environment it syncs;
        signed before the run's moment, its endDate), per subscription, in order."""
        notes: dict[str, list] = {}
        for n_ in sorted(self.world.notifications, key=lambda n_: (n_.signed_ms, n_.seq)):
            if (n_.environment == "Production" and not n_.forged and n_.status is not None
                    and (n.k == 0 or night_ms(n.k - 1) <= n_.signed_ms) and n_.signed_ms < n.now):
                notes.setdefault(n_.otid, []).append((n_.status, n_.auto_renew))
        return notes

    def tonights_truth(self, n: Night):
        """The server's truth at the run (its clock minutes ahead), tonight's forged and replayed
        answers, and what churnwatch can know of each subscription tonight."""
        world, now = self.world, n.now
        if n.feed_only:
            # What the feed can tell at the run's moment: the truth just before it (a change at
            # the very moment is filed then, and read by the next night's sync).
            world.advance(now - 1)
            n.feed_truth = world.truth()["subscriptions"]
        world.advance(now + SERVER_LEAD)
        n.real_truth = world.truth()["subscriptions"]
        self.envs.production.forged = set(n.forged)
        n.replayed = self.script.replayed.get(n.k, {})
        self.envs.production.replay = {o: night_ms(k_) + SERVER_LEAD for o, k_ in n.replayed.items()}
        n.truth = {o: self.knowable(n, o, t) for o, t in n.real_truth.items()}

    def knowable(self, n: Night, o: str, t: dict | None) -> dict | None:
        # A forged or stale answer changes nothing, so the last verified truth stands.
        if (o in n.forged or o in n.replayed) and self.previous_truth:
            return self.previous_truth[o]
        # A change Apple never notified, while the feed alone plans: churnwatch learns it when
        # the period it knows has ended (period_end_unnotified), not before.
        if n.feed_only and t is not None and not t["notified"] and o in self.known:
            kn = self.known[o]
            if not (kn["status"] == 1 and kn["expiresDate"] + HOUR < n.now):
                return kn
            return t  # polled: the server's answer
        return n.feed_truth.get(o) if n.feed_only else t

    def inject_faults(self, n: Night):
        production = self.envs.production
        trial = next(o for o, name in self.names.items() if name == "trial-off-expires-n7")
        production.faults = night_faults(n.k, trial)
        if n.k == 2:
            production.force_429.add("history")
        if n.k == 5:  # the change feed too: one 429 (Retry-After in epoch ms), then one retryable 5000001
            production.force_429.add("notification")
            production.faults["notification"] = [5000001]
        # One 429 (Retry-After in epoch ms) on the first status call of every second night.
        if n.k % 2 == 1:
            production.force_429.add("status")

    def prepare_apps(self, n: Night):
        """The further apps: their world at tonight's moment; the one --refuse-app names refused tonight."""
        n.refused = next((o for o in self.others if o.k == self.args.refuse_app and n.k == o.refuse_night), None)
        for o in self.others:
            o.before_run(n.k, n.now, n.feed_only)
        n.refused_before = n.refused.snapshot(self.ck) if n.refused else None  # what of it must not change tonight
        n.runs_before = (int(self.ck.psql("SELECT coalesce(max(id), 0) AS n FROM churnwatch.runs")[0]["n"])
                         if self.others else 0)
        if n.refused:
            self.envs.refuse({n.refused.bundle_id})

    def run(self, n: Night):
        """Tonight's `churnwatch run`, logged in churnwatch.log."""
        self.envs.production.log(f"=== night {n.k} {iso(n.now)}")
        self.consents.write_until(n.now)
        r = self.ck.churnwatch(["run", "--as-of", iso(n.now), "--log-format", "json"] + n.windows, self.env)
        self.envs.refuse(())
        self.invocations.append(n.now)
        self.run_log.write(f"=== night {n.k} {iso(n.now)} {' '.join(n.windows)} exit {r.returncode}\n{r.stdout}\n{r.stderr}\n")
        self.run_log.flush()
        return r

    # ---- after the last night ----
    def finish(self) -> int:
        """The feed, the further apps' notifications, the refund requests, the sandbox and HTTPS
        deployments; the server's calls and the count. 0 when everything matched, else 1."""
        ck, args, world, script, envs = self.ck, self.args, self.world, self.script, self.envs
        last = args.nights + FEED_ONLY_NIGHTS - 1
        check_feed_table(ck, args.database_url, world, script, "Production", night_ms(0) - 179 * DAY, night_ms(last),
                         "change feed", bundle_id=ck.app1_bundle)
        for o in self.others:
            o.finish(ck, args.database_url, world, last)
        check_refunds(ck, args, world, script, self.consents, self.invocations, night_ms(last))
        answers = len(world.consumption_puts)
        sandbox_app(ck, args, self.workdir, world, script, envs, first_night=last + 1)
        https_app(ck, args, self.workdir, world, script, envs, night=last + 3)
        # Their databases hold no consent and read every request long after its deadline.
        ck.check(len(world.consumption_puts) == answers, "refund answers from the sandbox and HTTPS deployments", "-",
                 "none", [f"{p['transactionId']} {p['status']}" for p in world.consumption_puts[answers:]][:5])
        calls = {env_.environment: dict(env_.calls) for env_ in (envs.production, envs.sandbox)}
        print(f"server calls: {calls}", flush=True)
        for o in self.others:
            print(f"server calls of {o.bundle_id}: "
                  f"{ {env_.environment: dict(env_.app_calls[o.bundle_id]) for env_ in (envs.production, envs.sandbox)} }",
                  flush=True)
        print(f"{ck.passed} passed, {ck.failed} failed", flush=True)
        return 0 if ck.failed == 0 else 1


def run_nights(ck: Checker, args, workdir: str, world: World, script: Script, envs: srv.Environments,
               others: list = ()) -> int:
    """The check on --database-url: set up, the nights (--nights, then FEED_ONLY_NIGHTS planned
    by the change feed alone), then what follows them. 0 when everything matched, else 1."""
    nights = Nights(ck, args, workdir, world, script, envs, others)
    nights.set_up()
    for k in range(args.nights + FEED_ONLY_NIGHTS):
        nights.night(k)
    return nights.finish()
