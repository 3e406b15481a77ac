import type pg from 'pg';

/**
 * What a request may have changed, read directly in Postgres: row counts (with digests of the rows
 * a refused PATCH could touch) and, finer, one digest per table, optionally restricted to one
 * tenant (the agents `@<owner>.*` and everything they own). DESIGN.md invariant 6 ("bad input
 * changes nothing") and 7 ("one tenant never touches another") are asserted with these.
 */
export interface Counts {
  envelopes: number;
  mailbox_entries: number;
  read_entries: number;
  agents: number;
  files: number;
  claimed_files: number;
  blocks: number;
  orgs: number;
  /** Every column of every agent (profile, policy, allowlist, token hash, updated_at). */
  agents_digest: string;
  /** Every mailbox's `last_seq` and `last_created_at`. */
  mailboxes_digest: string;
}

export async function counts(db: pg.Pool): Promise<Counts> {
  const { rows } = await db.query<Counts>(`
    select
      (select count(*) from envelopes)::int as envelopes,
      (select count(*) from mailbox_entries)::int as mailbox_entries,
      (select count(*) from mailbox_entries where read)::int as read_entries,
      (select count(*) from agents)::int as agents,
      (select count(*) from files)::int as files,
      (select count(*) from files where envelope_id is not null)::int as claimed_files,
      (select count(*) from blocks)::int as blocks,
      (select count(*) from orgs)::int as orgs,
      (select md5(coalesce(string_agg(a::text, '|' order by a.id), '')) from agents a) as agents_digest,
      (select md5(coalesce(string_agg(m::text, '|' order by m.agent_id), '')) from mailboxes m) as mailboxes_digest`);
  return rows[0];
}

/** One md5 per table (row count prefixed, so a diff shows which table moved and by how much). */
export type TableDigests = Record<
  | 'orgs'
  | 'agents'
  | 'blocks'
  | 'mailboxes'
  | 'envelopes'
  | 'mailbox_entries'
  | 'files'
  | 'schedules'
  | 'retention_marks',
  string
>;

/**
 * Digest of every row of every table, or with `owner` only of the rows of that tenant: its
 * organization, its agents, and what they own (blocks, mailboxes, sent envelopes, mailbox entries,
 * uploads, schedules, retention marks). Envelopes and file bytes are immutable: their digest takes
 * ids, stamps and sizes, not the (possibly megabyte) texts, so a digest stays cheap.
 */
export async function digests(db: pg.Pool, owner?: string): Promise<TableDigests> {
  const tenant = owner !== undefined;
  const mine = (column: string) => (tenant ? `where ${column} in (select id from agents where owner = $1)` : '');
  const table = (name: string, alias: string, row: string, order: string, where = '') =>
    `(select count(*)::text || ':' || md5(coalesce(string_agg(${row}, '|' order by ${order}), '')) from ${name} ${alias} ${where}) as ${name}`;
  const { rows } = await db.query<TableDigests>(
    `select
      ${table('orgs', 'o', 'o::text', 'o.name', tenant ? 'where o.name = $1' : '')},
      ${table('agents', 'a', 'a::text', 'a.id', tenant ? 'where a.owner = $1' : '')},
      ${table('blocks', 'b', 'b::text', 'b.agent_id, b.blocked_handle', mine('b.agent_id'))},
      ${table('mailboxes', 'm', 'm::text', 'm.agent_id', mine('m.agent_id'))},
      ${table('envelopes', 'e', "concat_ws(',', e.id, e.sender_id, e.created_at, e.received_ms, pg_column_size(e.body), pg_column_size(e.header), e.recipients::text, e.receipt_for, e.receipt_status)", 'e.id', mine('e.sender_id'))},
      ${table('mailbox_entries', 'x', 'x::text', 'x.mailbox_id, x.seq', mine('x.mailbox_id'))},
      ${table('files', 'f', "concat_ws(',', f.id, f.uploader_id, f.filename, f.content_type, f.size_bytes, f.envelope_id)", 'f.id', mine('f.uploader_id'))},
      ${table('schedules', 's', "concat_ws(',', s.id, s.owner_id, s.status, pg_column_size(s.envelope), s.interval_ms, s.next_run_at, s.last_sent_at, s.last_envelope_id, s.send_count, s.max_count, s.end_at, s.last_error, s.lease_until, s.updated_at)", 's.id', mine('s.owner_id'))},
      ${table('retention_marks', 'r', 'r::text', 'r.mailbox_id', mine('r.mailbox_id'))}`,
    tenant ? [owner] : [],
  );
  return rows[0];
}
