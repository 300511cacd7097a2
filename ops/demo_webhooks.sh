# Sourced by ops/demo. `demo_webhooks_start` (before the week): a local receiver (ops/webhook_receiver.py,
# which checks every Standard Webhooks signature with its own implementation) and an endpoint for
# the default app pointing at it, as the runbook's "Webhooks" adds one. During the week the team's
# tool is reached from cron (`webhooks send` after each night), afterwards by serve's sender.
# `demo_webhooks_report` (at the end): what arrived.

demo_webhooks_start() {
    section "the team's tools: a webhook endpoint (Standard Webhooks) on a local receiver"
    webhook_port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    echo "\$ churnwatch webhooks add demo-tool --url http://127.0.0.1:$webhook_port/hooks --allow-http --allow-private"
    local added secret
    added=$(churnwatch webhooks add demo-tool --url "http://127.0.0.1:$webhook_port/hooks" --allow-http --allow-private) \
        || die "webhooks add failed"
    indent <<<"$added"
    secret=$(sed -n 's/^secret: //p' <<<"$added")
    rm -f "$demo_dir/webhooks.ready" "$demo_dir/webhooks.jsonl"
    python3 "$here/ops/webhook_receiver.py" --port "$webhook_port" --secret "$secret" --record "$demo_dir/webhooks.jsonl" \
        --ready-file "$demo_dir/webhooks.ready" >"$demo_dir/webhooks.log" 2>&1 &
    webhook_pid=$!
    for _ in $(seq 1 100); do [ -s "$demo_dir/webhooks.ready" ] && break; sleep 0.1; done
    [ -s "$demo_dir/webhooks.ready" ] || die "the webhook receiver did not start (log: $demo_dir/webhooks.log)"
    echo "a receiver listens there, verifying each signature with the secret above (its record: $demo_dir/webhooks.jsonl)"
    echo "\$ churnwatch webhooks test demo-tool"
    churnwatch webhooks test demo-tool | indent
}

# One night's messages, sent as a cron-only deployment would (serve sends them once it runs).
demo_webhooks_send() {
    echo "\$ churnwatch webhooks send"
    churnwatch webhooks send --log-level warning | indent
}

demo_webhooks_report() {
    section "what the team's tool received: churnwatch webhooks list, and the receiver's count"
    churnwatch webhooks send --log-level warning >/dev/null   # anything serve left due at its stop
    churnwatch webhooks list | indent
    python3 - "$webhook_port" <<'PY' | indent
import json, sys, urllib.request
s = json.load(urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/_stats"))
print(f"received {s['accepted']} messages ({s['unique_ids']} distinct ids), signatures valid {s['valid']}, invalid {s['invalid']}, "
      f"out of order {s['order_violations']}, a repeated id with another body {s['duplicate_ids_with_other_body']}")
for kind, n in sorted(s["by_type"].items()):
    print(f"  {kind}: {n}")
PY
    echo "one of them, as the receiver got it:"
    python3 - "$demo_dir/webhooks.jsonl" <<'PY' | indent
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r.get("type") == "churn_event.created" and r.get("status") == 200:
        print("webhook-id:", r["id"]); print("webhook-timestamp:", r["timestamp"]); print(json.dumps(r["body"], indent=2))
        break
PY
}
