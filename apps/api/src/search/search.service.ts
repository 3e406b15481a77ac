import { Injectable } from '@nestjs/common';
import { AgentsRepository, SearchRepository } from '#db';
import type { Agent, SearchQuery } from '#domain';

const agentHit = (agent: Agent) => ({
  type: 'agent',
  id: agent.handle,
  canonical_handle: agent.handle,
  display_name: agent.display_name,
  image_url: null,
});

/** Discovery search and message search (ASMTP.md §3.9); invisible items are silently filtered. */
@Injectable()
export class SearchService {
  constructor(
    private readonly agents: AgentsRepository,
    private readonly search: SearchRepository,
  ) {}

  /**
   * Up to `limit` agents visible to the caller, by handle; the cursor names the last one returned.
   * Hidden agents are filtered in the query, so neither a cursor nor a short page can reveal that a
   * hidden agent matching `q` exists (DESIGN.md invariant 7).
   */
  async agentsPage(caller: Agent, query: SearchQuery) {
    const cursor = query.cursor === undefined ? undefined : Buffer.from(query.cursor, 'base64url').toString('utf8');
    // Handles hold no NUL (nor can Postgres text), so `handle > 'a\0…'` is exactly `handle > 'a'`.
    const agents = await this.visible(caller, query.q, query.limit, cursor?.split('\u0000')[0]);
    const last = agents.at(-1);
    return {
      agents: agents.map(agentHit),
      next_cursor:
        agents.length === query.limit && last ? Buffer.from(last.handle, 'utf8').toString('base64url') : null,
    };
  }

  async everything(caller: Agent, query: SearchQuery) {
    const agents = await this.visible(caller, query.q, query.limit);
    return { agents: agents.map(agentHit), people: [], organizations: [] };
  }

  /** No handle or display name holds a NUL (Postgres text cannot), so a needle with one matches nothing. */
  private visible(caller: Agent, q: string, limit: number, afterHandle?: string): Promise<Agent[]> {
    return q.includes('\u0000') ? Promise.resolve([]) : this.agents.searchVisible(q, caller.handle, limit, afterHandle);
  }

  /** Envelopes the caller sent or received (EXTENSIONS.md), newest first; reads nothing as read. */
  async messages(caller: Agent, query: SearchQuery) {
    const hits = await this.search.messages(caller.id, query.q, query.limit);
    return {
      envelopes: hits.map((hit) => {
        const header = JSON.parse(hit.header) as { subject?: string; date_ms: number };
        return {
          envelope_id: hit.id,
          sender_handle: hit.sender_handle,
          recipient_handles: hit.recipients,
          subject: header.subject ?? null,
          snippet: null,
          created_at: hit.created_at,
          date_ms: header.date_ms,
        };
      }),
    };
  }
}
