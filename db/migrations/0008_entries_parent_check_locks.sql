-- The parent check of migration 0007 (roost_entries_check_parents, once per statement that inserts
-- mailbox entries) had two faults, both fixed here by replacing the function (the trigger stays):
--   * its plan could scan a whole table. plpgsql prepares each query once per connection and,
--     after a few calls, keeps a generic plan. On a young database that plan was chosen while
--     `envelopes` and `mailboxes` were tiny: a sequential scan, kept as the tables grew (0.01 →
--     ~0.47 ms per statement at 20k envelopes) until something invalidated it. The function now runs
--     with enable_seqscan off, so every parent is found by its primary key whatever the sizes and
--     whenever the plan was made;
--   * it took no lock on the parents. The accept path holds them anyway (the mailbox rows it
--     advances in the same statement or locked FOR UPDATE, the envelopes it inserts in the same
--     statement), but another writer of entries could check an envelope or mailbox that a
--     concurrent transaction was deleting: the delete's trigger (envelopes_delete_entries,
--     mailboxes_delete_entries) does not see the uncommitted entry, and both commit, leaving an
--     entry without its parent. The check now reads the parents FOR KEY SHARE, as the row-level
--     foreign keys before 0007 did: a concurrent delete waits for the inserting transaction (and
--     then its trigger deletes the committed entry), or, if the delete came first, the insert waits
--     for it and fails (23503) once it commits.
-- No row changes; the trigger is unchanged and keeps firing during the replacement.
CREATE OR REPLACE FUNCTION roost_entries_check_parents() RETURNS trigger
LANGUAGE plpgsql
SET enable_seqscan = off
AS $$
DECLARE
  mailbox_ids bigint[] := ARRAY(SELECT DISTINCT mailbox_id FROM roost_added);
  envelope_ids text[] := ARRAY(SELECT DISTINCT envelope_id FROM roost_added);
BEGIN
  IF (SELECT count(*) FROM (SELECT FROM mailboxes WHERE agent_id = ANY (mailbox_ids) FOR KEY SHARE) AS held)
     <> cardinality(mailbox_ids) THEN
    RAISE EXCEPTION 'mailbox entry without its mailbox' USING ERRCODE = 'foreign_key_violation';
  END IF;
  IF (SELECT count(*) FROM (SELECT FROM envelopes WHERE id = ANY (envelope_ids) FOR KEY SHARE) AS held)
     <> cardinality(envelope_ids) THEN
    RAISE EXCEPTION 'mailbox entry without its envelope' USING ERRCODE = 'foreign_key_violation';
  END IF;
  RETURN NULL;
END
$$;
