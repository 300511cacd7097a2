# ops/bench apps, sourced by ops/bench (its start_sim, fresh_db, set_clock, night, $bin, $work):
# several apps in one database (issue 26), each on its own Apple budget.
#
#   apps_rate_utilization_min  3 apps of BENCH_APPS_RATE_SUBSCRIBERS=20000 each, the simulator at
#                              50/s per app and endpoint with 100 ms latency, 2 minutes of a first
#                              night: each app's calls accepted per second of its polling (from its
#                              "planned run" to its "run summary") / 50 on its busier endpoint
#                              (history, on a first night), the lowest app's (goal >= 0.97);
#                              apps_rate_utilization_<k> each, with apps_rate_status_<k> and
#                              apps_rate_history_<k>; apps_http_429 (goal 0)
#   apps_cpu_per_sub_ratio     churnwatch's CPU per polled subscription on a regular night (every
#                              subscription due), 3 apps of BENCH_APPS_SUBSCRIBERS=10000 together
#                              over 1 app alone, back to back, no limits (goal <= 1.10)
#   apps_refused_key_slowdown  3 apps of BENCH_APPS_REFUSED_SUBSCRIBERS=3000 at 50/s: the longest
#                              of apps 1 and 2's run time with app 3's key refused over without
#                              (goal <= 1.05)
# BENCH_APPS_SEED=21 seeds the three simulators (seed, seed + 1, seed + 2). About 8 minutes.
export CHURNWATCH_NOTIFICATIONS=off
apps_seed=${BENCH_APPS_SEED:-21}
[[ $apps_seed =~ ^[0-9]+$ ]] || { echo "BENCH_APPS_SEED: a whole number, not $apps_seed" >&2; exit 2; }
echo "apps_seed=$apps_seed"
apps_fast=(--status-rate 1000000 --history-rate 1000000 --concurrency 64)

# A fresh database with the running simulator's first $2 apps registered and imported.
apps_db() {
    fresh_db "$1"
    local k line bundle id csv
    for k in $(seq 2 "$2"); do
        line=$(sed -n "${k}p" "$sim_dir/pki/apps.tsv")
        bundle=$(cut -f1 <<<"$line"); id=$(cut -f2 <<<"$line"); csv=$(cut -f4 <<<"$line")
        "$bin/churnwatch" apps add "$bundle" --app-apple-id "$id" >/dev/null
        "$bin/churnwatch" import --app "$bundle" "$sim_dir/pki/$(basename "$csv")" >/dev/null
    done
}
apps_list() { cut -f1 "$sim_dir/pki/apps.tsv"; }
# Per app (bundle id): the seconds from its "planned run" log line to its "run summary" one.
apps_spans() {
    python3 - "$1" <<'PY'
import datetime, json, sys
planned, ended = {}, {}
for line in open(sys.argv[1]):
    try: d = json.loads(line)
    except ValueError: continue
    t = datetime.datetime.fromisoformat(d['ts'].replace('Z', '+00:00')).timestamp()
    app = d.get('bundle_id', '')
    if d.get('msg') == 'planned run': planned.setdefault(app, t)
    if d.get('msg') == 'run summary': ended[app] = t
for app in sorted(ended):
    if app in planned: print(app, ended[app] - planned[app])
PY
}

# Apple's ceiling, per app.
start_sim apps_rate --apps 3 --subscribers "${BENCH_APPS_RATE_SUBSCRIBERS:-20000}" --seed "$apps_seed" --sandbox-share 0 \
    --rate 50 --latency-ms 100 --latency-jitter-ms 20 --start "$(night 0)"
sim_dir=$work/sim-apps_rate
apps_db bench_apps_rate 3
set_clock "$(night 0)"
"$bin/churnwatch" run --as-of "$(night 0)" --max-duration 2m --log-format json >"$work/apps_rate_out" 2>"$work/apps_rate_err" || true
k=0; worst=9; limited=0
while read -r app seconds; do
    k=$((k + 1))
    # An app's budget is one per endpoint; on a first night every subscription needs its history
    # too (some two pages), so history's 50/s is the one that binds and status gets what
    # history leaves it. The app's share is that of its busier endpoint.
    read -r status history refused < <(curl -sf "$sim_url/_sim/stats?bundle_id=$app" | python3 -c "
import json, sys
s = json.load(sys.stdin)
print(s['requests'].get('subscriptions', {}).get('200', 0), s['requests'].get('history', {}).get('200', 0), s['rate_limited'])")
    u=$(python3 -c "print(f'{max($status, $history) / $seconds / 50:.3f}')")
    echo "apps_rate_utilization_$k=$u"
    echo "apps_rate_status_$k=$(python3 -c "print(f'{$status / $seconds / 50:.3f}')") apps_rate_history_$k=$(python3 -c "print(f'{$history / $seconds / 50:.3f}')")"
    worst=$(python3 -c "print(min($worst, $u))"); limited=$((limited + refused))
done < <(apps_spans "$work/apps_rate_err")
echo "apps_rate_utilization_min=$worst"
echo "apps_http_429=$limited"
stop_sim

# CPU per subscription: 3 apps together, then 1 alone, on the same population.
start_sim apps_cpu --apps 3 --subscribers "${BENCH_APPS_SUBSCRIBERS:-10000}" --seed $((apps_seed + 1)) --sandbox-share 0 --start "$(night 0)"
sim_dir=$work/sim-apps_cpu
export APPSTORE_RECEIPT_RATE=1000000
for n in 3 1; do
    apps_db "bench_apps_cpu$n" "$n"
    set_clock "$(night 0)"
    "$bin/churnwatch" run --as-of "$(night 0)" "${apps_fast[@]}" >/dev/null 2>&1
    set_clock "$(night 1)"
    /usr/bin/time -f "%U %S" -o "$work/apps_cpu_time$n" "$bin/churnwatch" run --as-of "$(night 1)" --stale-after 0s "${apps_fast[@]}" \
        >"$work/apps_cpu_out$n" 2>/dev/null
done
unset APPSTORE_RECEIPT_RATE
python3 - "$work" <<'PY'
import re, sys
def cpu(n):
    user, sys_ = map(float, open(f"{sys.argv[1]}/apps_cpu_time{n}").read().split()[:2])
    polled = sum(int(m.group(1)) for m in re.finditer(r"^run \d+ done: \d+ due, (\d+) polled", open(f"{sys.argv[1]}/apps_cpu_out{n}").read(), re.M))
    print(f"apps_cpu_ms_per_sub_{n}={(user + sys_) * 1000 / polled:.3f}")
    print(f"apps_cpu_polled_{n}={polled}")
    return (user + sys_) / polled
three, one = cpu(3), cpu(1)
print(f"apps_cpu_per_sub_ratio={three / one:.3f}")
PY
stop_sim

# One app's key refused: the others' run times with it, over without.
start_sim apps_refused --apps 3 --subscribers "${BENCH_APPS_REFUSED_SUBSCRIBERS:-3000}" --seed $((apps_seed + 2)) --sandbox-share 0 \
    --rate 50 --latency-ms 100 --latency-jitter-ms 20 --start "$(night 0)"
sim_dir=$work/sim-apps_refused
third=$(apps_list | sed -n 3p)
for case in ok refused; do
    apps_db "bench_apps_$case" 3
    if [ "$case" = refused ]; then
        "$bin/churnwatch" apps set "$third" --issuer-id "$APPSTORE_ISSUER_ID" --key-id NOTTHEKEY1 --key-file "$APPSTORE_PRIVATE_KEY_PATH" >/dev/null
    fi
    set_clock "$(night 0)"
    "$bin/churnwatch" run --as-of "$(night 0)" --log-format json >"$work/apps_${case}_out" 2>"$work/apps_${case}_err" || true
    apps_spans "$work/apps_${case}_err" | grep -v "^$third " | sort -k2 -n | tail -1 | cut -d' ' -f2 >"$work/apps_${case}_longest"
    echo "apps_refused_key_${case}_s=$(python3 -c "print(f'{$(cat "$work/apps_${case}_longest"):.1f}')")"
done
python3 -c "print(f'apps_refused_key_slowdown={$(cat "$work/apps_refused_longest") / $(cat "$work/apps_ok_longest"):.3f}')"
stop_sim
unset CHURNWATCH_NOTIFICATIONS
