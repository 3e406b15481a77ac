import { Injectable } from '@nestjs/common';
import { sql, type Kysely } from 'kysely';
import { AGENT_COLUMNS, InjectDatabase, type Database, type DB } from '#db';
import type { Agent } from '#domain';

export interface AgentSearch {
  /** Organization whose agents only are listed (an org admin token); undefined: every agent. */
  owner?: string;
  /** Substring of handle or display name, ASCII case-insensitive. */
  needle?: string;
  /** Keyset: handles strictly after this one. */
  after?: string;
  limit: number;
}

export interface TrafficRow {
  minute: number;
  envelopes: number;
}

export interface UnreadRow {
  handle: string;
  unread: number;
}

/**
 * The console's reads across agents (EXTENSIONS.md §5, docs/console-api.md). Every query is scoped
 * by an optional owner (organization): tenancy is a parameter. Each reads per agent through an
 * index of db/migrations/0001 (agents_owner / the handle key, envelopes_sender_feed,
 * mailbox_entries_unread), so none scans a whole envelope or entry table.
 */
@Injectable()
export class ConsoleRepository {
  private readonly db: Kysely<DB>;

  constructor(@InjectDatabase() database: Database) {
    this.db = database.db;
  }

  /**
   * Live agents in handle (byte) order after `after`, at most `limit`; the needle filters on the
   * agent rows themselves (10,000 agents are one short scan of the handle index, see bench/).
   */
  searchAgents(search: AgentSearch): Promise<Agent[]> {
    let query = this.db.selectFrom('agents').select(AGENT_COLUMNS).where('deleted_at', 'is', null);
    if (search.owner !== undefined) query = query.where('owner', '=', search.owner);
    if (search.after !== undefined) query = query.where('handle', '>', search.after);
    if (search.needle !== undefined && search.needle !== '') {
      const pattern = `%${search.needle.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
      query = query.where((eb) => eb.or([eb('handle', 'ilike', pattern), eb('display_name', 'ilike', pattern)]));
    }
    return query.orderBy('handle').limit(search.limit).execute();
  }

  /** Unread entries of each mailbox (index-only counts on mailbox_entries_unread). */
  async unreadCounts(agentIds: readonly number[]): Promise<Map<number, number>> {
    if (agentIds.length === 0) return new Map();
    const result = await sql<{ mailbox_id: number; unread: number | string }>`
      select m.mailbox_id, count(*) as unread from mailbox_entries m
      where m.mailbox_id = any(${[...agentIds]}::bigint[]) and not m.read
      group by m.mailbox_id`.execute(this.db);
    return new Map(result.rows.map((row) => [Number(row.mailbox_id), Number(row.unread)]));
  }

  /**
   * Envelopes sent since `since` per minute (start of the minute, ms), by the owner's agents or by
   * anyone. One range scan of envelopes_sender_feed per agent: the lateral aggregate keeps the
   * planner from a sequential scan of envelopes, which has no index on created_at alone.
   */
  async traffic(owner: string | undefined, since: number): Promise<TrafficRow[]> {
    const result = await sql<{ minute: number | string; envelopes: number | string }>`
      select t.minute, sum(t.envelopes) as envelopes
      from agents a
      cross join lateral (
        select e.created_at / 60000 * 60000 as minute, count(*) as envelopes
        from envelopes e
        where e.sender_id = a.id and e.created_at >= ${since}::bigint
        group by 1
      ) t
      where ${owner === undefined ? sql`true` : sql`a.owner = ${owner}`}
      group by t.minute
      order by t.minute`.execute(this.db);
    return result.rows.map((row) => ({ minute: Number(row.minute), envelopes: Number(row.envelopes) }));
  }

  /** The `limit` live mailboxes with the most unread entries (ties by handle), of the owner or all. */
  async largestMailboxes(owner: string | undefined, limit: number): Promise<UnreadRow[]> {
    const result = await sql<{ handle: string; unread: number | string }>`
      select a.handle, u.unread
      from agents a
      cross join lateral (
        select count(*) as unread from mailbox_entries m where m.mailbox_id = a.id and not m.read
      ) u
      where a.deleted_at is null and u.unread > 0
        and ${owner === undefined ? sql`true` : sql`a.owner = ${owner}`}
      order by u.unread desc, a.handle
      limit ${limit}`.execute(this.db);
    return result.rows.map((row) => ({ handle: row.handle, unread: Number(row.unread) }));
  }

  /** Does Postgres answer? */
  async ping(): Promise<boolean> {
    await sql`select 1`.execute(this.db);
    return true;
  }
}
