import { Injectable } from '@nestjs/common';
import { sql, type Kysely, type Selectable } from 'kysely';
import type { Database } from './database';
import type { AgentsTable, DB, EnvelopesTable } from './schema';
import { InjectDatabase } from './tokens';

export type EnvelopeParties = Pick<Selectable<EnvelopesTable>, 'id' | 'sender_id'> & {
  sender_handle: Selectable<AgentsTable>['handle'];
  /** Does the caller hold a mailbox entry for it? */
  is_recipient: boolean;
};

export interface ReceiptRow {
  id: string;
  envelope_id: string;
  from: string;
  author_id: number;
  status: string;
  body: string;
  created_at: number;
}

export interface RecipientStatusRow {
  mailbox_id: number;
  handle: string;
  read: boolean;
  read_at: number | null;
  entry_created_at: number;
  status: string | null;
  receipt_at: number | null;
}

/** Receipts and delivery status. Every query names the envelope and the caller's own id. */
@Injectable()
export class ReceiptsRepository {
  private readonly db: Kysely<DB>;

  constructor(@InjectDatabase() database: Database) {
    this.db = database.db;
  }

  /** The envelope's sender and whether `agentId` is one of its recipients; undefined if unknown. */
  async parties(envelopeId: string, agentId: number): Promise<EnvelopeParties | undefined> {
    const result = await sql<EnvelopeParties>`
      select e.id, e.sender_id, a.handle as sender_handle,
             exists (select 1 from mailbox_entries m where m.mailbox_id = ${agentId} and m.envelope_id = e.id) as is_recipient
      from envelopes e join agents a on a.id = e.sender_id
      where e.id = ${envelopeId}`.execute(this.db);
    return result.rows[0];
  }

  /** Receipts answering `envelopeId`, oldest first; only those by `authorId` when given. */
  async list(envelopeId: string, authorId?: number): Promise<ReceiptRow[]> {
    const result = await sql<ReceiptRow>`
      select e.id, e.receipt_for as envelope_id, a.handle as "from", e.sender_id as author_id,
             e.receipt_status as status, e.body, e.created_at
      from envelopes e join agents a on a.id = e.sender_id
      where e.receipt_for = ${envelopeId}
        and ${authorId === undefined ? sql`true` : sql`e.sender_id = ${authorId}`}
      order by e.created_at, e.id`.execute(this.db);
    return result.rows;
  }

  /**
   * Per recipient of `envelopeId`, in the envelope's recipient order (`to`, then new `cc`, as in its
   * 202): read state and the latest receipt (append-only, latest wins); only `onlyMailboxId`'s row
   * when given.
   */
  async recipientStatus(envelopeId: string, onlyMailboxId?: number): Promise<RecipientStatusRow[]> {
    const result = await sql<RecipientStatusRow>`
      select m.mailbox_id, a.handle, m.read, m.read_at, m.created_at as entry_created_at,
             r.receipt_status as status, r.created_at as receipt_at
      from mailbox_entries m
      join agents a on a.id = m.mailbox_id
      join envelopes subject on subject.id = m.envelope_id
      left join lateral (
        select e.receipt_status, e.created_at from envelopes e
        where e.receipt_for = ${envelopeId} and e.sender_id = m.mailbox_id
        order by e.created_at desc, e.id desc limit 1
      ) r on true
      where m.envelope_id = ${envelopeId}
        and ${onlyMailboxId === undefined ? sql`true` : sql`m.mailbox_id = ${onlyMailboxId}`}
      order by array_position(subject.recipients, a.handle), m.mailbox_id`.execute(this.db);
    return result.rows;
  }
}
