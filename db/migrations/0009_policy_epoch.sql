-- The accept path's policy epoch. An api node keeps the sender lookups of POST /messages (the
-- token's agent, the named recipients' policy, allowlist and blocks) for a while instead of reading
-- them again for every send; each kept lookup carries the epoch it was read at, and the accept
-- statement that commits the send checks that the epoch has not moved since (RS411), so a send is
-- still admitted under the policy current at its commit, as when every send read it afresh.
--
-- Any statement that changes what such a lookup reads bumps the epoch: an update or delete of
-- `agents` (token rotation, policy, allowlist, profile, deletion) and any change to `blocks`.
-- Creating an agent does not: no kept lookup holds a handle that did not exist. The bump is an
-- update of the one row, so it commits with the change it describes: a lookup that read the old
-- policy read the old epoch too. Policy changes are administrative and rare; they serialize on
-- this row's lock until they commit.
CREATE TABLE policy_epoch (
  singleton  boolean PRIMARY KEY DEFAULT true CHECK (singleton),
  epoch      bigint NOT NULL
);
INSERT INTO policy_epoch (singleton, epoch) VALUES (true, 1);

CREATE FUNCTION roost_bump_policy_epoch() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  UPDATE policy_epoch SET epoch = epoch + 1 WHERE singleton;
  RETURN NULL;
END
$$;

CREATE TRIGGER agents_policy_epoch AFTER UPDATE OR DELETE ON agents
  FOR EACH STATEMENT EXECUTE FUNCTION roost_bump_policy_epoch();
CREATE TRIGGER blocks_policy_epoch AFTER INSERT OR UPDATE OR DELETE ON blocks
  FOR EACH STATEMENT EXECUTE FUNCTION roost_bump_policy_epoch();

-- True when `expected` is null (nothing kept: the send's policy was read afresh) or still the
-- current epoch; else RS411, failing the statement (and its transaction) whole. Volatile, so the
-- epoch is read when the check runs, after the statement's own snapshot was taken.
CREATE FUNCTION roost_assert_policy(expected bigint) RETURNS boolean
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
  IF expected IS NOT NULL AND expected <> (SELECT epoch FROM policy_epoch WHERE singleton) THEN
    RAISE EXCEPTION 'accept batch is stale: the senders'' or recipients'' policy changed' USING ERRCODE = 'RS411';
  END IF;
  RETURN true;
END
$$;
