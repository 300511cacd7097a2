"""The deployments after the nights, each on a database of its own next to --database-url's:
a sandbox-only one (`<db>_sbx`) and the production server over HTTPS with a private CA
(`<db>_tls`); and the steps they share (a side database, an import, the segments)."""
from __future__ import annotations

import csv
import os
import urllib.parse

import server as srv
from checker import Checker, bundle_filter, check_feed_table
from expected import expected_segment
from pki import TLSIdentity
from scenario import DAY, SERVER_LEAD, Script, iso, night_ms
from world import World


def sandbox_app(ck: Checker, args, workdir: str, world: World, script: Script, envs: srv.Environments,
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


def rows_in(script: Script, world: World, environment: str) -> list[dict]:
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


def https_app(ck: Checker, args, workdir: str, world: World, script: Script, envs: srv.Environments, night: int):
    """The production server again, over HTTPS with a certificate from a private CA (a server
    behind a company CA or a TLS-inspecting proxy). Without APPSTORE_TLS_ROOT_CERTS churnwatch
    must refuse the server before sending it anything (no request, so no JWT, reaches it), stop
    in one line naming the setting (exit 69) and write no subscription state; with it, the
    same command resumes the run and gets every segment right. One night on a third database."""
    side = side_database(ck, args, "_tls", "https-app")
    if side is None:
        return
    db, url = side
    tls = TLSIdentity(os.path.join(workdir, "tls"))
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
