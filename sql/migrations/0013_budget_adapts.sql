-- Issue 29: a server that allows less than the configured rate (Apple lowering an app's limit,
-- a compatible server with its own) is followed, not given up on. A 429 cuts the shared rate of
-- its bucket for every process of the run (allowed_rate, from allowed_at): by the share of the
-- calls granted since the last cut that the server refused, at least by 15 %; from there the
-- rate climbs back quickly to 95 % of the rate that was refused, then by 1 % a second towards
-- the configured one. NULL: the configured rate.
ALTER TABLE churnwatch.api_budget
    ADD COLUMN allowed_rate double precision,
    ADD COLUMN allowed_at timestamptz,
    ADD COLUMN allowed_ceiling double precision,                     -- the rate the last cut was made at
    ADD COLUMN window_granted double precision NOT NULL DEFAULT 0,   -- calls granted since allowed_at
    ADD COLUMN window_refused double precision NOT NULL DEFAULT 0;   -- of those, refused (429)
