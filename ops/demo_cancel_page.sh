# Sourced by ops/demo after its real-time section, with serve still listening on $serve_port: the
# cancel page as the runbook sets it up ("The cancel page"), for the default app. Messages are
# uploaded to the simulator's Retention Messaging API (it approves them at once), rules set, the
# Sandbox URL registered and Apple's performance test passed, then the Production URL; the
# simulated customers who open the subscription page in the weeks after the demo's week get their
# requests posted to serve. Then the outcomes against the holdout, and the report's panel.

section "the cancel page: Apple's Get Retention Message, answered by churnwatch serve"
m_default=00000000-0000-4000-8000-00000000d0d0
m_offer=11111111-1111-4111-8111-111111111111
m_stay=33333333-3333-4333-8333-333333333333
retention_url="http://127.0.0.1:$serve_port/apple/retention-message"
product=$(sql -tA -c "SELECT product_id FROM churnwatch.subscriptions WHERE product_id IS NOT NULL AND bundle_id = '$APPSTORE_BUNDLE_ID' ORDER BY 1 LIMIT 1")
run_shown() { echo "\$ churnwatch $*"; churnwatch "$@" | indent; }
run_shown messages upload --message "$m_default" --header "Your plan" --body "Manage or cancel your subscription below."
run_shown messages upload --message "$m_offer" --header "Before you go" --body "Stay three months at half price."
run_shown messages upload --message "$m_stay" --header "Before you go" --body "Everything you made stays here when you come back."
run_shown messages list
run_shown messages default set --product "$product" --locale en-US --message "$m_default"
run_shown messages default set --message "$m_default"
run_shown messages rules set --name save-offer --priority 10 --kind promotional_offer --message "$m_offer" --offer-id SAVE30 \
    --segments will_not_renew,billing_retry,grace_period --holdout 0.3
run_shown messages rules set --name everyone --priority 100 --kind message --message "$m_stay" --holdout 0.3
# An experiment on that rule's audience (runbook "Experiments"): the message against a 30 % offer,
# adaptive (weights move once each arm has 20 views a day old), the same 30 % held out.
run_shown experiments add demo-stay-or-offer --rule everyone --holdout 0.3 --min-matured 20 --as-of "$(iso "$last_night")" \
    --arm stay:message:"$m_stay" --arm offer30:promotional_offer:"$m_offer":SAVE30@0.3
run_shown messages url set --in Sandbox --url "$retention_url"
sandbox_otid=$(sql -tA -c "SELECT original_transaction_id FROM churnwatch.subscriptions WHERE environment = 'Sandbox' AND bundle_id = '$APPSTORE_BUNDLE_ID' LIMIT 1")
run_shown messages performance-test --original-transaction-id "$sandbox_otid" --poll-every 0.5s --wait 5m
run_shown messages url set --url "$retention_url"

# Four more weeks of nights: customers open the subscription page, the simulator posts Apple's
# requests to serve and shows its answers; then the nights after the last horizon.
cancel_nights=(1 2 3 4 5 6 7 14 21 28 63)
for d in "${cancel_nights[@]}"; do
    at=$(iso $(( last_night + d * day )))
    sim_clock "$at"
    churnwatch run --as-of "$at" --status-rate "$rate" --history-rate "$rate" --log-level warning >/dev/null
    echo "+$d days: \$ churnwatch experiments update: $(churnwatch experiments update --as-of "$at")"
done
cancel_last=$(iso $(( last_night + 63 * day )))
echo "Nights after the week: +${cancel_nights[*]} days. What the cancel page answered:"
sql -c "SELECT arm, coalesce(answer_kind, 'default') AS shown, count(*) AS views,
               count(*) FILTER (WHERE NOT facts_known) AS without_database
        FROM churnwatch.retention_message_requests WHERE environment = 'Production' GROUP BY 1, 2 ORDER BY 1, 2" | indent
echo "\$ churnwatch outcomes --campaign cancel_page --as-of $cancel_last"
churnwatch outcomes --campaign cancel_page --as-of "$cancel_last" | indent
echo "\$ churnwatch outcomes --experiment demo-stay-or-offer --as-of $cancel_last"
churnwatch outcomes --experiment demo-stay-or-offer --as-of "$cancel_last" | indent
report_cancel="$demo_dir/churnwatch-report-cancel-page.html"
echo "\$ churnwatch report --out $report_cancel --days 63 --as-of $cancel_last   # its \"Cancel page\" panel"
churnwatch report --out "$report_cancel" --days 63 --as-of "$cancel_last" --app "$APPSTORE_BUNDLE_ID" | indent
