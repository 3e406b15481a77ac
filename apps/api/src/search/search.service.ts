import { Injectable } from '@nestjs/common';
import { AgentsRepository, SearchRepository } from '#db';
import { isVisibleTo, type Agent, type SearchQuery } from '#domain';

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

  /** `limit` candidates by handle, then the visibility filter: a page may be short yet have a cursor. */
  async agentsPage(caller: Agent, query: SearchQuery) {
    const after = query.cursor === undefined ? undefined : Buffer.from(query.cursor, 'base64url').toString('utf8');
    // Handles hold no NUL (nor can Postgres text), so `handle > 'a\0…'` is exactly `handle > 'a'`.
    const candidates = await this.candidates(query.q, query.limit, after?.split('\u0000')[0]);
    const last = candidates.at(-1);
    return {
      agents: candidates.filter((agent) => isVisibleTo(agent, caller.handle)).map(agentHit),
      next_cursor: candidates.length === query.limit && last ? Buffer.from(last.handle, 'utf8').toString('base64url') : null,
    };
  }

  async everything(caller: Agent, query: SearchQuery) {
    const candidates = await this.candidates(query.q, Math.min(4 * query.limit, 100));
    const agents = candidates.filter((agent) => isVisibleTo(agent, caller.handle)).slice(0, query.limit);
    return { agents: agents.map(agentHit), people: [], organizations: [] };
  }

  /** No handle or display name holds a NUL (Postgres text cannot), so a needle with one matches nothing. */
  private candidates(q: string, limit: number, afterHandle?: string): Promise<Agent[]> {
    return q.includes('\u0000') ? Promise.resolve([]) : this.agents.searchCandidates(q, limit, afterHandle);
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
