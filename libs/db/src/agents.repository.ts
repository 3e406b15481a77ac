import { Injectable } from '@nestjs/common';
import { CompiledQuery, sql, type Kysely, type Selectable } from 'kysely';
import type { Agent, RecipientAgent } from '#domain';
import { deleteAgents, releaseHandles } from './agent-deletion';
import { textArray } from './array-params';
import type { Database } from './database';
import type { AgentsTable, BlocksTable, DB } from './schema';
import { InjectDatabase } from './tokens';

/** The columns of an agent row (the domain's Agent), for every read of one. */
export const AGENT_COLUMNS = [
  'id',
  'handle',
  'policy',
  'allowlist',
  'display_name',
  'description',
  'card_body',
  'visibility',
  'content_guard',
  'retention_days',
  'created_at',
  'updated_at',
] as const;

/** The columns of a recipient (the domain's RecipientAgent): all that the accept path reads of one. */
export const RECIPIENT_COLUMNS = ['id', 'handle', 'policy', 'allowlist'] as const satisfies ReadonlyArray<
  keyof RecipientAgent
>;

/** A mailbox's state as a lookup read it, both null when the agent has no mailbox row. */
export interface NullableMailboxState {
  last_seq: number | null;
  last_created_at: number | null;
}

/**
 * A recipient as the senders' lookup reads it: its policy columns and its mailbox's state
 * (`last_seq` with the `last_created_at` written with it), the lock-free accept path's hint.
 */
export type LookedUpRecipient = RecipientAgent & NullableMailboxState;

/**
 * The agents holding some tokens and the agents named as recipients, from one round trip
 * (`findSendersAndRecipients`).
 */
export interface SendersAndRecipients {
  /** By token hash: the agent, and the handles among `recipients` that blocked it. */
  senders: Map<string, { agent: Agent; blockedBy: string[] }>;
  /** By handle (a sender's own handle too, when named: its mailbox state for self-addressed copies). */
  recipients: Map<string, LookedUpRecipient>;
  /** The policy epoch (migration 0009) this lookup read its rows at. */
  policyEpoch: number;
}

/** A sender's columns besides a recipient's, and the named recipients that blocked it. */
type SenderRest = Omit<Agent, keyof RecipientAgent> & { blocked_by: string[] };

/**
 * A row of `roost_senders_and_recipients`: a sender (with its token hash and the rest of its agent
 * as one JSON object), or the one row of all the recipients found (`recipients`: a JSON array of
 * them, null when none was found or named).
 */
type SenderOrRecipientsRow =
  | (RecipientAgent & { token_hash: string; sender: SenderRest; recipients: null; policy_epoch: null })
  | { token_hash: null; recipients: LookedUpRecipient[] | null; policy_epoch: string | number };

const quoted = (columns: readonly string[]) => columns.map((column) => `"${column}"`).join(', ');
/** `json_build_object` arguments: a sender's columns besides a recipient's. */
const SENDER_REST = AGENT_COLUMNS.filter((column) => !(RECIPIENT_COLUMNS as readonly string[]).includes(column))
  .map((column) => `'${column}', "${column}", `)
  .join('');

/**
 * The senders (by token hash, $1) and the recipients (by handle, $2) of many requests, with the
 * policy epoch they were read at (migration 0009; the same snapshot). The
 * recipients come back as ONE row holding a JSON array of them (`json_agg`: one string that
 * JSON.parse reads at once, where a row per recipient cost `pg` a row object and a type parser per
 * column, an array literal parse for each allowlist among them); each element carries the policy
 * columns and the mailbox state, keys named as the columns. A sender's other columns ride in one
 * JSON object. The blocks between the two sets are joined once and listed per sender (which
 * recipients blocked it) rather than looked up per recipient. Each recipient's mailbox state is
 * read by one index probe (`offset 0` keeps the subquery a probe: as a plain join, the generic plan
 * of a small database hashed the whole mailboxes table). Both parameters are bound as binary
 * `text[]` (`textArray`): no array literal built and escaped per handle, none parsed.
 */
const SENDERS_AND_RECIPIENTS_SQL = `
  with senders as (select token_hash, ${quoted(AGENT_COLUMNS)} from agents where token_hash = any($1::text[])),
  recipients as (
    select ${RECIPIENT_COLUMNS.map((column) => `a."${column}"`).join(', ')}, m.last_seq, m.last_created_at from agents a
    left join lateral (select last_seq, last_created_at from mailboxes where agent_id = a.id offset 0) m on true
    where a.handle = any($2::text[]) and a.deleted_at is null),
  blocks_of_senders as materialized (
    select r.handle as blocker, b.blocked_handle from recipients r join blocks b on b.agent_id = r.id
    where b.blocked_handle in (select handle from senders))
  select token_hash, ${quoted(RECIPIENT_COLUMNS)},
         json_build_object(${SENDER_REST}
           'blocked_by', array(select blocker from blocks_of_senders where blocked_handle = s.handle)) as sender,
         null::json as recipients, null::bigint as policy_epoch
  from senders s
  union all
  select null, ${RECIPIENT_COLUMNS.map(() => 'null').join(', ')}, null, (select json_agg(r) from recipients r),
         (select epoch from policy_epoch where singleton)`;

/** A new agent's columns; the rest (id, allowlist, updated_at, deleted_at) the insert sets. */
export type NewAgent = Omit<
  Selectable<AgentsTable>,
  'id' | 'allowlist' | 'updated_at' | 'deleted_at' | 'token_hash'
> & {
  token_hash: string;
};

export type AgentPatch = Partial<
  Pick<
    Agent,
    'policy' | 'display_name' | 'description' | 'card_body' | 'visibility' | 'content_guard' | 'retention_days'
  >
>;

export type BlockRow = Omit<Selectable<BlocksTable>, 'agent_id'>;

/**
 * Agents, their allowlists and blocks, and the mailbox row each agent owns. A deleted agent's row
 * stays as a tombstone (`deleted_at`) while envelopes it sent are stored: every method here but
 * `create` (whose conflict keeps the handle taken) treats it as absent.
 */
@Injectable()
export class AgentsRepository {
  private readonly db: Kysely<DB>;

  constructor(@InjectDatabase() private readonly database: Database) {
    this.db = database.db;
  }

  private recipientsSql: string | undefined;

  /**
   * The hot path of every authenticated request, for many requests in one round trip: the agents
   * holding `tokenHashes` (keyed by hash), each with the handles among the named recipients that
   * blocked it, and the agents named `handles` (keyed by handle) with their mailbox states. A send
   * names tens of recipients and reads only their policy: recipient rows carry only those columns
   * (and the state) and are kept as parsed.
   */
  async findSendersAndRecipients(
    tokenHashes: readonly string[],
    handles: readonly string[],
  ): Promise<SendersAndRecipients> {
    const rows = await this.database.prepared<SenderOrRecipientsRow>(
      'roost_senders_and_recipients',
      this.sendersAndRecipientsQuery(tokenHashes, handles),
    );
    const senders: SendersAndRecipients['senders'] = new Map();
    const recipients: SendersAndRecipients['recipients'] = new Map();
    let policyEpoch = 0;
    for (const row of rows) {
      if (row.token_hash === null) {
        policyEpoch = Number(row.policy_epoch);
        if (row.recipients !== null)
          for (const recipient of row.recipients) recipients.set(recipient.handle, recipient);
      } else {
        const { blocked_by, ...rest } = row.sender;
        const agent: Agent = { id: row.id, handle: row.handle, policy: row.policy, allowlist: row.allowlist, ...rest };
        senders.set(row.token_hash, { agent, blockedBy: blocked_by });
      }
    }
    return { senders, recipients, policyEpoch };
  }

  /**
   * The per-request named statements with parameters that match nothing, for start-up to parse and
   * plan them on every pooled connection (`Database.warm`).
   */
  warmStatements(): Array<{ name: string; query: CompiledQuery }> {
    this.recipientsSql ??= this.recipientsQuery('$1', ['$2']).sql;
    return [
      { name: 'roost_senders_and_recipients', query: this.sendersAndRecipientsQuery([], []) },
      { name: 'roost_recipients', query: CompiledQuery.raw(this.recipientsSql, ['', []]) },
    ];
  }

  private sendersAndRecipientsQuery(tokenHashes: readonly string[], handles: readonly string[]): CompiledQuery {
    return CompiledQuery.raw(SENDERS_AND_RECIPIENTS_SQL, [textArray(tokenHashes), textArray(handles)]);
  }

  findById(id: number): Promise<Agent | undefined> {
    return this.db
      .selectFrom('agents')
      .select(AGENT_COLUMNS)
      .where('id', '=', id)
      .where('deleted_at', 'is', null)
      .executeTakeFirst();
  }

  findByHandle(handle: string): Promise<Agent | undefined> {
    return this.db
      .selectFrom('agents')
      .select(AGENT_COLUMNS)
      .where('handle', '=', handle)
      .where('deleted_at', 'is', null)
      .executeTakeFirst();
  }

  /** Recipients by handle, each with whether it blocked `senderHandle` (one query per accept). */
  async findRecipients(
    handles: readonly string[],
    senderHandle: string,
  ): Promise<Array<RecipientAgent & { blocks_sender: boolean }>> {
    if (handles.length === 0) return [];
    this.recipientsSql ??= this.recipientsQuery('$1', ['$2']).sql;
    const query = CompiledQuery.raw(this.recipientsSql, [senderHandle, [...handles]]);
    return this.database.prepared<RecipientAgent & { blocks_sender: boolean }>('roost_recipients', query);
  }

  /** Parameters in this order: the sender's handle ($1), the recipient handles ($2). */
  private recipientsQuery(senderHandle: string, handles: readonly string[]) {
    return this.db
      .selectFrom('agents')
      .select(RECIPIENT_COLUMNS)
      .select((eb) =>
        eb
          .exists(
            eb
              .selectFrom('blocks')
              .select(sql`1`.as('one'))
              .whereRef('blocks.agent_id', '=', 'agents.id')
              .where('blocks.blocked_handle', '=', senderHandle),
          )
          .$castTo<boolean>()
          .as('blocks_sender'),
      )
      .where('handle', '=', sql<string>`any(${[...handles]}::text[])`)
      .where('deleted_at', 'is', null)
      .compile();
  }

  /** All agents, or those of one owner (an organization), sorted by handle in byte order. */
  list(owner?: string): Promise<Agent[]> {
    let query = this.db.selectFrom('agents').select(AGENT_COLUMNS).where('deleted_at', 'is', null);
    if (owner !== undefined) query = query.where('owner', '=', owner);
    return query.orderBy('handle').execute();
  }

  countByOwner(owner: string): Promise<number> {
    return this.db
      .selectFrom('agents')
      .select((eb) => eb.fn.countAll<number>().as('count'))
      .where('owner', '=', owner)
      .where('deleted_at', 'is', null)
      .executeTakeFirstOrThrow()
      .then((row) => Number(row.count));
  }

  /**
   * Insert the agent and its mailbox: `'quota'` when the owner's organization already holds
   * `max_agents` agents, `'exists'` when the handle is taken (also by a deleted agent whose sent
   * envelopes are still stored). The organization row is locked so that concurrent creates cannot
   * overrun the quota.
   */
  create(agent: NewAgent): Promise<Agent | 'exists' | 'quota'> {
    return this.db.transaction().execute(async (trx) => {
      const org = await trx
        .selectFrom('orgs')
        .select('max_agents')
        .where('name', '=', agent.owner)
        .forUpdate()
        .executeTakeFirst();
      if (org?.max_agents != null) {
        const { count } = await trx
          .selectFrom('agents')
          .select((eb) => eb.fn.countAll<number>().as('count'))
          .where('owner', '=', agent.owner)
          .where('deleted_at', 'is', null)
          .executeTakeFirstOrThrow();
        if (Number(count) >= org.max_agents) return 'quota';
      }
      const created = await trx
        .insertInto('agents')
        .values({ ...agent, allowlist: [], updated_at: agent.created_at })
        .onConflict((oc) => oc.column('handle').doNothing())
        .returning(AGENT_COLUMNS)
        .executeTakeFirst();
      if (!created) return 'exists';
      await trx.insertInto('mailboxes').values({ agent_id: created.id }).execute();
      return created;
    });
  }

  update(id: number, patch: AgentPatch, now: number): Promise<Agent | undefined> {
    return this.db
      .updateTable('agents')
      .set({ ...patch, updated_at: now })
      .where('id', '=', id)
      .where('deleted_at', 'is', null)
      .returning(AGENT_COLUMNS)
      .executeTakeFirst();
  }

  rotateToken(id: number, tokenHash: string, now: number): Promise<Agent | undefined> {
    return this.db
      .updateTable('agents')
      .set({ token_hash: tokenHash, updated_at: now })
      .where('id', '=', id)
      .where('deleted_at', 'is', null)
      .returning(AGENT_COLUMNS)
      .executeTakeFirst();
  }

  /**
   * Delete the agent, keeping the envelopes it delivered (EXTENSIONS.md §5, `deleteAgents`); false
   * when it was already gone. Its handle is freed at once when none of its envelopes is stored.
   */
  async delete(id: number, now: number): Promise<boolean> {
    const deleted = await this.db.transaction().execute((trx) => deleteAgents(trx, [id], now));
    await releaseHandles(this.db, deleted);
    return deleted.length > 0;
  }

  /** Union `entries` into the allowlist, kept de-duplicated and sorted in byte order. */
  addAllowlistEntries(id: number, entries: readonly string[], now: number): Promise<Agent | undefined> {
    return this.db
      .updateTable('agents')
      .set({
        allowlist: sql<
          string[]
        >`array(select distinct e from unnest(allowlist || ${[...entries]}::text[]) as e order by e)`,
        updated_at: now,
      })
      .where('id', '=', id)
      .where('deleted_at', 'is', null)
      .returning(AGENT_COLUMNS)
      .executeTakeFirst();
  }

  /** Remove one entry; undefined when it was not on the list. */
  removeAllowlistEntry(id: number, entry: string, now: number): Promise<Agent | undefined> {
    return this.db
      .updateTable('agents')
      .set({ allowlist: sql<string[]>`array_remove(allowlist, ${entry}::text)`, updated_at: now })
      .where('id', '=', id)
      .where('deleted_at', 'is', null)
      .where(sql<boolean>`${entry}::text = any(allowlist)`)
      .returning(AGENT_COLUMNS)
      .executeTakeFirst();
  }

  listBlocks(agentId: number, limit: number, offset: number): Promise<BlockRow[]> {
    return this.db
      .selectFrom('blocks')
      .select(['blocked_handle', 'created_at'])
      .where('agent_id', '=', agentId)
      .orderBy('created_at', 'desc')
      .orderBy('blocked_handle', 'asc')
      .limit(limit)
      .offset(offset)
      .execute();
  }

  /** Block `handle`; re-blocking keeps the original `created_at`. */
  async addBlock(agentId: number, handle: string, now: number): Promise<BlockRow> {
    await this.db
      .insertInto('blocks')
      .values({ agent_id: agentId, blocked_handle: handle, created_at: now })
      .onConflict((oc) => oc.columns(['agent_id', 'blocked_handle']).doNothing())
      .execute();
    return this.db
      .selectFrom('blocks')
      .select(['blocked_handle', 'created_at'])
      .where('agent_id', '=', agentId)
      .where('blocked_handle', '=', handle)
      .executeTakeFirstOrThrow();
  }

  async removeBlock(agentId: number, handle: string): Promise<boolean> {
    const result = await this.db
      .deleteFrom('blocks')
      .where('agent_id', '=', agentId)
      .where('blocked_handle', '=', handle)
      .executeTakeFirst();
    return result.numDeletedRows > 0n;
  }

  /**
   * Agents whose handle or display name contains `needle` (ASCII case-insensitive) and that
   * `callerHandle` may see (ASMTP.md §1.8, the rule of `isVisibleTo`: public, itself, or allowlisting
   * the caller or its owner glob), ordered by handle, after `afterHandle`, at most `limit`. The
   * visibility filter is in the query so paging never has to step over hidden agents.
   */
  searchVisible(needle: string, callerHandle: string, limit: number, afterHandle?: string): Promise<Agent[]> {
    const pattern = `%${needle.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
    const ownerGlob = `${callerHandle.slice(0, callerHandle.indexOf('.'))}.*`;
    let query = this.db
      .selectFrom('agents')
      .select(AGENT_COLUMNS)
      .where('deleted_at', 'is', null)
      .where((eb) => eb.or([eb('handle', 'ilike', pattern), eb('display_name', 'ilike', pattern)]))
      .where((eb) =>
        eb.or([
          eb('visibility', '=', 'public'),
          eb('handle', '=', callerHandle),
          eb(sql<string>`${callerHandle}::text`, '=', sql<string>`any(allowlist)`),
          eb(sql<string>`${ownerGlob}::text`, '=', sql<string>`any(allowlist)`),
        ]),
      );
    if (afterHandle !== undefined) query = query.where('handle', '>', afterHandle);
    return query.orderBy('handle').limit(limit).execute();
  }

  /** Current token hash of each agent (absent: deleted), to close sockets of revoked tokens. */
  async tokenHashes(agentIds: readonly number[]): Promise<Map<number, string>> {
    if (agentIds.length === 0) return new Map();
    const rows = await this.db
      .selectFrom('agents')
      .select(['id', 'token_hash'])
      .where('id', '=', sql<number>`any(${[...agentIds]}::bigint[])`)
      .where('deleted_at', 'is', null)
      .execute();
    return new Map(rows.flatMap((row) => (row.token_hash === null ? [] : [[row.id, row.token_hash] as const])));
  }
}
