-- Issue 40: bundle ids compare without case, as Apple's do ("Bundle IDs are case insensitive",
-- Apple's glossary). Two spellings of one bundle id are one app: `churnwatch apps add` refuses
-- the second, and the table holds it too. Rows keep the spelling the app was added with.
DO $$
DECLARE
    twins text;
BEGIN
    SELECT string_agg(names, '; ') INTO twins FROM (
        SELECT string_agg(bundle_id, ', ' ORDER BY bundle_id) AS names
        FROM churnwatch.apps GROUP BY lower(bundle_id) HAVING count(*) > 1) AS t;
    IF twins IS NOT NULL THEN
        RAISE EXCEPTION 'migration 0020 makes bundle ids compare without case, as Apple''s do, and these apps are one bundle id spelled twice: %. Keep the spelling Apple uses and delete the other app''s row (DELETE FROM churnwatch.apps WHERE bundle_id = ...; its data rows stay under that spelling), then run churnwatch migrate again (migration 0020 changed nothing)', twins;
    END IF;
END $$;

CREATE UNIQUE INDEX apps_bundle_id_lower_idx ON churnwatch.apps (lower(bundle_id));
