-- The accept path's common case runs as one statement without an explicit transaction or
-- `FOR UPDATE`: an api node writes against the mailbox states its own last commits left, and this
-- check makes the statement fail (and roll back whole) when another writer moved a mailbox on
-- since (RS409), or when an envelope id of the batch was already taken (RS410). The node then
-- takes the locking path.
CREATE FUNCTION roost_assert_accept(mailboxes_current boolean, ids_new boolean) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
  IF NOT mailboxes_current THEN
    RAISE EXCEPTION 'accept batch is stale: a mailbox moved on' USING ERRCODE = 'RS409';
  END IF;
  IF NOT ids_new THEN
    RAISE EXCEPTION 'accept batch is stale: an envelope id is taken' USING ERRCODE = 'RS410';
  END IF;
  RETURN true;
END
$$;
