import { Injectable } from '@nestjs/common';
import { sql, type Kysely, type RawBuilder, type Selectable } from 'kysely';
import type { Cursor } from '#domain';
import type { Database } from './database';
import type { DB, EnvelopesTable, MailboxEntriesTable } from './schema';
import { InjectDatabase } from './tokens';

export interface FeedPage {
  order: 'asc' | 'desc';
  limit: number;
  after?: Cursor;
}

type Envelope = Selectable<EnvelopesTable>;
type Entry = Selectable<MailboxEntriesTable>;

export type InFeedRow = Pick<Envelope, 'header' | 'created_at'> & Pick<Entry, 'envelope_id'>;

export type OutFeedRow = InFeedRow & Pick<Envelope, 'self_addressed'>;

export type BothFeedRow = InFeedRow & {
  /** null on rows where the caller is only the sender. */
  read: Entry['read'] | null;
  sent: boolean;
};

export type BodyRow = Pick<Envelope, 'id' | 'body'>;

export type SeqRow = InFeedRow & Pick<Entry, 'seq'>;

/** Keyset condition `(created_at, id) > cursor` (asc) or `<` (desc), strict, as ASMTP.md §3.5 requires. */
function after(createdAt: RawBuilder<unknown>, id: RawBuilder<unknown>, page: FeedPage): RawBuilder<unknown> {
  if (!page.after) return sql`true`;
  const op = page.order === 'asc' ? sql`>` : sql`<`;
  return sql`(${createdAt}, ${id}) ${op} (${page.after.created_at}::bigint, ${page.after.envelope_id}::text)`;
}

function direction(page: FeedPage): RawBuilder<unknown> {
  return page.order === 'asc' ? sql`asc` : sql`desc`;
}

/**
 * Mailbox listings and read state. Every method takes the caller's mailbox (agent) id: tenancy is
 * a parameter. Each listing is one range scan on an index of db/migrations/0001.
 */
@Injectable()
export class MailboxRepository {
  private readonly db: Kysely<DB>;

  constructor(@InjectDatabase() database: Database) {
    this.db = database.db;
  }

  /** The `in` feed: index `mailbox_entries_feed`, or `mailbox_entries_unread` with `unread=true`. */
  async listIn(mailboxId: number, page: FeedPage, unread?: boolean): Promise<InFeedRow[]> {
    const readFilter = unread === undefined ? sql`true` : unread ? sql`not m.read` : sql`m.read`;
    const dir = direction(page);
    const result = await sql<InFeedRow>`
      select e.header, m.created_at, m.envelope_id
      from mailbox_entries m join envelopes e on e.id = m.envelope_id
      where m.mailbox_id = ${mailboxId} and ${readFilter}
        and ${after(sql.ref('m.created_at'), sql.ref('m.envelope_id'), page)}
      order by m.created_at ${dir}, m.envelope_id ${dir}
      limit ${page.limit}`.execute(this.db);
    return result.rows;
  }

  /** The `out` feed: index `envelopes_sender_feed`. */
  async listOut(senderId: number, page: FeedPage): Promise<OutFeedRow[]> {
    const dir = direction(page);
    const result = await sql<OutFeedRow>`
      select e.header, e.created_at, e.id as envelope_id, e.self_addressed
      from envelopes e
      where e.sender_id = ${senderId} and ${after(sql.ref('e.created_at'), sql.ref('e.id'), page)}
      order by e.created_at ${dir}, e.id ${dir}
      limit ${page.limit}`.execute(this.db);
    return result.rows;
  }

  /** The `both` feed: a merge of the two range scans, each envelope once. */
  async listBoth(agentId: number, page: FeedPage): Promise<BothFeedRow[]> {
    const dir = direction(page);
    const result = await sql<BothFeedRow>`
      select * from (
        (select e.header, m.created_at, m.envelope_id, m.read, e.sender_id = ${agentId} as sent
         from mailbox_entries m join envelopes e on e.id = m.envelope_id
         where m.mailbox_id = ${agentId} and ${after(sql.ref('m.created_at'), sql.ref('m.envelope_id'), page)}
         order by m.created_at ${dir}, m.envelope_id ${dir}
         limit ${page.limit})
        union all
        (select e.header, e.created_at, e.id as envelope_id, null as read, true as sent
         from envelopes e
         where e.sender_id = ${agentId} and not e.self_addressed
           and ${after(sql.ref('e.created_at'), sql.ref('e.id'), page)}
         order by e.created_at ${dir}, e.id ${dir}
         limit ${page.limit})
      ) feed
      order by created_at ${dir}, envelope_id ${dir}
      limit ${page.limit}`.execute(this.db);
    return result.rows;
  }

  /**
   * Stored bodies of `ids` that `agentId` may read: a recipient's entry, or (Roost) its own sent
   * envelopes. Unentitled and unknown ids are simply absent.
   */
  async bodiesFor(agentId: number, ids: readonly string[]): Promise<BodyRow[]> {
    const result = await sql<BodyRow>`
      select e.id, e.body from envelopes e
      where e.id = any(${[...ids]}::text[])
        and (e.sender_id = ${agentId}
             or exists (select 1 from mailbox_entries m where m.mailbox_id = ${agentId} and m.envelope_id = e.id))`.execute(
      this.db,
    );
    return result.rows;
  }

  /** Mark the caller's entries read; returns the ids that went from unread to read. */
  async markRead(mailboxId: number, ids: readonly string[], now: number): Promise<Set<string>> {
    if (ids.length === 0) return new Set();
    const rows = await this.db
      .updateTable('mailbox_entries')
      .set({ read: true, read_at: now })
      .where('mailbox_id', '=', mailboxId)
      .where('envelope_id', '=', sql<string>`any(${[...ids]}::text[])`)
      .where('read', '=', false)
      .returning('envelope_id')
      .execute();
    return new Set(rows.map((row) => row.envelope_id));
  }

  /** Entries of one mailbox by `seq` range (gateway backfill and resume). */
  async entriesBySeq(mailboxId: number, afterSeq: number, throughSeq: number | null, limit: number): Promise<SeqRow[]> {
    const result = await sql<SeqRow>`
      select m.seq, e.header, m.created_at, m.envelope_id
      from mailbox_entries m join envelopes e on e.id = m.envelope_id
      where m.mailbox_id = ${mailboxId} and m.seq > ${afterSeq}
        and ${throughSeq === null ? sql`true` : sql`m.seq <= ${throughSeq}`}
      order by m.seq
      limit ${limit}`.execute(this.db);
    return result.rows;
  }

  /** The last allocated `seq` of each mailbox (absent ids: agent deleted, its mailbox gone). */
  async lastSeqs(mailboxIds: readonly number[]): Promise<Map<number, number>> {
    if (mailboxIds.length === 0) return new Map();
    const rows = await this.db
      .selectFrom('mailboxes')
      .select(['agent_id', 'last_seq'])
      .where('agent_id', '=', sql<number>`any(${[...mailboxIds]}::bigint[])`)
      .execute();
    return new Map(rows.map((row) => [row.agent_id, row.last_seq]));
  }

  /** The `seq` of the last entry at or before `cursor` in `(created_at, envelope_id)` order (0 if none). */
  async seqAtOrBefore(mailboxId: number, cursor: Cursor): Promise<number> {
    const result = await sql<{ seq: number }>`
      select m.seq from mailbox_entries m
      where m.mailbox_id = ${mailboxId}
        and (m.created_at, m.envelope_id) <= (${cursor.created_at}::bigint, ${cursor.envelope_id}::text)
      order by m.created_at desc, m.envelope_id desc
      limit 1`.execute(this.db);
    return result.rows[0]?.seq ?? 0;
  }
}
