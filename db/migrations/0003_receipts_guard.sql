-- Receipts (EXTENSIONS.md §2) are ordinary envelopes; these columns mark the ones that carry a
-- roost.receipt/v1 part so status and receipt listings are index scans, and they go with the
-- envelope they answer (cascade) when retention or a deletion removes it.
ALTER TABLE envelopes ADD COLUMN receipt_for text COLLATE "C" REFERENCES envelopes (id) ON DELETE CASCADE;
ALTER TABLE envelopes ADD COLUMN receipt_status text
  CHECK (receipt_status IN ('accepted', 'rejected', 'deferred', 'needs_confirmation', 'applied', 'blocked'));
CREATE INDEX envelopes_receipts ON envelopes (receipt_for, created_at, id) WHERE receipt_for IS NOT NULL;

-- Content guard (EXTENSIONS.md §4): the finding codes a sender overrode in block mode.
ALTER TABLE envelopes ADD COLUMN guard_override text[];
