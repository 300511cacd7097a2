-- `churnwatch serve` stores each verified notification Apple posts in the inbox, keyed by its
-- notificationUUID: a delivery Apple repeats (it retries until it gets a 200) finds its row and
-- changes nothing. Rows an app's own backend inserts keep a NULL uuid, as before.
ALTER TABLE churnwatch.notification_inbox ADD COLUMN notification_uuid uuid;
CREATE UNIQUE INDEX notification_inbox_uuid_idx ON churnwatch.notification_inbox (notification_uuid)
    WHERE notification_uuid IS NOT NULL;
-- A payload is a few KB of base64url, which PostgreSQL's compression shrinks little at a high
-- CPU cost (a quarter of the server's CPU under serve's peak load): kept out of line, uncompressed.
ALTER TABLE churnwatch.notification_inbox ALTER COLUMN signed_payload SET STORAGE EXTERNAL;
