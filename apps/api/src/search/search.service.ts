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

/** Candidates fetched per query while filling a page of visible agents, and at most this many queries. */
const SCAN_BATCH = 100;
const SCAN_BATCHES = 20;

/** Discovery search and message search (ASMTP.md §3.9); invisible items are silently filtered. */
@Injectable()
export class SearchService {
  constructor(
    private readonly agents: AgentsRepository,
    private readonly search: SearchRepository,
  ) {}

  /**
   * Up to `limit` agents visible to the caller, by handle. The cursor names the last agent returned
   * (one the caller sees), never a candidate it may not see: a cursor, or a short page that still
   * has one, would otherwise reveal that a hidden agent matching `q` exists (DESIGN.md invariant 7).
   */
  async agentsPage(caller: Agent, query: SearchQuery) {
    const cursor = query.cursor === undefined ? undefined : Buffer.from(query.cursor, 'base64url').toString('utf8');
    // Handles hold no NUL (nor can Postgres text), so `handle > 'a\0…'` is exactly `handle > 'a'`.
    let after = cursor?.split('\u0000')[0];
    const visible: Agent[] = [];
    let exhausted = false;
    for (let batch = 0; batch < SCAN_BATCHES && visible.length < query.limit; batch++) {
      const candidates = await this.candidates(query.q, SCAN_BATCH, after);
      for (const agent of candidates) {
        if (isVisibleTo(agent, caller.handle)) visible.push(agent);
        if (visible.length === query.limit) break;
      }
      after = candidates.at(-1)?.handle;
      if (candidates.length < SCAN_BATCH) {
        exhausted = true;
        break;
      }
    }
    const last = visible.at(-1);
    // Past the scan bound with a short page, continue from the last visible agent (or stop).
    const more = visible.length === query.limit || (!exhausted && last !== undefined);
    return {
      agents: visible.map(agentHit),
      next_cursor: more && last ? Buffer.from(last.handle, 'utf8').toString('base64url') : null,
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
