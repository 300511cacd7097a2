#!/usr/bin/env python3
"""ops/bench webhooks: churnwatch's webhook sender measured from outside (called by ops/bench, which
has started the simulator and PostgreSQL, made the two databases and dumped the next day's
notifications). Every receiver is ops/webhook_receiver.py --reference on loopback. Prints key=value.

throughput  a database (subscriptions imported, nothing polled) with one endpoint, then
            BENCH_WEBHOOK_MESSAGES churn_events rows inserted by SQL in one transaction (the trigger
            writes a churn_event.created message for each at commit) over half as many subscriptions
            drawn at random (seeded: lines of one message, and lines of several that wait on their
            head), then `churnwatch webhooks send` until it exits. webhook_deliveries_per_s =
            deliveries it marked delivered / its wall time (numbering included);
            webhook_cpu_ms_per_delivery = its user+system CPU (wait4) per delivery;
            webhook_pg_cpu_ms_per_delivery = this cluster's PostgreSQL CPU over the same span;
            webhook_receiver_cpu_ms_per_delivery the receiver's. At the default --max-in-flight (8),
            then with 32 on a second batch (keys suffixed _32).
latency     `churnwatch serve` (its sender on, the default schedule) on the database whose first
            night synced the feed, an endpoint taking every type: the next day's notifications posted
            at BENCH_WEBHOOK_RATE/s by serve-load, a nightly run beside. webhook_e2e_p50_ms/_p99_ms:
            for each churn_event.created accepted (first receipt) whose event serve's applier wrote,
            its arrival minus the POST of its notification (pairing: pair()); webhook_send_p50_ms/
            _p99_ms: every message's arrival minus its created_at (the writing transaction's start).
faults      the same endpoint and database, serve restarted with the standard schedule divided by 360
            (6 hours become 60 s), the following days' notifications at the same rate for
            FAULT_STREAM_S; the receiver answers 500 from 10 s, is stopped at 40 s and started again at
            70 s (down 60 s = 6 simulated hours); serve SIGKILLed and restarted at 25 s (endpoint down)
            and 73 s (backlog flushing); PostgreSQL stopped and started at 85 s. Then everything
            drains; over every delivery row of the endpoint (this phase's and latency's):
            webhook_lost = rows whose webhook-id no receiver run accepted, dead ones included (none is
            expected to die: the compressed schedule's 8 attempts span 276 s, the outage 60 s);
            webhook_dead; the receiver's order_violations, duplicates, duplicate_ids_with_other_body.
BENCH_WEBHOOK_PHASES (default throughput,latency,faults) picks phases.
signature   webhook_signature_valid = reference_valid / accepted over every delivery accepted in the
            three phases (standardwebhooks' Webhook.verify).
"""
import datetime, json, os, signal, socket, subprocess, sys, threading, time, urllib.request

bin_dir, work, pg_script, tput_url, main_url, sim_url, night, serve_port = sys.argv[1:9]
here = os.path.dirname(os.path.abspath(__file__))
pg_dir = os.environ["CHURNWATCH_PG_DIR"]
receiver_python = os.environ.get("CHURNWATCH_WEBHOOK_PYTHON", "python3")
rate = float(os.environ.get("BENCH_WEBHOOK_RATE", "100"))
messages = int(os.environ.get("BENCH_WEBHOOK_MESSAGES", "20000"))
seed = int(os.environ.get("BENCH_WEBHOOK_SEED", "9"))
# The standard schedule (0,5s,5m,30m,2h,5h,10h,10h) divided by 360: 0.0139s,0.833s,5s,20s,50s,100s,100s.
COMPRESS = 360
SCHEDULE = ",".join(f"{s / COMPRESS:.4g}s" for s in (0, 5, 300, 1800, 7200, 18000, 36000, 36000))
FAULT_STREAM_S = 110
TICK = os.sysconf("SC_CLK_TCK")


def emit(suffix="", **figures):
    for key, value in figures.items():
        print(f"webhook_{key}{suffix}={value}", flush=True)


def psql(url, sql):
    out = subprocess.run(["psql", "-qAtX", url, "-c", sql], capture_output=True, text=True, check=True).stdout
    return [line.split("|") for line in out.strip().splitlines() if line]


def cw(url, *args):
    out = subprocess.run([f"{bin_dir}/churnwatch", *args], env=dict(os.environ, DATABASE_URL=url), capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"churnwatch {' '.join(args)}: exit {out.returncode}: {out.stderr[-2000:]}")
    return out.stdout


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def percentile(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * p / 100))] if values else float("nan")


def cpu_ms(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000 / TICK


def pg_cpu_ms():
    """This cluster's PostgreSQL CPU (user+system): its postmaster's own and that of the children it
    reaped (exited backends), and every live child's. Other clusters on the machine are left out."""
    master, total = int(open(f"{pg_dir}/data/postmaster.pid").readline()), 0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(pid) == master:
            total += sum(int(x) for x in f[11:15])
        elif int(f[1]) == master:
            total += int(f[11]) + int(f[12])
    return total * 1000 / TICK


def add_endpoint(url, name, port, *extra):
    """`webhooks add` on loopback; returns the secret it prints once."""
    out = cw(url, "webhooks", "add", name, "--url", f"http://127.0.0.1:{port}/{name}", "--allow-http", "--allow-private", *extra)
    return next(line.split(" ", 1)[1] for line in out.splitlines() if line.startswith("secret: "))


class Receiver:
    """ops/webhook_receiver.py --reference on a fixed port; each start records to a new file."""

    def __init__(self, name, port, secret):
        self.name, self.port, self.secret, self.records, self.proc = name, port, secret, [], None

    def start(self):
        rec = f"{work}/{self.name}_{len(self.records) + 1}.jsonl"
        ready = f"{rec}.ready"
        self.proc = subprocess.Popen([receiver_python, f"{here}/webhook_receiver.py", "--port", str(self.port), "--secret", self.secret,
                                      "--record", rec, "--ready-file", ready, "--reference"],
                                     stdout=subprocess.DEVNULL, stderr=open(f"{work}/{self.name}.err", "a"))
        for _ in range(300):
            if os.path.exists(ready) or self.proc.poll() is not None:
                break
            time.sleep(0.1)
        if not os.path.exists(ready):
            sys.exit(f"webhook_receiver did not start: {open(f'{work}/{self.name}.err').read()[-2000:]}")
        self.records.append(rec)

    def call(self, path, body=None):
        data = None if body is None else json.dumps(body).encode()
        with urllib.request.urlopen(urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", data=data), timeout=30) as r:
            return json.load(r)

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait()


class Serve:
    """`churnwatch serve` on serve_port, its sender on; kill() is SIGKILL and a restart."""

    def __init__(self, url, *extra):
        self.url, self.extra = url, extra
        self.start()

    def start(self):
        self.proc = subprocess.Popen([f"{bin_dir}/churnwatch", "serve", "--listen", f"127.0.0.1:{serve_port}", "--log-format", "json",
                                      *self.extra], env=dict(os.environ, DATABASE_URL=self.url), stdout=subprocess.PIPE,
                                     stderr=open(f"{work}/wh_serve.log", "a"), text=True)
        line = self.proc.stdout.readline()
        if "listening on" not in line:
            sys.exit(f"serve did not start: {line} {open(f'{work}/wh_serve.log').read()[-2000:]}")

    def kill(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        self.start()

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait()


def load(file, out):
    result = subprocess.run([f"{bin_dir}/churnwatch-bench", "serve-load", f"http://127.0.0.1:{serve_port}/apple/notifications", file,
                             "--rate", str(rate), "--concurrency", "32", "--out", out], capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"serve-load failed: {result.stderr}")
    return dict(line.split("=", 1) for line in result.stdout.split())


def drained(url, seconds=900):
    """Until the inbox is applied, every message numbered and no delivery pending (polled every
    second; PostgreSQL may be restarting)."""
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            if psql(url, """SELECT (SELECT count(*) FROM churnwatch.notification_inbox WHERE processed_at IS NULL)
                                 + (SELECT count(*) FROM churnwatch.webhook_messages WHERE seq IS NULL)
                                 + (SELECT count(*) FROM churnwatch.webhook_deliveries WHERE state = 'pending')""")[0][0] == "0":
                return True
        except subprocess.CalledProcessError:
            pass
        time.sleep(1)
    return False


def accepted(files):
    """webhook-id -> its first 2xx record, over the receiver's record files (all its runs)."""
    first = {}
    for rec in sorted((json.loads(line) for name in files for line in open(name) if line.strip()), key=lambda r: r["at"]):
        if isinstance(rec.get("status"), int) and 200 <= rec["status"] < 300 and rec.get("id") not in first:
            first[rec["id"]] = rec
    return first


def populate(url, batch):
    """`messages` churn_events rows in one transaction over messages/2 imported subscriptions drawn
    at random (setseed: the same draw every run); distinct occurred_at keep them all."""
    psql(url, f"""
        SELECT setseed({(seed % 997) / 997.0});
        WITH subs AS MATERIALIZED (
            SELECT original_transaction_id AS otid, row_number() OVER (ORDER BY original_transaction_id) AS k
            FROM churnwatch.subscriptions LIMIT greatest(1, {messages} / 2)
        ), draws AS MATERIALIZED (
            SELECT g, 1 + floor(random() * (SELECT count(*) FROM subs))::int AS k FROM generate_series(1, {messages}) AS g
        )
        INSERT INTO churnwatch.churn_events (original_transaction_id, event, occurred_at, detected_at, details)
        SELECT s.otid, 'renewed', timestamptz '2026-01-01' + make_interval(secs => {batch} * 10000000 + d.g), now(),
               jsonb_build_object('bench_batch', {batch})
        FROM draws d JOIN subs s USING (k)""")
    psql(url, "VACUUM ANALYZE")


def send_timed(url, suffix, recv):
    """One `webhooks send` until it exits, timed; prints the phase's keys."""
    before = int(psql(url, "SELECT count(*) FROM churnwatch.webhook_deliveries WHERE state = 'delivered'")[0][0])
    lines = psql(url, "SELECT count(DISTINCT original_transaction_id), max(n) FROM (SELECT original_transaction_id, count(*) AS n "
                      "FROM churnwatch.webhook_messages WHERE seq IS NULL GROUP BY 1) AS l")[0]
    got_before = recv.call("/_stats")["accepted"]
    recv_before, pg_before, start = cpu_ms(recv.proc.pid), pg_cpu_ms(), time.monotonic()
    p = subprocess.Popen([f"{bin_dir}/churnwatch", "webhooks", "send", "--log-format", "json"], env=dict(os.environ, DATABASE_URL=url),
                         stdout=subprocess.PIPE, stderr=open(f"{work}/wh_send{suffix}.log", "w"), text=True)
    said = p.stdout.read()
    _, status, usage = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    wall, pg, rcv = time.monotonic() - start, pg_cpu_ms() - pg_before, cpu_ms(recv.proc.pid) - recv_before
    n = int(psql(url, "SELECT count(*) FROM churnwatch.webhook_deliveries WHERE state = 'delivered'")[0][0]) - before
    d = max(n, 1)
    emit(suffix, send_exit=p.returncode, send_said=said.strip().replace(" ", "_"), lines=lines[0], longest_line=lines[1],
         delivered=n, send_seconds=f"{wall:.2f}", deliveries_per_s=f"{n / wall:.0f}",
         cpu_ms_per_delivery=f"{(usage.ru_utime + usage.ru_stime) * 1000 / d:.3f}", pg_cpu_ms_per_delivery=f"{pg / d:.3f}",
         receiver_cpu_ms_per_delivery=f"{rcv / d:.3f}", receiver_accepted=recv.call("/_stats")["accepted"] - got_before)


def throughput():
    port = free_port()
    recv = Receiver("wh_tput", port, add_endpoint(tput_url, "tput", port))
    recv.start()
    emit(messages=messages)
    populate(tput_url, 1)
    send_timed(tput_url, "", recv)
    cw(tput_url, "webhooks", "set", "tput", "--max-in-flight", "32")
    populate(tput_url, 2)
    send_timed(tput_url, "_32", recv)
    recv.stop()
    return recv.records


def pair(url, got, sent):
    """E2E latencies of the churn_event.created messages in `got` (webhook-id -> first record).

    An event serve's applier writes commits in the same transaction as the inbox rows of the
    notifications it applied (processed_at = now()), and its message's created_at is that
    transaction's now() too: the notification behind a message is the inbox row processed at
    exactly its created_at whose notification (churnwatch.notifications, by uuid) is of the
    same subscription. Events the nightly run wrote (churn_events.run_id set) are not paired
    (counted apart). Several such notifications in one transaction: the earliest POST is used
    (the longer latency; counted in _multi). None found: counted in _unpaired."""
    instance = psql(url, "SELECT instance FROM churnwatch.webhook_instance")[0][0]
    msgs = {f"msg_{instance}_{seq}": (otid, created, run == "t") for seq, otid, created, run in psql(url, """
        SELECT m.seq, m.original_transaction_id, (m.created_at AT TIME ZONE 'UTC')::text, e.run_id IS NOT NULL
        FROM churnwatch.webhook_messages m
        LEFT JOIN churnwatch.churn_events e ON e.id = (m.body::json #>> '{data,event_id}')::bigint
        WHERE m.seq IS NOT NULL AND m.type = 'churn_event.created'""")}
    by_tx = {}
    for at, uuid, otid in psql(url, """
            SELECT (i.processed_at AT TIME ZONE 'UTC')::text, i.notification_uuid, n.original_transaction_id
            FROM churnwatch.notification_inbox i JOIN churnwatch.notifications n USING (notification_uuid)
            WHERE i.processed_at IS NOT NULL"""):
        by_tx.setdefault((at, otid), []).append(uuid)
    lat, counts = [], {"paired": 0, "multi": 0, "unpaired": 0, "from_run": 0}
    for msg_id, rec in got.items():
        if rec.get("type") != "churn_event.created" or msg_id not in msgs:
            continue
        otid, created, from_run = msgs[msg_id]
        times = [sent[u] for u in by_tx.get((created, otid), []) if u in sent]
        key = "from_run" if from_run else "unpaired" if not times else "multi" if len(times) > 1 else "paired"
        counts[key] += 1
        if times:
            lat.append(rec["at"] * 1000 - min(times))
    counts["paired"] += counts["multi"]
    return lat, counts


def latency(recv):
    serve = Serve(main_url)
    run = subprocess.Popen([f"{bin_dir}/churnwatch", "run", "--as-of", night, "--notifications", "off", "--log-format", "json"],
                           env=dict(os.environ, DATABASE_URL=main_url), stdout=subprocess.DEVNULL, stderr=open(f"{work}/wh_run.log", "w"))
    result = load(f"{work}/wh_day.jsonl", f"{work}/wh_latency.txt")
    beside = run.wait()
    ok = drained(main_url)
    serve.stop()
    sent = {u: float(ms) for u, ms, status, _ in (line.split() for line in open(f"{work}/wh_latency.txt")) if status == "200"}
    got = accepted(recv.records)
    lat, counts = pair(main_url, got, sent)
    instance = psql(main_url, "SELECT instance FROM churnwatch.webhook_instance")[0][0]
    created = {f"msg_{instance}_{seq}": float(ms) for seq, ms in psql(main_url, """
        SELECT seq, extract(epoch FROM created_at) * 1000 FROM churnwatch.webhook_messages WHERE seq IS NOT NULL""")}
    send = [rec["at"] * 1000 - created[i] for i, rec in got.items() if i in created]
    emit(stream_rate_per_s=f"{rate:.0f}", stream_notifications=result["load_requests"], stream_ok=result["load_ok"],
         stream_nightly_run_exit=beside, latency_drained=int(ok), latency_messages=len(send), **{f"e2e_{k}": n for k, n in counts.items()})
    emit(e2e_p50_ms=f"{percentile(lat, 50):.0f}", e2e_p99_ms=f"{percentile(lat, 99):.0f}", e2e_max_ms=f"{max(lat, default=float('nan')):.0f}",
         send_p50_ms=f"{percentile(send, 50):.0f}", send_p99_ms=f"{percentile(send, 99):.0f}", send_max_ms=f"{max(send, default=float('nan')):.0f}")


def dump_after(need):
    """Notifications signed from `night` on, a day at a time (the simulator's clock moved to each
    day's end first), until `need` of them: the fault phase's stream."""
    lines, day, base = [], 0, datetime.datetime.fromisoformat(night.replace("Z", "+00:00"))
    while len(lines) < need and day < 60:
        start, end = ((base + datetime.timedelta(days=d)).strftime("%Y-%m-%dT%H:%M:%SZ") for d in (day, day + 1))
        urllib.request.urlopen(urllib.request.Request(f"{sim_url}/_sim/clock?set={end}", method="POST"), timeout=60).read()
        out = subprocess.run([f"{bin_dir}/churnwatch-bench", "history-dump", start, end], capture_output=True, text=True, check=True)
        lines += [line for line in out.stdout.splitlines() if line.strip()]
        day += 1
    with open(f"{work}/wh_faults.jsonl", "w") as f:
        f.write("\n".join(lines[:need]) + "\n")
    return min(len(lines), need), day


def fault_script(serve, recv, log):
    """The faults, at seconds from the stream's start."""
    def pg_restart():
        subprocess.run([pg_script, "stop"], capture_output=True)
        time.sleep(1)
        subprocess.run([pg_script, "start"], capture_output=True)
    steps = [(10, "receiver_500", lambda: recv.call("/_control", {"mode": "500"})), (25, "serve_sigkill", serve.kill),
             (40, "receiver_stopped", recv.stop), (70, "receiver_back", recv.start), (73, "serve_sigkill", serve.kill),
             (85, "postgres_restart", pg_restart)]
    start = time.time()
    for at, name, act in steps:
        time.sleep(max(0, start + at - time.time()))
        act()
        log.append(f"{name}@{time.time() - start:.1f}s")


def faults(recv):
    _, days = dump_after(int(rate * FAULT_STREAM_S))
    first = int(psql(main_url, "SELECT coalesce(max(id), 0) FROM churnwatch.webhook_messages")[0][0])
    serve, log = Serve(main_url, "--webhook-retry-schedule", SCHEDULE), []
    script = threading.Thread(target=fault_script, args=(serve, recv, log))
    script.start()
    started = time.time()
    result = load(f"{work}/wh_faults.jsonl", f"{work}/wh_faults.txt")
    script.join()
    if len(log) < 6:    # a step raised (its thread ended): the figures would not be this phase's
        sys.exit(f"bench webhooks: the fault script stopped after {log}")
    ok = drained(main_url)
    drain_s = time.time() - started
    serve.stop()
    recv.stop()
    instance = psql(main_url, "SELECT instance FROM churnwatch.webhook_instance")[0][0]
    rows = psql(main_url, "SELECT seq, state, attempts FROM churnwatch.webhook_deliveries WHERE endpoint = 'bench'")
    got = accepted(recv.records)
    lost = [(seq, state) for seq, state, _ in rows if f"msg_{instance}_{seq}" not in got]
    summary = json.loads(subprocess.run([sys.executable, f"{here}/webhook_receiver.py", "--summary", *recv.records],
                                        capture_output=True, text=True, check=True).stdout)
    written = psql(main_url, f"SELECT count(*) FROM churnwatch.webhook_messages WHERE id > {first}")[0][0]
    emit(fault_schedule=SCHEDULE, fault_compression=COMPRESS, fault_events=",".join(log), fault_stream_notifications=result["load_requests"],
         fault_stream_days=days, fault_stream_ok=result["load_ok"], fault_messages=written, fault_drained=int(ok),
         fault_seconds_to_drained=f"{drain_s:.0f}", fault_attempts_not_accepted=summary["deliveries"] - summary["accepted"],
         fault_deliveries_retried=sum(1 for *_, a in rows if int(a) > 1), fault_most_attempts=max((int(a) for *_, a in rows), default=0))
    emit(endpoint_deliveries=len(rows), lost=len(lost), lost_dead=sum(1 for _, s in lost if s == "dead"),
         lost_pending=sum(1 for _, s in lost if s == "pending"), dead=sum(1 for _, s, _ in rows if s == "dead"),
         **{k: summary[k] for k in ("order_violations", "duplicates", "duplicate_ids_with_other_body")})
    if lost:
        print(f"bench webhooks: lost (first 10): {lost[:10]}", file=sys.stderr)


def signature(files):
    summary = json.loads(subprocess.run([sys.executable, f"{here}/webhook_receiver.py", "--summary", *files],
                                        capture_output=True, text=True, check=True).stdout)
    emit(signature_checked=summary["accepted"], signature_receiver_invalid=summary["invalid"],
         signature_reference_invalid=summary["reference_invalid"],
         signature_valid=f"{(summary['reference_valid'] or 0) / max(summary['accepted'], 1):.4f}")


def main():
    started = time.time()
    phases = os.environ.get("BENCH_WEBHOOK_PHASES", "throughput,latency,faults").split(",")
    files = throughput() if "throughput" in phases else []
    if "latency" in phases or "faults" in phases:
        port = free_port()
        recv = Receiver("wh_main", port, add_endpoint(main_url, "bench", port))
        recv.start()
        if "latency" in phases:
            latency(recv)
        if "faults" in phases:
            faults(recv)
        else:
            recv.stop()
        files += recv.records
    signature(files)
    print(f"webhook_bench_seconds={time.time() - started:.0f}")


if __name__ == "__main__":
    main()
