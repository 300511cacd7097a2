"""ops/bench serve, the cancel page: `churnwatch serve` answering Apple's Get Retention Message
(imported by ops/bench_serve.py; the simulator, a polled database and the night are its).

  setup       three messages uploaded to the simulator (approved at once), a default message (at
              Apple for one product and locale, and churnwatch's own for every other), and rules:
              a promotional offer for customers at risk, a switch-plan suggestion for the long
              subscribed, a message for everyone else, each holding 10 % out; and an adaptive
              experiment with four arms live on the last (its weights set once by hand, so a
              second period), whose answers look up and record each subscriber's arm.
  answers     BENCH_RETENTION_REQUESTS (2,000) requests signed by the simulator for random
              subscribers, posted as a steady stream of BENCH_RETENTION_RATE (100) a second with at
              most 10 in flight (the performance test's concurrency) while a nightly run polls
              beside (nights after the bench's, one after another, so that one polls beside the
              stream at any population: retention_runs_beside): retention_answer_p50_ms, _p99_ms
              (from the POST sent to its answer read, the client's clock) of the requests sent while
              a run was polling (retention_requests_beside_run of them, and a retention_note when
              some were not; _p99_ms_all: every one), retention_fallback_share
              (answers chosen without the database's facts, from serve's metrics), and every answer
              a 200 with exactly one member. Then as many again saturated (10 always in flight):
              retention_saturated_answers_per_s and _answer_p99_ms.
  db_down     PostgreSQL stopped, as many new requests: retention_answer_p99_ms_db_down and
              retention_answers_valid_db_down (the share answered 200 with one member), then
              PostgreSQL started and every answer recorded once it is back (retention_recorded_after).
"""
import datetime, json, os, random, re, signal, subprocess, threading, time, urllib.request

M_DEFAULT, M_OFFER, M_SWITCH, M_STAY = ("00000000-0000-4000-8000-00000000d0d0", "11111111-1111-4111-8111-111111111111",
                                        "22222222-2222-4222-8222-222222222222", "33333333-3333-4333-8333-333333333333")


def sim_post(sim, path, body):
    req = urllib.request.Request(sim + path, data=json.dumps(body).encode(), method="POST", headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.loads(r.read())


def churnwatch(bin_dir, env, *args):
    r = subprocess.run([f"{bin_dir}/churnwatch", *args], env=env, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"bench_retention: churnwatch {' '.join(args[:3])} exited {r.returncode}: {r.stderr.strip()[-300:]}")
    return r.stdout


def setup(bin_dir, env, url):
    e = dict(env, DATABASE_URL=url)
    for m in (M_DEFAULT, M_OFFER, M_SWITCH, M_STAY):
        churnwatch(bin_dir, e, "messages", "upload", "--message", m, "--header", "Before you go", "--body", f"Message {m[:8]}")
    product = subprocess.run(["psql", "-qAtX", url, "-c", "SELECT product_id FROM churnwatch.subscriptions WHERE product_id IS NOT NULL LIMIT 1"],
                             capture_output=True, text=True, check=True).stdout.strip()
    churnwatch(bin_dir, e, "messages", "default", "set", "--product", product, "--locale", "en-US", "--message", M_DEFAULT)
    churnwatch(bin_dir, e, "messages", "default", "set", "--message", M_DEFAULT)
    churnwatch(bin_dir, e, "messages", "rules", "set", "--name", "save", "--priority", "10", "--kind", "promotional_offer",
               "--message", M_OFFER, "--offer-id", "SAVE30", "--segments", "will_not_renew,billing_retry,grace_period", "--holdout", "0.1")
    churnwatch(bin_dir, e, "messages", "rules", "set", "--name", "loyal", "--priority", "20", "--kind", "alternate_product",
               "--message", M_SWITCH, "--alternate-product", product, "--min-tenure-days", "180", "--holdout", "0.1")
    churnwatch(bin_dir, e, "messages", "rules", "set", "--name", "everyone", "--priority", "100", "--kind", "message",
               "--message", M_STAY, "--holdout", "0.1")
    # An adaptive experiment live on the everyone rule (issue 50): four arms, its weights moved
    # once by hand (a second period), so answers look up and record sticky assignments.
    churnwatch(bin_dir, e, "experiments", "add", "bench", "--rule", "everyone", "--holdout", "0.1",
               "--arm", f"stay:message:{M_STAY}", "--arm", f"switch:alternate_product:{M_SWITCH}:{product}",
               "--arm", f"off30:promotional_offer:{M_OFFER}:SAVE30@0.3", "--arm", f"off50:promotional_offer:{M_OFFER}:SAVE50@0.5")
    churnwatch(bin_dir, e, "experiments", "set", "bench", "--weights", "stay=1,switch=1,off30=3,off50=2")


def signed(sim, url, n, seed, path):
    ids = subprocess.run(["psql", "-qAtX", url, "-c", "SELECT original_transaction_id FROM churnwatch.subscriptions WHERE product_id IS NOT NULL"],
                         capture_output=True, text=True, check=True).stdout.split()
    rng = random.Random(seed)
    locales = ["en-US"] * 7 + ["en-GB", "de-DE", "fr-FR"]
    with open(path, "w") as f:
        for _ in range(n):
            body = {"original_transaction_id": rng.choice(ids), "user_locale": rng.choice(locales)}
            f.write(sim_post(sim, "/_sim/realtime/sign", body)["signedPayload"] + "\n")


def load(bin_dir, env, port, path, rate=None):
    pace = ["--rate", str(rate)] if rate else []
    out = subprocess.run([f"{bin_dir}/churnwatch-bench", "serve-load", f"http://127.0.0.1:{port}/apple/retention-message", path,
                          "--concurrency", "10", "--bodies", f"{path}.answers", "--out", f"{path}.times", *pace],
                         capture_output=True, text=True, env=env)
    if out.returncode != 0:
        raise SystemExit(f"serve-load failed: {out.stderr}")
    result = dict(line.split("=", 1) for line in out.stdout.split())
    valid = 0
    for line in open(f"{path}.answers"):
        status, _, body = line.rstrip("\n").partition(" ")
        try:
            answer = json.loads(body) if status == "200" else {}
        except ValueError:
            answer = {}
        members = [k for k in ("message", "alternateProduct", "promotionalOffer") if k in answer]
        valid += status == "200" and len(answers_one(answer, members)) == 1
    return result, valid


def answers_one(answer, members):
    return [m for m in members if isinstance(answer[m], dict) and answer[m].get("messageIdentifier")]


def metric(port, name):
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    return sum(float(m.group(1)) for m in re.finditer(rf"^{name}(?:{{[^}}]*}})? (\S+)$", text, re.M))


class RunsBeside:
    """Nightly runs one after another (night + 1 day, + 2 days, ...) while the cancel page is
    loaded, so a run polls beside the stream at any population: a run that ends early (a small
    population, or a night already polled) is followed by the next night's."""

    def __init__(self, bin_dir, env, url, night, log):
        self.bin_dir, self.env, self.url, self.log = bin_dir, dict(env, DATABASE_URL=url), url, log
        self.night = datetime.datetime.fromisoformat(night.replace("Z", "+00:00"))
        self.spans, self.current, self.done = [], None, threading.Event()
        self.thread = threading.Thread(target=self.loop)

    def start(self):
        self.thread.start()

    def loop(self):
        day = 1
        while not self.done.is_set():
            as_of = (self.night + datetime.timedelta(days=day)).strftime("%Y-%m-%dT%H:%M:%SZ")
            began = time.time() * 1000
            self.current = subprocess.Popen([f"{self.bin_dir}/churnwatch", "run", "--as-of", as_of, "--notifications", "off", "--log-format", "json"],
                                            env=self.env, stdout=subprocess.DEVNULL, stderr=open(self.log, "a"))
            self.current.wait()
            self.spans.append((began, time.time() * 1000))
            day += 1

    def stop(self):
        self.done.set()
        if self.current and self.current.poll() is None:
            self.current.send_signal(signal.SIGTERM)
        self.thread.join()

    def only(self, path):
        """Answer times (ms) of the requests sent while a run was polling, and how many were sent."""
        times, total = [], 0
        for line in open(f"{path}.times"):
            _, sent, status, ms = line.split()
            total += 1
            if any(a <= float(sent) < b for a, b in self.spans):
                times.append(float(ms))
        return sorted(times), total


def run(bin_dir, work, port, env, url, night, pg, start_serve):
    sim = env["APPSTORE_BASE_URL"]
    n = int(os.environ.get("BENCH_RETENTION_REQUESTS", "2000"))
    setup(bin_dir, env, url)
    signed(sim, url, n, 11, f"{work}/retention_a.jsonl")
    signed(sim, url, n, 12, f"{work}/retention_b.jsonl")
    signed(sim, url, n, 13, f"{work}/retention_c.jsonl")
    rate = float(os.environ.get("BENCH_RETENTION_RATE", "100"))
    serve = start_serve(url, ["--retention-max-skew", "off"])
    beside = RunsBeside(bin_dir, env, url, night, f"{work}/retention_run.log")
    beside.start()
    time.sleep(2)  # the first run's planning done, its polling under way: the load goes beside it
    # A steady stream at BENCH_RETENTION_RATE/s, at most 10 in flight (Apple's performance test
    # sends 200 in a minute, 10 at a time): each answer's time is its own, not a queue's.
    result, valid = load(bin_dir, env, port, f"{work}/retention_a.jsonl", rate)
    answers, without = metric(port, "churnwatch_serve_retention_answers_total"), metric(port, "churnwatch_serve_retention_without_facts_total")
    # Saturated: 10 always in flight, as fast as serve answers, runs still beside.
    saturated, _ = load(bin_dir, env, port, f"{work}/retention_c.jsonl")
    beside.stop()
    beside_times, total = beside.only(f"{work}/retention_a.jsonl")
    print(f"retention_requests={result['load_requests']}")
    print(f"retention_rate_per_s={rate:.0f}")
    print(f"retention_runs_beside={len(beside.spans)}")
    print(f"retention_requests_beside_run={len(beside_times)}")
    if len(beside_times) < total:
        print(f"retention_note={total - len(beside_times)} of {total} requests were sent while no run was polling (between runs, or after the last)")
    print(f"retention_answer_p50_ms={beside_times[len(beside_times) // 2] if beside_times else float('nan'):.1f}")
    print(f"retention_answer_p99_ms={beside_times[min(len(beside_times) - 1, len(beside_times) * 99 // 100)] if beside_times else float('nan'):.1f}")
    print(f"retention_answer_p99_ms_all={result['load_answer_p99_ms']}")
    print(f"retention_answers_valid={valid / max(int(result['load_requests']), 1):.4f}")
    print(f"retention_fallback_share={without / max(answers, 1):.4f}")
    print(f"retention_saturated_answers_per_s={saturated['load_requests_per_s']}")
    print(f"retention_saturated_answer_p99_ms={saturated['load_answer_p99_ms']}")
    subprocess.run([pg, "stop"], capture_output=True)
    result, valid = load(bin_dir, env, port, f"{work}/retention_b.jsonl")
    print(f"retention_answer_p50_ms_db_down={result['load_answer_p50_ms']}")
    print(f"retention_answer_p99_ms_db_down={result['load_answer_p99_ms']}")
    print(f"retention_answers_valid_db_down={valid / max(int(result['load_requests']), 1):.4f}")
    subprocess.run([pg, "start"], capture_output=True)
    deadline, recorded = time.time() + 120, 0
    while time.time() < deadline:
        try:
            recorded = int(subprocess.run(["psql", "-qAtX", url, "-c", "SELECT count(*) FROM churnwatch.retention_message_requests"],
                                          capture_output=True, text=True, check=True).stdout.strip())
        except (subprocess.CalledProcessError, ValueError):
            recorded = 0
        if recorded >= 3 * n:
            break
        time.sleep(0.5)
    print(f"retention_recorded_after={recorded} of {3 * n}")
    serve.send_signal(signal.SIGTERM)
    serve.wait()
