-- Schedules (EXTENSIONS.md §3): Roost sends an ordinary envelope on the owner's behalf, now and
-- then. The state lives here; worker jobs are only triggers. A firing is claimed with a lease
-- (lease_until) so a worker that dies mid-firing is replaced after the lease, and run n always
-- sends the same deterministic envelope id, so a repeated firing is an idempotent replay.
CREATE TABLE schedules (
  id                text COLLATE "C" PRIMARY KEY,
  owner_id          bigint NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
  status            text NOT NULL CHECK (status IN ('active', 'paused', 'completed', 'cancelled', 'failed')),
  envelope          text NOT NULL,
  interval_ms       bigint CHECK (interval_ms IS NULL OR interval_ms > 0),
  next_run_at       bigint,
  last_sent_at      bigint,
  last_envelope_id  text COLLATE "C",
  send_count        integer NOT NULL DEFAULT 0,
  max_count         integer CHECK (max_count IS NULL OR max_count > 0),
  end_at            bigint,
  last_error        text,
  lease_until       bigint,
  created_at        bigint NOT NULL,
  updated_at        bigint NOT NULL
);
CREATE INDEX schedules_due ON schedules (next_run_at) WHERE status = 'active';
CREATE INDEX schedules_owner ON schedules (owner_id, created_at, id);

-- Retention (EXTENSIONS.md §6): the newest (created_at, envelope_id) purged from each mailbox, so
-- a resume cursor older than it learns it missed something (cursor.expired). Kept apart from
-- `mailboxes` so purging never contends with the accept path's mailbox lock.
CREATE TABLE retention_marks (
  mailbox_id          bigint PRIMARY KEY REFERENCES mailboxes (agent_id) ON DELETE CASCADE,
  purged_created_at   bigint NOT NULL,
  purged_envelope_id  text COLLATE "C" NOT NULL
);
