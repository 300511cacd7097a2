-- The shared Apple budget and run bookkeeping details.

-- One token bucket per (app, endpoint, environment), shared by every process working a run:
-- a process takes a few tokens at a time in one UPDATE, so the sum of all processes' calls never
-- exceeds the configured rate (design.md §7).
CREATE TABLE churnwatch.api_budget (
    key         text PRIMARY KEY,         -- e.g. "com.example.app/subscriptionStatuses/Production"
    rate        double precision NOT NULL, -- tokens per second
    burst       double precision NOT NULL, -- bucket size
    tokens      double precision NOT NULL,
    updated_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
    paused_until timestamptz              -- a 429's Retry-After, for every process
);

-- Which run obsoleted a win-back entry (for run counts).
ALTER TABLE churnwatch.winback_queue ADD COLUMN obsoleted_run_id bigint REFERENCES churnwatch.runs (id);

-- Workers that joined a run (for status and the budget split).
CREATE TABLE churnwatch.run_workers (
    run_id      bigint NOT NULL REFERENCES churnwatch.runs (id) ON DELETE CASCADE,
    worker      text NOT NULL,            -- host:pid:random
    started_at  timestamptz NOT NULL DEFAULT now(),
    seen_at     timestamptz NOT NULL DEFAULT now(),
    stats       jsonb NOT NULL DEFAULT '{}',  -- the worker's cumulative counters (calls by endpoint, 429s, ...)
    PRIMARY KEY (run_id, worker)
);
