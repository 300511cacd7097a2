#!/usr/bin/env python3
"""ops/bench storage: how big the database gets over a year of nights, with and without prune.

`experiment BIN SIM_URL NIGHT0 NIGHTS URL_PRUNE URL_KEEP SUBS`: two migrated, imported databases
beside one simulator; every night at 02:00 the clock is set and `churnwatch run --as-of` runs
against each (the change feed on): the first with the end-of-run prune, the second with
CHURNWATCH_PRUNE=off. At nights 30, 90, 180 and 365 (and the last) it prints the bytes per
subscriber of each table (pg_total_relation_size: heap, TOAST and indexes) in both, and at the
end the prune's figures and the run's time at the last nights against nights 26-30. At night 30
and the last night it also times the same work in both databases (a backfill of the same 1,000
subscriptions, the median of 3): what a night polls changes over a year, that work does not.
"""
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
import datetime as dt

KEPT_FOREVER = {"subscriptions", "subscription_segments", "churn_events", "segment_daily", "winback_queue", "runs",
                "offers", "notification_feed", "api_budget", "schema_migrations", "refund_requests", "refund_consent"}
CHECKPOINTS = [30, 90, 180, 365]


def iso(t):
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def sizes(url):
    r = subprocess.run(["psql", url, "-XqAt", "-F", "\t", "-c",
                        "SELECT c.relname, pg_total_relation_size(c.oid) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                        "WHERE n.nspname = 'churnwatch' AND c.relkind = 'r'"], capture_output=True, text=True, check=True)
    return {name: int(size) for name, size in (line.split("\t") for line in r.stdout.splitlines() if line)}


def run(bin_dir, url, t, prune):
    env = dict(os.environ, DATABASE_URL=url, CHURNWATCH_PRUNE="on" if prune else "off")
    start = time.monotonic()
    r = subprocess.run([os.path.join(bin_dir, "churnwatch"), "run", "--as-of", iso(t), "--status-rate", "1000000",
                        "--history-rate", "1000000", "--concurrency", "32", "--log-level", "warning"],
                       env=env, capture_output=True, text=True)
    took = time.monotonic() - start
    if r.returncode != 0:
        sys.exit(f"bench_storage: the run at {iso(t)} exited {r.returncode}: {r.stderr.strip()[-400:]}")
    m = re.search(r"prune: removed (.*); (\d+) statements, the longest ([0-9.]+) s", r.stdout)
    due = re.search(r"run \d+ done: (\d+) due", r.stdout)
    return took, m, int(due.group(1)) if due else 0


def probe(bin_dir, url, t, ids_file):
    """The same work at any night: a backfill of the same subscriptions (PROBE_SIZE, the first ids
    of the import), timed. What a night's run polls changes over a year (the stale safety net's
    waves, an older population); this does not, so its time is what the tables' size costs."""
    env = dict(os.environ, DATABASE_URL=url)
    start = time.monotonic()
    r = subprocess.run([os.path.join(bin_dir, "churnwatch"), "backfill", "--ids", ids_file, "--as-of", iso(t), "--status-rate",
                        "1000000", "--history-rate", "1000000", "--concurrency", "32", "--log-level", "warning"],
                       env=env, capture_output=True, text=True)
    took = time.monotonic() - start
    if r.returncode != 0:
        sys.exit(f"bench_storage: the probe backfill at {iso(t)} exited {r.returncode}: {r.stderr.strip()[-400:]}")
    return took


PROBE_SIZE = 1000
PROBE_REPEATS = 3


def show(label, night, subs, table_sizes):
    total = sum(table_sizes.values())
    forever = sum(v for k, v in table_sizes.items() if k in KEPT_FOREVER)
    print(f"storage_bytes_per_sub_{night}{label}={total // subs}")
    print(f"storage_kept_forever_bytes_per_sub_{night}{label}={forever // subs}")
    print(f"storage_trimmed_bytes_per_sub_{night}{label}={(total - forever) // subs}")
    for k in sorted(table_sizes):
        print(f"storage_table_{k}_bytes_per_sub_{night}{label}={table_sizes[k] // subs}")
    sys.stdout.flush()


def unused_indexes(bin_dir, url, t):
    """The indexes no statement used over the nights and the readers' commands: candidates to drop."""
    env = dict(os.environ, DATABASE_URL=url)
    page = tempfile.NamedTemporaryFile(suffix=".html", delete=False).name
    for args in (["report", "--out", page, "--as-of", iso(t)], ["status", "--json"], ["outcomes", "--as-of", iso(t)],
                 ["segments"], ["winback", "list", "--limit", "10"], ["prune", "--dry-run", "--as-of", iso(t)]):
        subprocess.run([os.path.join(bin_dir, "churnwatch"), *args, "--log-level", "warning"], env=env, capture_output=True, check=True)
    os.unlink(page)
    r = subprocess.run(["psql", url, "-XqAt", "-c",
                        "SELECT string_agg(indexrelname || ':' || pg_relation_size(indexrelid), ',' ORDER BY indexrelname) "
                        "FROM pg_stat_user_indexes WHERE schemaname = 'churnwatch' AND idx_scan = 0"],
                       capture_output=True, text=True, check=True)
    print(f"unused_indexes={r.stdout.strip()}")


def experiment(bin_dir, sim, night0, nights, url_prune, url_keep, subs):
    times, lock_max, pruned, prune_statements = {}, 0.0, {}, 0
    kept_times, dues, probes = {}, {}, {}
    ids = subprocess.run(["psql", url_prune, "-XqAt", "-c", f"SELECT original_transaction_id FROM churnwatch.subscriptions "
                          f"ORDER BY original_transaction_id LIMIT {PROBE_SIZE}"], capture_output=True, text=True, check=True).stdout
    ids_file = tempfile.NamedTemporaryFile("w", suffix=".ids", delete=False)
    ids_file.write(ids)
    ids_file.close()
    for n in range(nights):
        t = night0 + dt.timedelta(days=n)
        req = urllib.request.Request(f"{sim}/_sim/clock?set={iso(t)}", method="POST")
        urllib.request.urlopen(req, timeout=60).read()
        took, m, due = run(bin_dir, url_prune, t, prune=True)
        times[n + 1], dues[n + 1] = took, due
        if m:
            lock_max = max(lock_max, float(m.group(3)))
            prune_statements += int(m.group(2))
            for table, rows in re.findall(r"([a-z_]+) (\d+)", m.group(1)):
                pruned[table] = pruned.get(table, 0) + int(rows)
        kept_times[n + 1] = run(bin_dir, url_keep, t, prune=False)[0]
        night = n + 1
        if night == 30 or night == nights:
            # Later the same night, both databases: the median of a few backfills of the same ids.
            late = t + dt.timedelta(hours=1)
            probes[night] = {label: statistics.median(probe(bin_dir, url, late + dt.timedelta(minutes=k), ids_file.name)
                                                      for k in range(PROBE_REPEATS))
                             for label, url in (("", url_prune), ("_no_prune", url_keep))}
        if night in CHECKPOINTS or night == nights:
            show("", night, subs, sizes(url_prune))
            show("_no_prune", night, subs, sizes(url_keep))
    os.unlink(ids_file.name)
    unused_indexes(bin_dir, url_prune, night0 + dt.timedelta(days=nights - 1))
    late_nights, early_nights = range(max(1, nights - 4), nights + 1), [n for n in range(26, 31) if n in times]
    late, early = [times[n] for n in late_nights], [times[n] for n in early_nights]
    print(f"prune_max_lock_ms={lock_max * 1000:.0f}")
    print(f"prune_rows={sum(pruned.values())}")
    for table in sorted(pruned):
        print(f"prune_rows_{table}={pruned[table]}")
    print(f"prune_statements={prune_statements}")
    if early:
        print(f"run_time_30_s={statistics.median(early):.2f}")
        print(f"run_time_{nights}_s={statistics.median(late):.2f}")
        print(f"run_time_{nights}_over_30={statistics.median(late) / statistics.median(early):.3f}")
        # The same nights' work, into the database never pruned: what the tables' size costs.
        print(f"run_time_{nights}_no_prune_s={statistics.median(kept_times[n] for n in late_nights):.2f}")
        # Per subscription due: the nights do not all poll as many.
        per_due = lambda ns: statistics.median(times[n] / max(1, dues[n]) for n in ns) * 1000
        print(f"due_30={statistics.median(dues[n] for n in early_nights)}")
        print(f"due_{nights}={statistics.median(dues[n] for n in late_nights)}")
        print(f"run_ms_per_due_30={per_due(early_nights):.2f}")
        print(f"run_ms_per_due_{nights}={per_due(late_nights):.2f}")
        print(f"run_ms_per_due_{nights}_over_30={per_due(late_nights) / per_due(early_nights):.3f}")
    # What the nights polled, by reason (the never-pruned database keeps every run's items).
    for label, ns in (("30", early_nights), (str(nights), list(late_nights))):
        if not ns:
            continue
        days = ",".join(f"'{iso(night0 + dt.timedelta(days=n - 1))}'" for n in ns)
        r = subprocess.run(["psql", url_keep, "-XqAt", "-c",
                            "SELECT string_agg(reason || ':' || round(n::numeric / " + str(len(ns)) + ", 1), ',' ORDER BY reason) FROM "
                            "(SELECT i.reason, count(*) AS n FROM churnwatch.run_items i JOIN churnwatch.runs r ON r.id = i.run_id "
                            f"WHERE r.kind = 'nightly' AND r.as_of IN ({days}) GROUP BY 1) AS x"],
                           capture_output=True, text=True, check=True)
        print(f"due_by_reason_{label}={r.stdout.strip()}")
    if 30 in probes and nights in probes and nights != 30:
        # The same work at night 30 and at the last night: what the tables' size costs a run.
        for label in ("", "_no_prune"):
            print(f"probe_{PROBE_SIZE}_s_30{label}={probes[30][label]:.3f}")
            print(f"probe_{PROBE_SIZE}_s_{nights}{label}={probes[nights][label]:.3f}")
            print(f"probe_time_{nights}_over_30{label}={probes[nights][label] / probes[30][label]:.3f}")


if __name__ == "__main__":
    if len(sys.argv) == 9 and sys.argv[1] == "experiment":
        _, _, bin_dir, sim, night0, nights, url_prune, url_keep, subs = sys.argv
        experiment(bin_dir, sim, dt.datetime.strptime(night0, "%Y-%m-%dT%H:%M:%SZ"), int(nights), url_prune, url_keep, int(subs))
    else:
        sys.exit("usage: bench_storage.py experiment BIN SIM_URL NIGHT0 NIGHTS URL_PRUNE URL_KEEP SUBSCRIBERS")
