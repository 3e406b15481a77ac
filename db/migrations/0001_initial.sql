-- Roost initial schema. Times are integer milliseconds since the epoch (bigint).
-- Ids and handles use the "C" collation so ordering is byte order, as ASMTP cursors require.

CREATE TABLE orgs (
  name              text COLLATE "C" PRIMARY KEY,
  admin_token_hash  text NOT NULL UNIQUE,
  retention_days    integer CHECK (retention_days IS NULL OR retention_days > 0),
  content_guard     text NOT NULL DEFAULT 'warn' CHECK (content_guard IN ('off', 'warn', 'block')),
  max_agents        integer CHECK (max_agents IS NULL OR max_agents >= 0),
  created_at        bigint NOT NULL,
  updated_at        bigint NOT NULL
);

CREATE TABLE agents (
  id                bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  handle            text COLLATE "C" NOT NULL UNIQUE,
  owner             text COLLATE "C" NOT NULL,
  token_hash        text NOT NULL UNIQUE,
  policy            text NOT NULL CHECK (policy IN ('allowlist', 'open')),
  allowlist         text[] COLLATE "C" NOT NULL DEFAULT '{}',
  display_name      text NOT NULL,
  description       text,
  card_body         text,
  visibility        text NOT NULL CHECK (visibility IN ('public', 'private')),
  content_guard     text CHECK (content_guard IN ('off', 'warn', 'block')),
  retention_days    integer CHECK (retention_days IS NULL OR retention_days > 0),
  created_at        bigint NOT NULL,
  updated_at        bigint NOT NULL
);
CREATE INDEX agents_owner ON agents (owner, handle);

CREATE TABLE blocks (
  agent_id          bigint NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
  blocked_handle    text COLLATE "C" NOT NULL,
  created_at        bigint NOT NULL,
  PRIMARY KEY (agent_id, blocked_handle)
);

-- One row per agent: the mailbox lock. `seq` and `created_at` of new entries are allocated
-- under this row's lock inside the accept transaction (DESIGN.md, Storage).
CREATE TABLE mailboxes (
  agent_id          bigint PRIMARY KEY REFERENCES agents (id) ON DELETE CASCADE,
  last_seq          bigint NOT NULL DEFAULT 0,
  last_created_at   bigint NOT NULL DEFAULT 0
);

-- One row per accepted envelope. `body` is the canonical stored JSON text, byte-exact, so
-- GET returns it unchanged and an idempotent retry compares exactly. `header` is the
-- envelope.notify JSON text (no body content), built once under the mailbox locks.
CREATE TABLE envelopes (
  id                text COLLATE "C" PRIMARY KEY,
  sender_id         bigint NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
  created_at        bigint NOT NULL,
  received_ms       bigint NOT NULL,
  body              text NOT NULL,
  header            text NOT NULL,
  recipients        text[] COLLATE "C" NOT NULL,
  self_addressed    boolean NOT NULL,
  search            tsvector NOT NULL
);
-- direction=out|both: the sender's feed as a range scan.
CREATE INDEX envelopes_sender_feed ON envelopes (sender_id, created_at, id);
CREATE INDEX envelopes_search ON envelopes USING gin (search);

-- One row per (recipient mailbox, envelope). Every listing is a range scan on one of these
-- indexes, and every query names the mailbox, so the table can be hash-partitioned by
-- mailbox_id without changing a query.
CREATE TABLE mailbox_entries (
  mailbox_id        bigint NOT NULL REFERENCES mailboxes (agent_id) ON DELETE CASCADE,
  seq               bigint NOT NULL,
  envelope_id       text COLLATE "C" NOT NULL REFERENCES envelopes (id) ON DELETE CASCADE,
  created_at        bigint NOT NULL,
  kind              text NOT NULL CHECK (kind IN ('to', 'cc')),
  read              boolean NOT NULL DEFAULT false,
  read_at           bigint,
  PRIMARY KEY (mailbox_id, seq)
);
CREATE UNIQUE INDEX mailbox_entries_feed ON mailbox_entries (mailbox_id, created_at, envelope_id);
CREATE INDEX mailbox_entries_unread ON mailbox_entries (mailbox_id, created_at, envelope_id) WHERE NOT read;
CREATE INDEX mailbox_entries_envelope ON mailbox_entries (envelope_id);

CREATE TABLE files (
  id                text COLLATE "C" PRIMARY KEY,
  uploader_id       bigint NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
  filename          text NOT NULL,
  content_type      text NOT NULL,
  size_bytes        integer NOT NULL,
  bytes             bytea NOT NULL,
  envelope_id       text COLLATE "C" REFERENCES envelopes (id) ON DELETE CASCADE,
  created_at        bigint NOT NULL,
  expires_at        bigint NOT NULL
);
CREATE INDEX files_envelope ON files (envelope_id) WHERE envelope_id IS NOT NULL;
CREATE INDEX files_uploader ON files (uploader_id);
