-- Large values are compressed with lz4 instead of pglz, where the server has it. An envelope row
-- passes Postgres's 2 KB toast threshold once its body, header and search lexemes reach it (a
-- ~1 KB text does), and pglz then compressed the body inside every accept statement: 8 % of the
-- statement's Postgres CPU in a profile; with lz4 the statement cost 9-18 % less on the accept
-- bench's text and 8-14 % less on prose (bench `accept-statement`, variant `migrated_pglz`).
-- Reading a compressed body back (GET /messages) is cheaper too, and an uploaded file of 10 MiB
-- no longer costs pglz's tens of milliseconds. Only new values change: stored ones keep pglz, and
-- both read the same. A server built without lz4 (PGlite, some self-built ones) answers
-- feature_not_supported and keeps pglz, as does one older than 14 (no per-column compression).
DO $$
BEGIN
  IF current_setting('server_version_num')::int < 140000 THEN
    RETURN;
  END IF;
  EXECUTE 'ALTER TABLE envelopes ALTER COLUMN body SET COMPRESSION lz4, '
          'ALTER COLUMN header SET COMPRESSION lz4, ALTER COLUMN search SET COMPRESSION lz4';
  EXECUTE 'ALTER TABLE files ALTER COLUMN bytes SET COMPRESSION lz4';
EXCEPTION WHEN feature_not_supported THEN
  NULL;
END
$$;
