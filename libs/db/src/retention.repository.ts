import { Injectable } from '@nestjs/common';
import { sql, type Kysely } from 'kysely';
import type { Cursor } from '#domain';
import { releaseHandles } from './agent-deletion';
import type { Database } from './database';
import type { DB } from './schema';
import { InjectDatabase } from './tokens';

export interface RetentionPolicy {
  agent_id: number;
  /** Effective retention: the agent's override, else its organization's. */
  retention_days: number;
}

/**
 * Retention (EXTENSIONS.md §6) in bounded batches: each statement deletes at most `limit` rows by
 * an index range scan and commits on its own, so no long lock is ever held and accepts (which only
 * insert) never wait on a purge.
 */
@Injectable()
export class RetentionRepository {
  private readonly db: Kysely<DB>;

  constructor(@InjectDatabase() database: Database) {
    this.db = database.db;
  }

  /** Every agent with a retention limit, its own or its organization's. */
  async policies(): Promise<RetentionPolicy[]> {
    const result = await sql<RetentionPolicy>`
      select a.id as agent_id, coalesce(a.retention_days, o.retention_days) as retention_days
      from agents a left join orgs o on o.name = a.owner
      where a.deleted_at is null and coalesce(a.retention_days, o.retention_days) is not null
      order by a.id`.execute(this.db);
    return result.rows;
  }

  /**
   * Delete up to `limit` of the mailbox's entries created before `cutoff` (index
   * `mailbox_entries_feed`) and move the mailbox's retention mark past them. Returns the count.
   */
  async purgeEntries(mailboxId: number, cutoff: number, limit: number): Promise<number> {
    const result = await sql<{ purged: number; created_at: number | null; envelope_id: string | null }>`
      with doomed as (
        select seq, created_at, envelope_id from mailbox_entries
        where mailbox_id = ${mailboxId} and created_at < ${cutoff}
        order by created_at, envelope_id
        limit ${limit}
      ),
      deleted as (
        -- By primary key: a join on doomed lets the planner hash-join a scan of the whole mailbox.
        delete from mailbox_entries m
        where m.mailbox_id = ${mailboxId} and m.seq = any(array(select seq from doomed))
        returning m.created_at, m.envelope_id
      ),
      newest as (
        select created_at, envelope_id from deleted order by created_at desc, envelope_id desc limit 1
      ),
      marked as (
        insert into retention_marks (mailbox_id, purged_created_at, purged_envelope_id)
        select ${mailboxId}, created_at, envelope_id from newest
        on conflict (mailbox_id) do update
          set purged_created_at = excluded.purged_created_at, purged_envelope_id = excluded.purged_envelope_id
          where (retention_marks.purged_created_at, retention_marks.purged_envelope_id)
              < (excluded.purged_created_at, excluded.purged_envelope_id)
      )
      select (select count(*) from deleted)::int as purged, n.created_at, n.envelope_id
      from (select 1) one left join newest n on true`.execute(this.db);
    return Number(result.rows[0]?.purged ?? 0);
  }

  /**
   * Examine the next `limit` envelopes of `senderId` older than `cutoff` after `after` (index
   * `envelopes_sender_feed`, in feed order) and delete those no mailbox holds any more (their files
   * and receipts go with them by cascade). An envelope a recipient still keeps stays; `last` is the
   * position to continue after, so kept envelopes are walked past once per purge, not re-scanned by
   * every batch.
   */
  async purgeEnvelopes(
    senderId: number,
    cutoff: number,
    limit: number,
    after: Cursor | null,
  ): Promise<{ purged: number; examined: number; last: Cursor | null }> {
    const resume =
      after === null ? sql`` : sql`and (created_at, id) > (${after.created_at}::bigint, ${after.envelope_id}::text)`;
    const result = await sql<{ purged: number; examined: number; created_at: number | null; id: string | null }>`
      with candidates as (
        select id, created_at from envelopes
        where sender_id = ${senderId} and created_at < ${cutoff} ${resume}
        order by created_at, id
        limit ${limit}
      ),
      deleted as (
        delete from envelopes e
        where e.id = any(array(select id from candidates))
          and not exists (select 1 from mailbox_entries m where m.envelope_id = e.id)
        returning e.id
      )
      select (select count(*) from deleted)::int as purged, (select count(*) from candidates)::int as examined, last.created_at, last.id
      from (select 1) one
      left join lateral (select created_at, id from candidates order by created_at desc, id desc limit 1) last on true`.execute(
      this.db,
    );
    const row = result.rows[0];
    return {
      purged: Number(row?.purged ?? 0),
      examined: Number(row?.examined ?? 0),
      last: row?.id == null ? null : { created_at: Number(row.created_at), envelope_id: row.id },
    };
  }

  /** Deleted agents (tombstones) after `afterId`, at most `limit`, in id order (index `agents_deleted`). */
  async deletedAgents(afterId: number, limit: number): Promise<number[]> {
    const rows = await this.db
      .selectFrom('agents')
      .select('id')
      .where('deleted_at', 'is not', null)
      .where('id', '>', afterId)
      .orderBy('id')
      .limit(limit)
      .execute();
    return rows.map((row) => row.id);
  }

  /** Remove tombstones that no stored envelope names as sender, freeing their handles (EXTENSIONS.md §5). */
  releaseHandles(agentIds: readonly number[]): Promise<number> {
    return releaseHandles(this.db, agentIds);
  }

  /** The newest purged position of a mailbox, or undefined when nothing was ever purged. */
  async mark(mailboxId: number): Promise<Cursor | undefined> {
    const row = await this.db
      .selectFrom('retention_marks')
      .select(['purged_created_at', 'purged_envelope_id'])
      .where('mailbox_id', '=', mailboxId)
      .executeTakeFirst();
    return row ? { created_at: row.purged_created_at, envelope_id: row.purged_envelope_id } : undefined;
  }

  /** The oldest entry still in the mailbox. */
  async oldestEntry(mailboxId: number): Promise<Cursor | undefined> {
    const row = await this.db
      .selectFrom('mailbox_entries')
      .select(['created_at', 'envelope_id'])
      .where('mailbox_id', '=', mailboxId)
      .orderBy('created_at')
      .orderBy('envelope_id')
      .limit(1)
      .executeTakeFirst();
    return row ? { created_at: row.created_at, envelope_id: row.envelope_id } : undefined;
  }
}
