import { Injectable } from '@nestjs/common';
import { sql, type Kysely } from 'kysely';
import type { Database } from './database';
import type { DB } from './schema';
import { InjectDatabase } from './tokens';

export interface MessageHit {
  id: string;
  header: string;
  sender_handle: string;
  recipients: string[];
  created_at: number;
}

@Injectable()
export class SearchRepository {
  private readonly db: Kysely<DB>;

  constructor(@InjectDatabase() database: Database) {
    this.db = database.db;
  }

  /**
   * Full-text search (index `envelopes_search`) over envelopes the caller sent or received, newest
   * first. Every word of `q` must match a word of the envelope as a prefix.
   */
  async messages(agentId: number, q: string, limit: number): Promise<MessageHit[]> {
    const result = await sql<MessageHit>`
      with query as (
        select to_tsquery('simple', string_agg(quote_literal(lexeme) || ':*', ' & ')) as tsq
        from unnest(to_tsvector('simple', ${q.replaceAll('\u0000', '')}))
      )
      select e.id, e.header, a.handle as sender_handle, e.recipients, e.created_at
      from envelopes e join agents a on a.id = e.sender_id, query
      where query.tsq is not null and e.search @@ query.tsq
        and (e.sender_id = ${agentId}
             or exists (select 1 from mailbox_entries m where m.mailbox_id = ${agentId} and m.envelope_id = e.id))
      order by e.created_at desc, e.id desc
      limit ${limit}`.execute(this.db);
    return result.rows;
  }
}
