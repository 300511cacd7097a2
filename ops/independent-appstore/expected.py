"""What churnwatch should have written, from the server's truth (docs/contracts.md): a
subscription's segment and its live win-back campaign, and the reasons the change feed plans by."""
from __future__ import annotations

from scenario import DAY

# The reasons the change feed plans by (docs/contracts.md "Planning with the change feed").
FEED_REASONS = {"new", "failed", "stale", "billing_no_news", "period_end_unnotified"}
WINBACK_HORIZON = 60 * DAY   # docs/contracts.md: win-back / resubscribe prompts for 60 days after expiry
RETRY_LIMIT = 60 * DAY       # Apple retries at most 60 days

CAMPAIGN = {
    "will_not_renew": "save_offer", "price_increase_pending": "save_offer",
    "grace_period": "billing_fix", "billing_retry": "billing_fix",
    "churned_voluntary": "winback_offer", "churned_price_increase": "winback_offer", "churned_other": "winback_offer",
    "churned_billing": "resubscribe_prompt", "churned_product_unavailable": "resubscribe_prompt",
}


def expected_segment(t: dict | None, now: int) -> str:
    if t is None:
        return "unknown"  # never polled successfully
    if t["revoked"] or t["status"] == 5:
        return "refunded"
    if t["status"] == 2:
        return {1: "churned_voluntary", 2: "churned_billing", 3: "churned_price_increase",
                4: "churned_product_unavailable"}.get(t["expirationIntent"], "churned_other")
    if t["status"] in (3, 4):
        grace = t["gracePeriodExpiresDate"]
        return "grace_period" if grace is not None and grace > now else "billing_retry"
    if t["status"] == 1:
        if t["autoRenewStatus"] == 0:
            return "will_not_renew"
        if t["priceIncreaseStatus"] == 0:
            return "price_increase_pending"
        if t["autoRenewProductId"] != t["productId"]:
            return "plan_change_pending"
        return "active"
    return "unknown"


def expected_campaign(t: dict | None, segment: str, now: int) -> str | None:
    campaign = CAMPAIGN.get(segment)
    if t is None or campaign is None:
        return None
    if t["ownership"] == "FAMILY_SHARED":
        # docs/contracts.md doesn't say; docs/churn-model.md §5 documents the choice: the organizer's
        # own subscription gets the campaign, family members none.
        return None
    if campaign in ("winback_offer", "resubscribe_prompt") and now - t["expiresDate"] > WINBACK_HORIZON:
        return None  # the 60-day window after expiry has closed
    if campaign == "billing_fix" and now - t["expiresDate"] > RETRY_LIMIT:
        return None
    if campaign == "save_offer" and t["expiresDate"] <= now:
        return None  # "now, until the period ends" (a period ending at the run's very moment, unnotified yet)
    return campaign


# --------------------------------------------------------------------------------------------
