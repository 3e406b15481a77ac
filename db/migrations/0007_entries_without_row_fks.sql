-- Accept cost per delivered frame (issue 16): each mailbox_entries row fired two row-level
-- foreign-key checks (SELECT … FOR KEY SHARE on its mailbox and on its envelope), about a third of
-- the Postgres CPU of the accept statement for 50-recipient envelopes (bench accept-statement).
-- The same rules now hold per statement instead of per row:
--   * inserting entries whose envelope or mailbox does not exist fails (23503), checked once per
--     statement over all inserted rows. It takes no lock on the parents: the accept path already
--     holds them (the mailbox rows it advances in the same statement or locked FOR UPDATE, the
--     envelopes it inserts in the same statement), so a concurrent deletion waits for it or makes
--     it fail;
--   * deleting envelopes or mailboxes deletes their entries (what ON DELETE CASCADE did), once per
--     statement with the deleted rows as a set, through mailbox_entries_envelope and the primary
--     key; the receipt cascade (envelopes.receipt_for) deletes receipts' entries through it too.
-- No row changes: the constraints held until now, so every entry has its envelope and mailbox.
ALTER TABLE mailbox_entries DROP CONSTRAINT mailbox_entries_mailbox_id_fkey;
ALTER TABLE mailbox_entries DROP CONSTRAINT mailbox_entries_envelope_id_fkey;

-- Each check compares counts over `= ANY(array)` lookups, so that whatever the sizes, every parent
-- is found by its primary key (no plan that scans a whole table).
CREATE FUNCTION roost_entries_check_parents() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
  mailbox_ids bigint[] := ARRAY(SELECT DISTINCT mailbox_id FROM roost_added);
  envelope_ids text[] := ARRAY(SELECT DISTINCT envelope_id FROM roost_added);
BEGIN
  IF (SELECT count(*) FROM mailboxes WHERE agent_id = ANY (mailbox_ids)) <> cardinality(mailbox_ids) THEN
    RAISE EXCEPTION 'mailbox entry without its mailbox' USING ERRCODE = 'foreign_key_violation';
  END IF;
  IF (SELECT count(*) FROM envelopes WHERE id = ANY (envelope_ids)) <> cardinality(envelope_ids) THEN
    RAISE EXCEPTION 'mailbox entry without its envelope' USING ERRCODE = 'foreign_key_violation';
  END IF;
  RETURN NULL;
END
$$;
-- Inserts only: nothing updates an entry's mailbox_id or envelope_id (marking read changes `read`),
-- and a statement-level trigger cannot be limited to those columns.
CREATE TRIGGER mailbox_entries_check_parents AFTER INSERT ON mailbox_entries
  REFERENCING NEW TABLE AS roost_added FOR EACH STATEMENT EXECUTE FUNCTION roost_entries_check_parents();

CREATE FUNCTION roost_entries_follow_envelopes() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM mailbox_entries WHERE envelope_id = ANY (ARRAY(SELECT id FROM roost_gone));
  RETURN NULL;
END
$$;
CREATE TRIGGER envelopes_delete_entries AFTER DELETE ON envelopes
  REFERENCING OLD TABLE AS roost_gone FOR EACH STATEMENT EXECUTE FUNCTION roost_entries_follow_envelopes();

CREATE FUNCTION roost_entries_follow_mailboxes() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM mailbox_entries WHERE mailbox_id = ANY (ARRAY(SELECT agent_id FROM roost_gone));
  RETURN NULL;
END
$$;
CREATE TRIGGER mailboxes_delete_entries AFTER DELETE ON mailboxes
  REFERENCING OLD TABLE AS roost_gone FOR EACH STATEMENT EXECUTE FUNCTION roost_entries_follow_mailboxes();
