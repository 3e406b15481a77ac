-- The accept path's policy epoch. An api node keeps the sender lookups of POST /messages (the
-- token's agent, the named recipients' policy, allowlist and blocks) for a while instead of reading
-- them again for every send; each kept lookup carries the epoch it was read at, and the commit of a
-- send admitted by a kept lookup checks that the epoch has not moved since (RS411): the send then
-- stores nothing and is looked up afresh, so it is decided on policy at least as new as a fresh
-- lookup would have read.
--
-- What moves the epoch: a change to a live agent's handle, token, policy, allowlist, content guard
-- or deletion mark (its profile and retention do not count: the accept path does not read them), a
-- live agent's row deleted, and a block added, removed or changed. A statement that changes no
-- such row does not move it, nor does creating an agent (no kept lookup holds a handle that did not
-- exist). The triggers are deferred row triggers, so the bump runs at the end of the transaction
-- that made the change and commits with it: a lookup that read the old policy read the old epoch
-- too, and the epoch row is locked only from that end to the commit, not through a long
-- transaction (an organization's deletion). One bump per transaction (a transaction-local flag).
--
-- `roost.policy_epoch_bumped` is Roost's own transaction-local flag: it must never be set for a
-- session or a role (ALTER ROLE … SET, PGOPTIONS), which would stop the bumps.
--
-- The epoch jumps to at least the current time in microseconds, so a database restored or failed
-- over to a point before some bumps never hands out an epoch that a kept lookup already holds for
-- other data.
CREATE TABLE policy_epoch (
  singleton  boolean PRIMARY KEY DEFAULT true CHECK (singleton),
  epoch      bigint NOT NULL
);
INSERT INTO policy_epoch (singleton, epoch) VALUES (true, 1);

CREATE FUNCTION roost_bump_policy_epoch() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF current_setting('roost.policy_epoch_bumped', true) IS DISTINCT FROM 'on' THEN
    UPDATE policy_epoch
       SET epoch = greatest(epoch + 1, (extract(epoch FROM clock_timestamp()) * 1000000)::bigint)
     WHERE singleton;
    PERFORM set_config('roost.policy_epoch_bumped', 'on', true);
  END IF;
  RETURN NULL;
END
$$;

CREATE CONSTRAINT TRIGGER agents_policy_epoch_update AFTER UPDATE ON agents
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
  WHEN (OLD.deleted_at IS NULL AND
        (OLD.handle, OLD.token_hash, OLD.policy, OLD.allowlist, OLD.content_guard, OLD.deleted_at)
        IS DISTINCT FROM
        (NEW.handle, NEW.token_hash, NEW.policy, NEW.allowlist, NEW.content_guard, NEW.deleted_at))
  EXECUTE FUNCTION roost_bump_policy_epoch();
CREATE CONSTRAINT TRIGGER agents_policy_epoch_delete AFTER DELETE ON agents
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
  WHEN (OLD.deleted_at IS NULL)
  EXECUTE FUNCTION roost_bump_policy_epoch();
CREATE CONSTRAINT TRIGGER blocks_policy_epoch AFTER INSERT OR UPDATE OR DELETE ON blocks
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
  EXECUTE FUNCTION roost_bump_policy_epoch();

-- True when `expected` is null (no kept lookup: the send's policy was read afresh) or still the
-- current epoch; else RS411, failing the statement (and its transaction) whole. Volatile, so the
-- epoch is read when the check runs (the accept statement runs it after its writes).
CREATE FUNCTION roost_assert_policy(expected bigint) RETURNS boolean
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
  IF expected IS NOT NULL AND expected <> (SELECT epoch FROM policy_epoch WHERE singleton) THEN
    RAISE EXCEPTION 'accept batch is stale: the senders'' or recipients'' policy changed' USING ERRCODE = 'RS411';
  END IF;
  RETURN true;
END
$$;
