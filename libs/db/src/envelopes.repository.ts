import { Injectable } from '@nestjs/common';
import { CompiledQuery, sql, type Kysely, type RawBuilder, type Selectable } from 'kysely';
import { bigintArray, textArray } from './array-params';
import type { Database, SqlSession } from './database';
import type { DB, EnvelopesTable, MailboxEntriesTable, MailboxesTable } from './schema';
import { plainSearchLexemes } from './search-lexemes';
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
  /** The SQL text of each named statement, compiled once (see `statement`). */
  private readonly texts = new Map<string, string>();

  constructor(@InjectDatabase() private readonly database: Database) {
    this.db = database.db;
  }

  transaction<T>(fn: (trx: Tx) => Promise<T>): Promise<T> {
    return this.database.transaction(fn);
  }

  /** Lock the recipients' mailbox rows in id order (no deadlock between multi-recipient sends). */
  lockMailboxes(trx: Tx, agentIds: readonly number[]): Promise<MailboxState[]> {
    const sorted = [...agentIds].sort((a, b) => a - b);
    return trx.prepared(
      'roost_lock_mailboxes',
      this.statement('roost_lock_mailboxes', lockMailboxesSql, [bigintArray(sorted)]),
    );
  }

  /**
   * In the transaction: fail it (`PolicyStale`'s RS411, reported as `false`) when the policy epoch
   * moved on from `epoch` (migration 0009), the kept sender lookups its sends were admitted by.
   */
  async policyCurrent(trx: Tx, epoch: number): Promise<boolean> {
    try {
      await trx.prepared('roost_assert_policy', this.statement('roost_assert_policy', assertPolicySql, [epoch]));
      return true;
    } catch (error) {
      if ((error as { code?: string }).code === 'RS411') return false;
      throw error;
    }
  }

  /** Insert envelopes (in id order); returns the ids that were new. An existing id is skipped. */
  async insertEnvelopes(trx: Tx, rows: readonly EnvelopeRow[]): Promise<Set<string>> {
    const inserted = await trx.prepared<{ id: string }>(
      'roost_insert_envelopes',
      this.statement('roost_insert_envelopes', insertEnvelopesSql, envelopeParams(rows)),
    );
    return new Set(inserted.map((row) => row.id));
  }

  async insertEntries(trx: Tx, rows: readonly EntryRow[]): Promise<void> {
    if (rows.length === 0) return;
    await trx.prepared(
      'roost_insert_entries',
      this.statement('roost_insert_entries', insertEntriesSql, entryParams(rows)),
    );
  }

  async advanceMailboxes(trx: Tx, states: readonly MailboxState[]): Promise<void> {
    if (states.length === 0) return;
    await trx.prepared(
      'roost_advance_mailboxes',
      this.statement('roost_advance_mailboxes', advanceMailboxesSql, advanceParams(states)),
    );
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
    const parameters = [...envelopeParams(envelopes), ...entryParams(entries), ...advanceParams(states)];
    const query = this.statement('roost_accept_batch', acceptBatchSql, parameters);
    const inserted = await trx.prepared<{ id: string }>('roost_accept_batch', query);
    return new Set(inserted.map((row) => row.id));
  }

  /**
   * `insertAll` as one statement outside any transaction and without locking first: it writes
   * against mailbox states the caller remembers (`expectedSeqs`, one per state) and fails whole, writing
   * nothing, when a mailbox moved on since (`stale`) or an envelope id is taken (`id_taken`), or
   * (with `policyEpoch`, the epoch of the kept sender lookups that admitted its sends) when the
   * policy epoch moved on since (`policy_stale`, migration 0009).
   */
  async insertAllIfCurrent(
    envelopes: readonly EnvelopeRow[],
    entries: readonly EntryRow[],
    states: readonly MailboxState[],
    expectedSeqs: readonly number[],
    policyEpoch: number | null = null,
  ): Promise<'written' | 'stale' | 'id_taken' | 'policy_stale'> {
    const parameters = [
      ...envelopeParams(envelopes),
      ...entryParams(entries),
      ...advanceParams(states, expectedSeqs),
      states.length,
      envelopes.length,
      policyEpoch,
    ];
    const query = this.statement('roost_accept_if_current', acceptIfCurrentSql, parameters);
    try {
      await this.database.prepared('roost_accept_if_current', query);
      return 'written';
    } catch (error) {
      const code = (error as { code?: string }).code;
      if (code === 'RS410') return 'id_taken'; // roost_assert_accept, migration 0004
      if (code === 'RS411') return 'policy_stale'; // roost_assert_policy, migration 0009
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
      {
        name: 'roost_accept_if_current',
        query: this.statement('roost_accept_if_current', acceptIfCurrentSql, [
          ...envelopeParams([]),
          ...entryParams([]),
          ...advanceParams([], []),
          0,
          0,
          null,
        ]),
      },
      {
        name: 'roost_lock_mailboxes',
        query: this.statement('roost_lock_mailboxes', lockMailboxesSql, [bigintArray([])]),
      },
      {
        name: 'roost_accept_batch',
        query: this.statement('roost_accept_batch', acceptBatchSql, [
          ...envelopeParams([]),
          ...entryParams([]),
          ...advanceParams([]),
        ]),
      },
    ];
  }

  /**
   * A named statement with these parameters. Its SQL text is compiled once per name and reused:
   * every row set is one array parameter, so the text never depends on the batch, and building it
   * (a few KB of string per accept batch) was a good part of a small batch's garbage. The first
   * compile checks that the builder takes `parameters` exactly, in order.
   */
  private statement(name: string, build: (p: readonly unknown[]) => RawBuilder<unknown>, parameters: unknown[]) {
    let text = this.texts.get(name);
    if (text === undefined) {
      const compiled = build(parameters).compile(this.db);
      if (
        compiled.parameters.length !== parameters.length ||
        compiled.parameters.some((value, i) => value !== parameters[i])
      )
        throw new Error(`statement ${name}: its builder does not take its parameters in order`);
      text = compiled.sql;
      this.texts.set(name, text);
    }
    return CompiledQuery.raw(text, parameters);
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

function lockMailboxesSql([agentIds]: readonly unknown[]): RawBuilder<MailboxState> {
  return sql<MailboxState>`
      select agent_id, last_seq, last_created_at from mailboxes
      where agent_id = any(${agentIds}::bigint[])
      order by agent_id
      for update`;
}

/** The parameters of `insertEnvelopesSql`: each column of the rows, in id order (a consistent lock order). */
function envelopeParams(rows: readonly EnvelopeRow[]): unknown[] {
  const sorted = [...rows].sort((a, b) => (a.id < b.id ? -1 : 1));
  const jsonOrNull = (value: string[] | null) => (value ? JSON.stringify(value) : null);
  // The index's lexemes where they can be worked out here (search-lexemes.ts), else the text for
  // to_tsvector: one of the two per row, the other null.
  const lexemes: Array<string | null> = [];
  const searchTexts: Array<string | null> = [];
  for (const row of sorted) {
    const plain = plainSearchLexemes(row.search_text);
    lexemes.push(plain);
    searchTexts.push(plain === null ? row.search_text : null);
  }
  return [
    textArray(sorted.map((r) => r.id)),
    bigintArray(sorted.map((r) => r.sender_id)),
    bigintArray(sorted.map((r) => r.created_at)),
    bigintArray(sorted.map((r) => r.received_ms)),
    textArray(sorted.map((r) => r.body)),
    textArray(sorted.map((r) => r.header)),
    textArray(sorted.map((r) => JSON.stringify(r.recipients))),
    sorted.map((r) => r.self_addressed),
    textArray(searchTexts),
    textArray(sorted.map((r) => r.receipt_for)),
    textArray(sorted.map((r) => r.receipt_status)),
    textArray(sorted.map((r) => jsonOrNull(r.guard_override))),
    textArray(lexemes),
  ];
}

/** The parameters of `insertEntriesSql`. */
function entryParams(rows: readonly EntryRow[]): unknown[] {
  return [
    bigintArray(rows.map((r) => r.mailbox_id)),
    bigintArray(rows.map((r) => r.seq)),
    textArray(rows.map((r) => r.envelope_id)),
    bigintArray(rows.map((r) => r.created_at)),
    textArray(rows.map((r) => r.kind)),
  ];
}

/** The parameters of `advanceMailboxesSql`; with `expectedSeqs` (one per state), a compare-and-set. */
function advanceParams(states: readonly MailboxState[], expectedSeqs?: readonly number[]): unknown[] {
  return [
    bigintArray(states.map((s) => s.agent_id)),
    bigintArray(states.map((s) => s.last_seq)),
    bigintArray(states.map((s) => s.last_created_at)),
    bigintArray(expectedSeqs ?? states.map(() => null)),
  ];
}

const ENVELOPE_PARAMS = 13;
const ENTRY_PARAMS = 5;
const ADVANCE_PARAMS = 4;

function acceptBatchSql(p: readonly unknown[]): RawBuilder<{ id: string }> {
  const entries = p.slice(ENVELOPE_PARAMS);
  return sql<{ id: string }>`
      with inserted as (${insertEnvelopesSql(p)}),
      entries as (${insertEntriesSql(entries)}),
      advanced as (${advanceMailboxesSql(entries.slice(ENTRY_PARAMS))})
      select id from inserted`;
}

function acceptIfCurrentSql(p: readonly unknown[]): RawBuilder<{ ok: boolean }> {
  const entries = p.slice(ENVELOPE_PARAMS);
  const advance = entries.slice(ENTRY_PARAMS);
  const [states, envelopes, policyEpoch] = advance.slice(ADVANCE_PARAMS);
  return sql<{ ok: boolean }>`
      with inserted as (${insertEnvelopesSql(p)}),
      entries as (${insertEntriesSql(entries)}),
      advanced as (${advanceMailboxesSql(advance, true)})
      select roost_assert_accept(
        (select count(*) from advanced) = ${states}::bigint,
        (select count(*) from inserted) = ${envelopes}::bigint) and roost_assert_policy(${policyEpoch}::bigint) as ok`;
}

function assertPolicySql([epoch]: readonly unknown[]): RawBuilder<{ ok: boolean }> {
  return sql<{ ok: boolean }>`select roost_assert_policy(${epoch}::bigint) as ok`;
}

/*
 * Each `unnest(…)` of the accept statements takes its first array as `(select $n)`, a subquery the
 * planner does not look into: it estimates the rows of that unnest at its default of ten whatever
 * the arrays hold, as it does for the statement's generic plan. Without it, a custom plan saw the
 * arrays' real length, and for fewer than ten envelopes (every send of an operator not under load)
 * its estimate undercut the generic plan's, so Postgres (plan_cache_mode auto) planned the
 * statement anew at every execution: ~40 µs of its ~0.7 ms on one envelope. Now the two estimates
 * agree and the generic plan, made once per connection, is kept (`accept-statement` reports the
 * counts: `generic_plans`, `custom_plans`). The plan itself is the same.
 */

/** Envelopes (parameters from `envelopeParams`); `returning id`. */
function insertEnvelopesSql(p: readonly unknown[]): RawBuilder<{ id: string }> {
  return sql<{ id: string }>`
    insert into envelopes (id, sender_id, created_at, received_ms, body, header, recipients, self_addressed, search,
                           receipt_for, receipt_status, guard_override)
    select t.id, t.sender_id, t.created_at, t.received_ms, t.body, t.header,
           array(select jsonb_array_elements_text(t.recipients::jsonb)),
           t.self_addressed,
           coalesce(array_to_tsvector(string_to_array(t.search_lexemes, ' ')), to_tsvector('simple', t.search_text)),
           t.receipt_for, t.receipt_status,
           case when t.guard_override is null then null else array(select jsonb_array_elements_text(t.guard_override::jsonb)) end
    from unnest(
      (select ${p[0]}::text[]), ${p[1]}::bigint[],
      ${p[2]}::bigint[], ${p[3]}::bigint[],
      ${p[4]}::text[], ${p[5]}::text[],
      ${p[6]}::text[], ${p[7]}::boolean[],
      ${p[8]}::text[], ${p[9]}::text[],
      ${p[10]}::text[], ${p[11]}::text[],
      ${p[12]}::text[]
    ) with ordinality as t(id, sender_id, created_at, received_ms, body, header, recipients, self_addressed, search_text,
                           receipt_for, receipt_status, guard_override, search_lexemes, n)
    order by t.n
    on conflict (id) do nothing
    returning id`;
}

/** Mailbox entries (parameters from `entryParams`). */
function insertEntriesSql(p: readonly unknown[]): RawBuilder<unknown> {
  return sql`
    insert into mailbox_entries (mailbox_id, seq, envelope_id, created_at, kind)
    select * from unnest(
      (select ${p[0]}::bigint[]), ${p[1]}::bigint[],
      ${p[2]}::text[], ${p[3]}::bigint[],
      ${p[4]}::text[]
    )`;
}

/**
 * Set each mailbox's state (parameters from `advanceParams`); with `compareAndSet`, only where the
 * mailbox still has the expected `last_seq`. Returns the agent ids it updated.
 */
function advanceMailboxesSql(p: readonly unknown[], compareAndSet = false): RawBuilder<unknown> {
  return sql`
    update mailboxes as m set last_seq = u.last_seq, last_created_at = u.last_created_at
    from unnest(
      (select ${p[0]}::bigint[]), ${p[1]}::bigint[],
      ${p[2]}::bigint[], ${p[3]}::bigint[]
    ) as u(agent_id, last_seq, last_created_at, expected_seq)
    where m.agent_id = u.agent_id${compareAndSet ? sql` and m.last_seq = u.expected_seq` : sql``}
    returning m.agent_id`;
}
