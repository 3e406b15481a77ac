import { Injectable } from '@nestjs/common';
import { sql, type CompiledQuery, type Kysely, type RawBuilder, type Selectable } from 'kysely';
import { bigintArray, textArray } from './array-params';
import type { Database, SqlSession } from './database';
import type { DB, EnvelopesTable, MailboxEntriesTable, MailboxesTable } from './schema';
import { InjectDatabase } from './tokens';

export type MailboxState = Selectable<MailboxesTable>;

/** An envelope to insert: its columns, with the text to index in place of the tsvector. */
export type EnvelopeRow = Omit<Selectable<EnvelopesTable>, 'search'> & {
  /** Plain text that full-text search indexes (subject, text and data parts). */
  search_text: string;
};

/** A mailbox entry to insert (unread: `read`/`read_at` take their defaults). */
export type EntryRow = Omit<Selectable<MailboxEntriesTable>, 'read' | 'read_at'>;

export type StoredEnvelopeRow = Pick<
  Selectable<EnvelopesTable>,
  'id' | 'sender_id' | 'created_at' | 'received_ms' | 'body' | 'recipients'
>;

/** The accept transaction: one session; its statements run as named prepared statements. */
export type Tx = SqlSession;

/**
 * The accept transaction's statements. Each takes the transaction it runs in; the service
 * decides what to write and in which order.
 */
@Injectable()
export class EnvelopesRepository {
  private readonly db: Kysely<DB>;

  constructor(@InjectDatabase() private readonly database: Database) {
    this.db = database.db;
  }

  transaction<T>(fn: (trx: Tx) => Promise<T>): Promise<T> {
    return this.database.transaction(fn);
  }

  /** Lock the recipients' mailbox rows in id order (no deadlock between multi-recipient sends). */
  lockMailboxes(trx: Tx, agentIds: readonly number[]): Promise<MailboxState[]> {
    return trx.prepared('roost_lock_mailboxes', lockMailboxesSql(agentIds).compile(this.db));
  }

  /** Insert envelopes (in id order); returns the ids that were new. An existing id is skipped. */
  async insertEnvelopes(trx: Tx, rows: readonly EnvelopeRow[]): Promise<Set<string>> {
    const inserted = await trx.prepared<{ id: string }>(
      'roost_insert_envelopes',
      insertEnvelopesSql(rows).compile(this.db),
    );
    return new Set(inserted.map((row) => row.id));
  }

  async insertEntries(trx: Tx, rows: readonly EntryRow[]): Promise<void> {
    if (rows.length === 0) return;
    await trx.prepared('roost_insert_entries', insertEntriesSql(rows).compile(this.db));
  }

  async advanceMailboxes(trx: Tx, states: readonly MailboxState[]): Promise<void> {
    if (states.length === 0) return;
    await trx.prepared('roost_advance_mailboxes', advanceMailboxesSql(states).compile(this.db));
  }

  /**
   * The common case of an accept transaction in one statement: the three statements above as
   * data-modifying CTEs. Returns the ids inserted; when an id already existed the caller must roll
   * back (its entries would point at the other envelope) and take the statement-by-statement path.
   */
  async insertAll(
    trx: Tx,
    envelopes: readonly EnvelopeRow[],
    entries: readonly EntryRow[],
    states: readonly MailboxState[],
  ): Promise<Set<string>> {
    const query = acceptBatchSql(envelopes, entries, states);
    const inserted = await trx.prepared<{ id: string }>('roost_accept_batch', query.compile(this.db));
    return new Set(inserted.map((row) => row.id));
  }

  /**
   * `insertAll` as one statement outside any transaction and without locking first: it writes
   * against mailbox states the caller remembers (`expectedSeqs`, one per state) and fails whole, writing
   * nothing, when a mailbox moved on since (`stale`) or an envelope id is taken (`id_taken`).
   */
  async insertAllIfCurrent(
    envelopes: readonly EnvelopeRow[],
    entries: readonly EntryRow[],
    states: readonly MailboxState[],
    expectedSeqs: readonly number[],
  ): Promise<'written' | 'stale' | 'id_taken'> {
    const query = acceptIfCurrentSql(envelopes, entries, states, expectedSeqs);
    try {
      await this.database.prepared('roost_accept_if_current', query.compile(this.db));
      return 'written';
    } catch (error) {
      const code = (error as { code?: string }).code;
      if (code === 'RS410') return 'id_taken'; // roost_assert_accept, migration 0004
      // RS409 from roost_assert_accept; an entry seq or a mailbox another writer took or deleted.
      if (code === 'RS409' || code === '23505' || code === '23503') return 'stale';
      throw error;
    }
  }

  /** Bind pending files of `uploaderId` to the envelope; returns how many were claimed. */
  async claimFiles(trx: Tx, envelopeId: string, uploaderId: number, fileIds: readonly string[]): Promise<number> {
    const query = this.db
      .updateTable('files')
      .set({ envelope_id: envelopeId })
      .where('id', '=', sql<string>`any(${[...fileIds]}::text[])`)
      .where('uploader_id', '=', uploaderId)
      .where('envelope_id', 'is', null)
      .returning('id')
      .compile();
    return (await trx.prepared('roost_claim_files', query)).length;
  }

  /**
   * The accept path's named statements with empty arrays: each writes and locks nothing (the assert
   * sees 0 = 0), so start-up can parse and plan them on every pooled connection (`Database.warm`).
   */
  warmStatements(): Array<{ name: string; query: CompiledQuery }> {
    return [
      { name: 'roost_accept_if_current', query: acceptIfCurrentSql([], [], [], []).compile(this.db) },
      { name: 'roost_lock_mailboxes', query: lockMailboxesSql([]).compile(this.db) },
      { name: 'roost_accept_batch', query: acceptBatchSql([], [], []).compile(this.db) },
    ];
  }

  /** The stored envelope with this id, for the idempotency decision of ASMTP.md §2.6. */
  findStored(id: string): Promise<StoredEnvelopeRow | undefined> {
    return this.db
      .selectFrom('envelopes')
      .select(['id', 'sender_id', 'created_at', 'received_ms', 'body', 'recipients'])
      .where('id', '=', id)
      .executeTakeFirst();
  }
}

function lockMailboxesSql(agentIds: readonly number[]): RawBuilder<MailboxState> {
  const sorted = [...agentIds].sort((a, b) => a - b);
  return sql<MailboxState>`
      select agent_id, last_seq, last_created_at from mailboxes
      where agent_id = any(${bigintArray(sorted)}::bigint[])
      order by agent_id
      for update`;
}

function acceptBatchSql(
  envelopes: readonly EnvelopeRow[],
  entries: readonly EntryRow[],
  states: readonly MailboxState[],
): RawBuilder<{ id: string }> {
  return sql<{ id: string }>`
      with inserted as (${insertEnvelopesSql(envelopes)}),
      entries as (${insertEntriesSql(entries)}),
      advanced as (${advanceMailboxesSql(states)})
      select id from inserted`;
}

function acceptIfCurrentSql(
  envelopes: readonly EnvelopeRow[],
  entries: readonly EntryRow[],
  states: readonly MailboxState[],
  expectedSeqs: readonly number[],
): RawBuilder<{ ok: boolean }> {
  return sql<{ ok: boolean }>`
      with inserted as (${insertEnvelopesSql(envelopes)}),
      entries as (${insertEntriesSql(entries)}),
      advanced as (${advanceMailboxesSql(states, expectedSeqs)})
      select roost_assert_accept(
        (select count(*) from advanced) = ${states.length}::bigint,
        (select count(*) from inserted) = ${envelopes.length}::bigint) as ok`;
}

/** Envelopes in id order (a consistent lock order between concurrent batches); `returning id`. */
function insertEnvelopesSql(rows: readonly EnvelopeRow[]): RawBuilder<{ id: string }> {
  const sorted = [...rows].sort((a, b) => (a.id < b.id ? -1 : 1));
  const jsonOrNull = (value: string[] | null) => (value ? JSON.stringify(value) : null);
  return sql<{ id: string }>`
    insert into envelopes (id, sender_id, created_at, received_ms, body, header, recipients, self_addressed, search,
                           receipt_for, receipt_status, guard_override)
    select t.id, t.sender_id, t.created_at, t.received_ms, t.body, t.header,
           array(select jsonb_array_elements_text(t.recipients::jsonb)),
           t.self_addressed, to_tsvector('simple', t.search_text), t.receipt_for, t.receipt_status,
           case when t.guard_override is null then null else array(select jsonb_array_elements_text(t.guard_override::jsonb)) end
    from unnest(
      ${textArray(sorted.map((r) => r.id))}::text[], ${bigintArray(sorted.map((r) => r.sender_id))}::bigint[],
      ${bigintArray(sorted.map((r) => r.created_at))}::bigint[], ${bigintArray(sorted.map((r) => r.received_ms))}::bigint[],
      ${textArray(sorted.map((r) => r.body))}::text[], ${textArray(sorted.map((r) => r.header))}::text[],
      ${textArray(sorted.map((r) => JSON.stringify(r.recipients)))}::text[], ${sorted.map((r) => r.self_addressed)}::boolean[],
      ${textArray(sorted.map((r) => r.search_text))}::text[], ${textArray(sorted.map((r) => r.receipt_for))}::text[],
      ${textArray(sorted.map((r) => r.receipt_status))}::text[], ${textArray(sorted.map((r) => jsonOrNull(r.guard_override)))}::text[]
    ) with ordinality as t(id, sender_id, created_at, received_ms, body, header, recipients, self_addressed, search_text,
                           receipt_for, receipt_status, guard_override, n)
    order by t.n
    on conflict (id) do nothing
    returning id`;
}

function insertEntriesSql(rows: readonly EntryRow[]): RawBuilder<unknown> {
  return sql`
    insert into mailbox_entries (mailbox_id, seq, envelope_id, created_at, kind)
    select * from unnest(
      ${bigintArray(rows.map((r) => r.mailbox_id))}::bigint[], ${bigintArray(rows.map((r) => r.seq))}::bigint[],
      ${textArray(rows.map((r) => r.envelope_id))}::text[], ${bigintArray(rows.map((r) => r.created_at))}::bigint[],
      ${textArray(rows.map((r) => r.kind))}::text[]
    )`;
}

/**
 * Set each mailbox's state; given `expectedSeqs` (one per state), only where the mailbox still has
 * that `last_seq` (a compare-and-set). Returns the agent ids it updated.
 */
function advanceMailboxesSql(states: readonly MailboxState[], expectedSeqs?: readonly number[]): RawBuilder<unknown> {
  return sql`
    update mailboxes as m set last_seq = u.last_seq, last_created_at = u.last_created_at
    from unnest(
      ${bigintArray(states.map((s) => s.agent_id))}::bigint[], ${bigintArray(states.map((s) => s.last_seq))}::bigint[],
      ${bigintArray(states.map((s) => s.last_created_at))}::bigint[], ${bigintArray(expectedSeqs ?? states.map(() => null))}::bigint[]
    ) as u(agent_id, last_seq, last_created_at, expected_seq)
    where m.agent_id = u.agent_id${expectedSeqs ? sql` and m.last_seq = u.expected_seq` : sql``}
    returning m.agent_id`;
}
