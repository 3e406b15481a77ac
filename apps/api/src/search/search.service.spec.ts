import type { AgentsRepository, SearchRepository } from '#db';
import type { Agent } from '#domain';
import { SearchService } from './search.service';

/** Agents `@o.<name>` by handle; `public` ones are visible to anyone. */
function directory(names: Array<[string, 'public' | 'private']>): Agent[] {
  return names
    .map(([name, visibility], id) => ({ id, handle: `@o.${name}`, visibility, allowlist: [], display_name: name }) as unknown as Agent)
    .sort((a, b) => (a.handle < b.handle ? -1 : 1));
}

/** The repository's contract: `limit` candidates matching `q`, by handle, after `afterHandle`. */
function service(agents: Agent[]): { search: SearchService; queries: () => number } {
  let queries = 0;
  const repository = {
    searchCandidates: async (q: string, limit: number, afterHandle?: string) => {
      queries++;
      return agents.filter((a) => a.handle.includes(q) && (afterHandle === undefined || a.handle > afterHandle)).slice(0, limit);
    },
  } as unknown as AgentsRepository;
  return { search: new SearchService(repository, {} as SearchRepository), queries: () => queries };
}

const caller = { id: -1, handle: '@x.caller', allowlist: [], visibility: 'private' } as unknown as Agent;
const handles = (page: { agents: Array<{ canonical_handle: string }> }) => page.agents.map((a) => a.canonical_handle);
const decode = (cursor: string | null) => (cursor === null ? null : Buffer.from(cursor, 'base64url').toString('utf8'));

describe('SearchService.agentsPage: the cursor never names an agent the caller cannot see', () => {
  it('fills the page past hidden candidates; the cursor is the last agent returned', async () => {
    const { search } = service(directory([['a1', 'private'], ['a2', 'public'], ['a3', 'private'], ['a4', 'public'], ['a5', 'public']]));
    const page = await search.agentsPage(caller, { q: '@o.', limit: 2 });
    expect(handles(page)).toEqual(['@o.a2', '@o.a4']);
    expect(decode(page.next_cursor)).toBe('@o.a4');
    const next = await search.agentsPage(caller, { q: '@o.', limit: 2, cursor: page.next_cursor! });
    expect(next).toEqual({ agents: [expect.objectContaining({ canonical_handle: '@o.a5' })], next_cursor: null });
  });

  it('a query matching only hidden agents answers exactly as one matching nothing', async () => {
    const { search } = service(directory([['hidden', 'private'], ['other', 'private']]));
    for (const limit of [1, 2, 50]) {
      expect(await search.agentsPage(caller, { q: 'hid', limit })).toEqual({ agents: [], next_cursor: null });
      expect(await search.agentsPage(caller, { q: 'zzz', limit })).toEqual({ agents: [], next_cursor: null });
    }
  });

  it('scans a bounded number of candidates per request', async () => {
    const many = Array.from({ length: 5_000 }, (_, i) => [`h${String(i).padStart(5, '0')}`, 'private'] as [string, 'private']);
    const { search, queries } = service(directory([...many, ['zz', 'public']]));
    const page = await search.agentsPage(caller, { q: '@o.', limit: 20 });
    // Past the bound with nothing visible there is no cursor that would not name a hidden agent.
    expect(page).toEqual({ agents: [], next_cursor: null });
    expect(queries()).toBe(20);
  });
});
