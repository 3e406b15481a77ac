-- Deleting an agent keeps what it delivered (EXTENSIONS.md §5). Before this, envelopes.sender_id
-- cascaded, so deleting an agent erased its envelopes from every recipient's mailbox, other
-- organizations' included. Now a deleted agent stays as a tombstone: `deleted_at` set, no token,
-- no mailbox, no allowlist, blocks, schedules or pending files; its handle stays taken (the unique
-- index answers 409) while any envelope it sent is stored. The row itself goes once retention has
-- purged the last of them, which frees the handle.
--
-- No row changes here: before this migration a deleted agent left nothing behind, so every stored
-- agent is live and every envelope's sender exists.
ALTER TABLE agents ADD COLUMN deleted_at bigint;
ALTER TABLE agents ALTER COLUMN token_hash DROP NOT NULL;
ALTER TABLE agents ADD CONSTRAINT agents_live_has_token
  CHECK ((deleted_at IS NULL) = (token_hash IS NOT NULL));
-- The retention worker's walk over tombstones.
CREATE INDEX agents_deleted ON agents (id) WHERE deleted_at IS NOT NULL;

-- An agent row with stored envelopes cannot be removed by any path: the database refuses
-- rather than erasing delivered mail. (Validating scans envelopes once; the old constraint
-- already guaranteed every row satisfies it.)
ALTER TABLE envelopes DROP CONSTRAINT envelopes_sender_id_fkey;
ALTER TABLE envelopes ADD CONSTRAINT envelopes_sender_id_fkey
  FOREIGN KEY (sender_id) REFERENCES agents (id) ON DELETE NO ACTION;
