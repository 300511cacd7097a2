#!/usr/bin/env python3
"""ops/bench serve: `churnwatch serve` measured from outside (called by ops/bench, which has
started the simulator, a database and dumped the payloads). Prints key=value lines.

Phases, each against a serve process started here on loopback:
  latency     the newest day's notifications (first half) posted as a steady stream at
              BENCH_SERVE_RATE/s, a nightly run polling beside: for each one stored, from the
              POST sent to its inbox row applied (processed_at, set in the transaction that
              commits its event): notification_to_event_p50_ms, _p99_ms.
  saturation  29 days of notifications, all news to a database polled on night 0, each posted
              once by wrk over 64 connections: serve_requests_per_s (stored rows over the time
              from the first to the last, the server's own clock), serve_applied_per_s (all of
              them over the time from the first stored to the last applied), then
              serve_cpu_ms_per_notification (serve's user+system CPU, the applier's work
              included, per notification) and serve_peak_rss_mb (VmHWM); serve is stopped
              with SIGTERM right after the burst, the applier's backlog in the inbox:
              serve_stop_seconds (goal: at most --shutdown-grace, 30 s), and after a restart
              serve_stop_all_applied_after_restart = 1 when every stored row is applied.
  once        the newest day's second half at the same rate, `notifications sync` every 5 s
              beside (the 10-minute sync, compressed), serve killed with SIGKILL twice and
              PostgreSQL stopped and started once during the stream: serve_ok_not_stored (answered
              200 and in neither the inbox nor the log: must be 0), then after a last sync (the
              net) serve_exactly_once = 1 when every notification of the day is recorded once.
  retention   the cancel page (ops/bench_retention.py): retention_answer_p50_ms, _p99_ms at the
              performance test's concurrency with a nightly run beside, retention_answer_p99_ms_db_down,
              retention_fallback_share.
  steady      after the burst, the newest day's notifications at BENCH_SERVE_RATE/s into the
              burst's database, its inbox holding at least 100,000 processed rows:
              serve_steady_cpu_ms_per_notification (serve and PostgreSQL, user+system; goal <= 1.5).
BENCH_SERVE_PHASES (default all five) picks phases.
"""
import json, os, random, signal, statistics, subprocess, sys, time, urllib.request

bin_dir, work, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
here = os.path.dirname(os.path.abspath(__file__))
rate = float(os.environ.get("BENCH_SERVE_RATE", "100"))
env = dict(os.environ)


def psql(url, sql):
    out = subprocess.run(["psql", "-qAtX", url, "-c", sql], capture_output=True, text=True, check=True).stdout
    return [line.split("|") for line in out.strip().splitlines() if line]


def start_serve(url, extra=()):
    e = dict(env, DATABASE_URL=url)
    log = open(f"{work}/serve.log", "a")
    p = subprocess.Popen([f"{bin_dir}/churnwatch", "serve", "--listen", f"127.0.0.1:{port}", "--log-format", "json", *extra],
                         env=e, stdout=subprocess.PIPE, stderr=log, text=True)
    line = p.stdout.readline()
    if "listening on" not in line:
        sys.exit(f"serve did not start: {line} {open(f'{work}/serve.log').read()[-2000:]}")
    return p


def load(file, *flags):
    out = subprocess.run([f"{bin_dir}/churnwatch-bench", "serve-load", f"http://127.0.0.1:{port}/apple/notifications", file, *flags],
                         capture_output=True, text=True, env=env)
    if out.returncode != 0:
        sys.exit(f"serve-load failed: {out.stderr}")
    return dict(line.split("=", 1) for line in out.stdout.split())


def drained(url, seconds=300):
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            if psql(url, "SELECT count(*) FROM churnwatch.notification_inbox WHERE processed_at IS NULL")[0][0] == "0":
                return True
        except subprocess.CalledProcessError:
            pass
        time.sleep(0.2)
    return False


def cpu_ms(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")


def rss_mb(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0


def percentile(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * p / 100))] if values else float("nan")


def split_day(path):
    lines = [l for l in open(path) if l.strip()]
    half = len(lines) // 2
    for name, part in (("day_a", lines[:half]), ("day_b", lines[half:])):
        open(f"{work}/{name}.jsonl", "w").writelines(part)
    return half, len(lines) - half


def latency(url, night):
    serve = start_serve(url)
    run = subprocess.Popen([f"{bin_dir}/churnwatch", "run", "--as-of", night, "--notifications", "off", "--log-format", "json"],
                           env=dict(env, DATABASE_URL=url), stdout=subprocess.DEVNULL, stderr=open(f"{work}/run_beside.log", "w"))
    result = load(f"{work}/day_a.jsonl", "--rate", str(rate), "--concurrency", "32", "--out", f"{work}/latency.txt")
    beside = run.wait()
    drained(url)
    applied = {u: float(ms) for u, ms in psql(url, """
        SELECT notification_uuid, extract(epoch FROM processed_at) * 1000 FROM churnwatch.notification_inbox
        WHERE notification_uuid IS NOT NULL AND processed_at IS NOT NULL""")}
    lat = []
    for line in open(f"{work}/latency.txt"):
        u, sent, status, _ = line.split()
        if status == "200" and u in applied:
            lat.append(applied[u] - float(sent))
    serve.send_signal(signal.SIGTERM)
    serve.wait()
    print(f"serve_stream_rate_per_s={rate:.0f}")
    print(f"serve_stream_notifications={result['load_requests']}")
    print(f"serve_stream_ok={result['load_ok']}")
    print(f"serve_stream_nightly_run_exit={beside}")
    print(f"serve_answer_p99_ms={result.get('load_answer_p99_ms', 'nan')}")
    print(f"notification_to_event_p50_ms={percentile(lat, 50):.0f}")
    print(f"notification_to_event_p99_ms={percentile(lat, 99):.0f}")
    print(f"notification_to_event_max_ms={max(lat) if lat else float('nan'):.0f}")


def pending(url):
    return int(psql(url, "SELECT count(*) FROM churnwatch.notification_inbox WHERE processed_at IS NULL")[0][0])


def saturation(url):
    serve = start_serve(url)
    before = cpu_ms(serve.pid)
    n = sum(1 for l in open(f"{work}/month.jsonl") if l.strip())
    # wrk posts each notification once (its Lua script splits the file between its threads);
    # wrk runs its whole -d (its threads stop when done, it does not): the rate is the server's
    # own, stored rows over the time from the first to the last.
    wrk = subprocess.Popen(["wrk", "-t2", "-c64", f"-d{int(n / 600) + 10}s", "-s", f"{here}/bench_serve_wrk.lua",
                            f"http://127.0.0.1:{port}", "--", f"{work}/month.jsonl", "2"], stdout=subprocess.PIPE, text=True)
    # SIGTERM right after the burst (the last notification stored; wrk idles out its -d), with
    # the applier's backlog in the inbox: the stop takes at most --shutdown-grace (30 s) whatever
    # the backlog; the next start applies what is left.
    # Twice a second: a psql process each time, a load on the cores the burst is measured on.
    while wrk.poll() is None and int(psql(url, "SELECT count(*) FROM churnwatch.notification_inbox")[0][0]) < n:
        time.sleep(0.5)
    used, backlog, peak = cpu_ms(serve.pid) - before, pending(url), rss_mb(serve.pid)
    signalled = time.monotonic()
    serve.send_signal(signal.SIGTERM)
    stop_exit = serve.wait()
    stop_s, left = time.monotonic() - signalled, pending(url)
    wrk.send_signal(signal.SIGINT)  # wrk stops at SIGINT, prints its figures and the script's count
    out = wrk.communicate()[0]
    refused = next((l for l in out.splitlines() if l.startswith("not_200=")), "not_200=nan (wrk printed no count)")
    serve = start_serve(url)
    before = cpu_ms(serve.pid)
    drained(url)
    used += cpu_ms(serve.pid) - before
    peak = max(peak, rss_mb(serve.pid))
    stored, per_s, applied_per_s, unapplied = psql(url, """
        SELECT count(*), round(count(*) / greatest(extract(epoch FROM max(received_at) - min(received_at)), 0.001)),
               round(count(*) / greatest(extract(epoch FROM max(processed_at) - min(received_at)), 0.001)),
               count(*) FILTER (WHERE processed_at IS NULL)
        FROM churnwatch.notification_inbox""")[0]
    print(f"serve_saturation_notifications={n}")
    print(f"serve_saturation_stored={stored}")
    print(f"serve_saturation_{refused.strip().replace(' ', ' serve_saturation_')}")
    print(f"serve_requests_per_s={per_s}")
    # The whole burst applied: from the first stored to the last applied (the applier gives
    # way to a busy door, and catches up after; the stop and restart below fall in between).
    print(f"serve_applied_per_s={applied_per_s}")
    print(f"serve_cpu_ms_per_notification={used / max(int(stored), 1):.3f}")
    print(f"serve_peak_rss_mb={peak:.0f}")
    print(f"serve_stop_backlog={backlog}")
    print(f"serve_stop_seconds={stop_s:.2f}")
    print(f"serve_stop_exit={stop_exit}")
    print(f"serve_stop_left_in_inbox={left}")
    print(f"serve_stop_all_applied_after_restart={1 if int(unapplied) == 0 else 0}")
    serve.send_signal(signal.SIGTERM)
    serve.wait()


def postgres_cpu_ms(by_kind=None):
    """PostgreSQL's CPU: its postmaster's own and its exited children's, and every live child's
    (with `by_kind`, a dict, also each kind's: backends, autovacuum, walwriter, ..., exited)."""
    stats = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            head, rest = open(f"/proc/{pid}/stat").read().rsplit(")", 1)
        except OSError:
            continue
        stats[int(pid)] = (head.split("(", 1)[1], rest.split())
    total = 0.0
    for pid, (comm, f) in stats.items():
        if comm != "postgres":
            continue
        parent = stats.get(int(f[1]), ("", []))[0]
        own, exited = int(f[11]) + int(f[12]), (int(f[13]) + int(f[14]) if parent != "postgres" else 0)
        total += (own + exited) * 1000 / os.sysconf("SC_CLK_TCK")
        if by_kind is not None:
            try:
                title = open(f"/proc/{pid}/cmdline").read().replace("\0", " ")
            except OSError:
                title = ""
            words = title.split()
            kind = "postmaster" if parent != "postgres" else ("backend" if len(words) > 3 and words[1] not in ("autovacuum", "logical") else " ".join(words[1:2]).rstrip(":") or "other")
            by_kind[kind] = by_kind.get(kind, 0) + own * 1000 / os.sysconf("SC_CLK_TCK")
            by_kind["exited children"] = by_kind.get("exited children", 0) + exited * 1000 / os.sysconf("SC_CLK_TCK")
    return total


def steady(url):
    """A steady stream after the burst: the newest day's notifications at BENCH_SERVE_RATE/s into an
    inbox holding at least BENCH_SERVE_STEADY_ROWS processed rows (filled when the burst left fewer,
    as 30 days of them would be), the CPU of serve and PostgreSQL per notification."""
    want = int(os.environ.get("BENCH_SERVE_STEADY_ROWS", "100000"))
    psql(url, f"""
        INSERT INTO churnwatch.notification_inbox (signed_payload, received_at, processed_at, outcome, bundle_id)
        SELECT 'filler.' || g || '.x', now() - interval '2 days', now() - interval '2 days', 'duplicate', churnwatch.default_bundle_id()
        FROM generate_series(1, greatest(0, {want} - (SELECT count(*) FROM churnwatch.notification_inbox))) AS g""")
    # The burst's cleanup done first (as autovacuum does in time): the steady cost, not the burst's.
    psql(url, "VACUUM ANALYZE")
    rows = psql(url, "SELECT count(*) FROM churnwatch.notification_inbox WHERE processed_at IS NOT NULL")[0][0]
    serve = start_serve(url)
    # Where the time goes, on request: PostgreSQL's statements (BENCH_SERVE_STATEMENTS=1, with
    # CHURNWATCH_PG_OPTS loading pg_stat_statements) and serve's stacks (BENCH_SERVE_PERF=FILE).
    statements = os.environ.get("BENCH_SERVE_STATEMENTS") == "1"
    if statements:
        psql(url, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements; SELECT pg_stat_statements_reset()")
    perf = os.environ.get("BENCH_SERVE_PERF")
    profiler = subprocess.Popen(["perf", "record", "-F", "499", "-g", "-o", perf, "-p", str(serve.pid)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) if perf else None
    kinds_before, kinds_after = {}, {}
    serve_before, pg_before = cpu_ms(serve.pid), postgres_cpu_ms(kinds_before)
    result = load(f"{work}/day.jsonl", "--rate", str(rate), "--concurrency", "8")
    # Until every row is applied (the psql polls of the wait are counted too: a few ms in all).
    drained(url)
    serve_used, pg_used = cpu_ms(serve.pid) - serve_before, postgres_cpu_ms(kinds_after) - pg_before
    if statements:
        print("serve_steady_postgres_cpu_ms_by_kind=" + ",".join(
            f"{k}:{kinds_after[k] - kinds_before.get(k, 0):.0f}" for k in sorted(kinds_after)))
    if profiler:
        profiler.send_signal(signal.SIGINT)
        profiler.wait()
    if statements:
        for calls, total, mean, *query in psql(url, """
                SELECT calls, round((total_exec_time + total_plan_time)::numeric, 1), round(total_plan_time::numeric, 1),
                       regexp_replace(left(query, 140), '\\s+', ' ', 'g')
                FROM pg_stat_statements ORDER BY total_exec_time + total_plan_time DESC LIMIT 15"""):
            print(f"serve_steady_statement calls={calls} total_ms={total} of_which_plan_ms={mean} {'|'.join(query)}")
    n = max(int(result["load_ok"]), 1)
    print(f"serve_steady_rate_per_s={rate:.0f}")
    print(f"serve_steady_inbox_processed_rows={rows}")
    print(f"serve_steady_notifications={result['load_ok']}")
    print(f"serve_steady_server_cpu_ms_per_notification={serve_used / n:.3f}")
    print(f"serve_steady_postgres_cpu_ms_per_notification={pg_used / n:.3f}")
    print(f"serve_steady_cpu_ms_per_notification={(serve_used + pg_used) / n:.3f}")
    serve.send_signal(signal.SIGTERM)
    serve.wait()


def once(url, night, pg):
    rng = random.Random(int(os.environ.get("BENCH_SERVE_SEED", "7")))
    holder = {"serve": start_serve(url)}
    stop = {"done": False}
    e = dict(env, DATABASE_URL=url)
    import threading

    def syncs():
        while not stop["done"]:
            subprocess.run([f"{bin_dir}/churnwatch", "notifications", "sync", "--as-of", night, "--log-format", "json"],
                           env=e, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(5)

    def faults(seconds):
        moments = sorted(rng.uniform(0.1, 0.9) * seconds for _ in range(3))
        started = time.time()
        for n, at in enumerate(moments):
            time.sleep(max(0, started + at - time.time()))
            if n < 2:
                holder["serve"].send_signal(signal.SIGKILL)
                holder["serve"].wait()
                holder["serve"] = start_serve(url)
            else:
                subprocess.run([pg, "stop"], capture_output=True)
                time.sleep(1)
                subprocess.run([pg, "start"], capture_output=True)

    n = sum(1 for l in open(f"{work}/day_b.jsonl") if l.strip())
    threads = [threading.Thread(target=syncs), threading.Thread(target=faults, args=(n / rate,))]
    for t in threads:
        t.start()
    load(f"{work}/day_b.jsonl", "--rate", str(rate), "--concurrency", "32", "--out", f"{work}/once.txt")
    threads[1].join()
    stop["done"] = True
    threads[0].join()
    drained(url)
    answered = [line.split()[0] for line in open(f"{work}/once.txt") if line.split()[2] == "200"]
    known = {r[0] for r in psql(url, "SELECT notification_uuid FROM churnwatch.notifications WHERE notification_uuid IS NOT NULL")}
    known |= {r[0] for r in psql(url, "SELECT notification_uuid FROM churnwatch.notification_inbox WHERE notification_uuid IS NOT NULL")}
    print(f"serve_once_answered_200={len(answered)} of {n}")
    print(f"serve_ok_not_stored={sum(1 for u in answered if u not in known)}")
    subprocess.run([f"{bin_dir}/churnwatch", "notifications", "sync", "--as-of", night, "--log-format", "json"],
                   env=e, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    day = [json.loads(__import__("base64").urlsafe_b64decode(l.split(".")[1] + "==="))["notificationUUID"]
           for name in ("day_a", "day_b") for l in open(f"{work}/{name}.jsonl") if l.strip()]
    rows = psql(url, "SELECT notification_uuid, count(*) FROM churnwatch.notifications GROUP BY 1")
    counts = {u: int(c) for u, c in rows}
    once_each = all(counts.get(u) == 1 for u in day)
    print(f"serve_exactly_once={1 if once_each else 0}")
    holder["serve"].send_signal(signal.SIGTERM)
    holder["serve"].wait()


if __name__ == "__main__":
    main_url, sat_url, night, pg = sys.argv[4], sys.argv[5], sys.argv[6], sys.argv[7]
    a, b = split_day(f"{work}/day.jsonl")
    phases = os.environ.get("BENCH_SERVE_PHASES", "latency,saturation,steady,once,retention").split(",")
    if "latency" in phases:
        latency(main_url, night)
    if "saturation" in phases:
        saturation(sat_url)
    if "steady" in phases:
        steady(sat_url)
    if "once" in phases:
        once(main_url, night, pg)
    if "retention" in phases:
        sys.path.insert(0, here)
        import bench_retention
        bench_retention.run(bin_dir, work, port, env, main_url, night, pg, start_serve)
