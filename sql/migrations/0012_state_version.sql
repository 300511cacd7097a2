-- Issue 24: a change is logged once, whichever writers see it at the same time.
--
-- Every write of a subscription's verified state (a poll's batch, a change-feed commit) is
-- decided from the state it read, and stores state_version + 1 only where the row still holds
-- the version it read. A writer that finds another version (a run's poll committed while a
-- `notifications sync` applied the same subscription, or the reverse) writes none of that
-- subscription's observations: a poll's item is polled again, a notification is decided again
-- from the state the other writer left. Before this, both wrote their events, and an expiry the
-- feed had logged was logged a second time by the poll.
ALTER TABLE churnwatch.subscriptions ADD COLUMN state_version bigint NOT NULL DEFAULT 0;

-- Planning trusts each environment's feed once that environment's notifications were seen
-- (a Production app's Sandbox history may stay empty): one index probe a night, not a scan.
CREATE INDEX notifications_seen_idx ON churnwatch.notifications (environment)
    WHERE outcome IN ('applied', 'stale');
