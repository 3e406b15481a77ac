import type { ColumnType, Generated } from 'kysely';

/** Kysely's view of the tables in db/migrations. bigint columns are parsed to JS numbers. */
export interface OrgsTable {
  name: string;
  admin_token_hash: string;
  retention_days: number | null;
  content_guard: ColumnType<'off' | 'warn' | 'block', 'off' | 'warn' | 'block' | undefined, 'off' | 'warn' | 'block'>;
  max_agents: number | null;
  created_at: number;
  updated_at: number;
}

export interface AgentsTable {
  id: Generated<number>;
  handle: string;
  owner: string;
  /** null once the agent is deleted (a tombstone kept while envelopes it sent are stored). */
  token_hash: string | null;
  policy: 'allowlist' | 'open';
  allowlist: ColumnType<string[], string[] | undefined, string[]>;
  display_name: string;
  description: string | null;
  card_body: string | null;
  visibility: 'public' | 'private';
  content_guard: 'off' | 'warn' | 'block' | null;
  retention_days: number | null;
  created_at: number;
  updated_at: number;
  /** Set when the agent was deleted (migration 0005); such a row is no agent to any query but those naming an envelope's sender. */
  deleted_at: ColumnType<number | null, number | null | undefined, number | null>;
}

export interface BlocksTable {
  agent_id: number;
  blocked_handle: string;
  created_at: number;
}

export interface MailboxesTable {
  agent_id: number;
  last_seq: ColumnType<number, number | undefined, number>;
  last_created_at: ColumnType<number, number | undefined, number>;
}

export interface EnvelopesTable {
  id: string;
  sender_id: number;
  created_at: number;
  received_ms: number;
  body: string;
  header: string;
  recipients: string[];
  self_addressed: boolean;
  search: ColumnType<string, unknown, never>;
  /** For a receipt envelope: the envelope it answers, and its status. */
  receipt_for: string | null;
  receipt_status: string | null;
  /** Content guard finding codes the sender overrode in block mode. */
  guard_override: string[] | null;
}

export interface MailboxEntriesTable {
  mailbox_id: number;
  seq: number;
  envelope_id: string;
  created_at: number;
  kind: 'to' | 'cc';
  read: ColumnType<boolean, boolean | undefined, boolean>;
  read_at: number | null;
}

export interface FilesTable {
  id: string;
  uploader_id: number;
  filename: string;
  content_type: string;
  size_bytes: number;
  bytes: Buffer;
  envelope_id: string | null;
  created_at: number;
  expires_at: number;
}

export interface SchedulesTable {
  id: string;
  owner_id: number;
  status: 'active' | 'paused' | 'completed' | 'cancelled' | 'failed';
  envelope: string;
  interval_ms: number | null;
  next_run_at: number | null;
  last_sent_at: number | null;
  last_envelope_id: string | null;
  send_count: ColumnType<number, number | undefined, number>;
  max_count: number | null;
  end_at: number | null;
  last_error: string | null;
  lease_until: number | null;
  created_at: number;
  updated_at: number;
}

export interface RetentionMarksTable {
  mailbox_id: number;
  purged_created_at: number;
  purged_envelope_id: string;
}

export interface SchemaMigrationsTable {
  version: string;
  applied_at: number;
}

export interface DB {
  orgs: OrgsTable;
  agents: AgentsTable;
  blocks: BlocksTable;
  mailboxes: MailboxesTable;
  envelopes: EnvelopesTable;
  mailbox_entries: MailboxEntriesTable;
  files: FilesTable;
  schedules: SchedulesTable;
  retention_marks: RetentionMarksTable;
  schema_migrations: SchemaMigrationsTable;
}
