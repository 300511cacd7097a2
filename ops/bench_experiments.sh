# ops/bench experiments, sourced by ops/bench (its start_sim, fresh_db, night, $bin, $work):
# an adaptive four-arm cancel-page experiment against the simulator's truth (ops/bench_experiments.py).
#
# Each seed of BENCH_EXPERIMENT_SEEDS ("31 32 33"): BENCH_EXPERIMENT_SUBSCRIBERS=40000 subscribers
# whose lives began 200 days before the first night, every voluntary cancellation preceded by a
# view, browsing views 0.02 a month; four arms with true effects (on a customer who came to
# cancel) 0.05 and 0.10 (two messages), 0.45 (a 20 % offer) and 0.50 (a 50 % offer): by revenue
# 0.05, 0.10, 0.36, 0.25, the 20 % offer best. BENCH_EXPERIMENT_NIGHTS=120 nights, each a run then
# `experiments update`, then nights 7, 21 and 40 days on. Then one more population (seed 39,
# 20,000 subscribers, 40 nights) with 30 % of the subscribers assigned to arm a by hand before the
# first night: the sample-ratio check must fire there and nowhere else. 40,000 subscribers see
# about 60 first views a night: every arm has its 100 matured views (the default before weights
# move) by night 15 or so; at 20,000, night 34 (revenue kept 0.79 of the oracle's at seed 31).
exp_subs=${BENCH_EXPERIMENT_SUBSCRIBERS:-40000}
exp_nights=${BENCH_EXPERIMENT_NIGHTS:-120}
read -ra exp_seeds <<<"${BENCH_EXPERIMENT_SEEDS:-31 32 33}"
[[ $exp_nights =~ ^[1-9][0-9]*$ ]] && [ "$exp_nights" -ge 31 ] || { echo "BENCH_EXPERIMENT_NIGHTS: 31 or more, not $exp_nights" >&2; exit 2; }
export APPSTORE_RECEIPT_RATE=1000000 APPSTORE_NOTIFICATION_RATE=1000000
exp_effects="message:a1111111-1111-4111-8111-111111111111=0.05,message:b2222222-2222-4222-8222-222222222222=0.10,offer:SAVE20=0.45,offer:SAVE50=0.50"
exp_files=()
exp_run() { # seed nights skew subscribers
    local port
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    start_sim "exp$1" --subscribers "$4" --seed "$1" --start "$(date -u -d "$(night 0) - 200 days" +%Y-%m-%dT%H:%M:%SZ)" \
        --horizon-days $((200 + $2 + 60)) --sandbox-share 0 --retention-url "http://127.0.0.1:$port/apple/retention-message" \
        --cancel-page-share 1 --cancel-page-browse 0.02 --cancel-page-arm-effect "$exp_effects" --cancel-page-offer "SAVE20=0.2x1,SAVE50=0.5x1"
    fresh_db bench_experiments
    python3 "$here/ops/bench_experiments.py" experiment "$bin" "$sim_url" "$(night 0)" "$2" "$work/experiments_s$1.json" "$port" "$3"
    exp_files+=("$work/experiments_s$1.json")
    stop_sim
}
for seed in "${exp_seeds[@]}"; do exp_run "$seed" "$exp_nights" 0 "$exp_subs"; done
[ "${BENCH_EXPERIMENT_SKEW:-1}" = 0 ] || exp_run 39 40 0.3 20000
python3 "$here/ops/bench_experiments.py" summarize "${exp_files[@]}"
