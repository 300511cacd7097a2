-- subscriptions.environment: NULL means "the configured environment" (APPSTORE_ENVIRONMENT).
--
-- The column defaulted to 'Production', so in a Sandbox deployment every row an app inserted
-- without an environment was first asked of Production: an extra call per subscription, and a
-- quarantine against a server that answers both environments at one URL. Without a default, a
-- row inserted without one is NULL, and planning and polling treat NULL as APPSTORE_ENVIRONMENT.
-- Nothing already set is converted: a 'Production' stored before this migration may have been
-- written by the old default or on purpose, and the two cannot be told apart; the first poll
-- corrects a wrong one (the environment that answered is stored).
ALTER TABLE churnwatch.subscriptions ALTER COLUMN environment DROP DEFAULT;
ALTER TABLE churnwatch.subscriptions ALTER COLUMN environment DROP NOT NULL;
