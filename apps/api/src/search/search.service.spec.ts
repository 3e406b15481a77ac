import type { AgentsRepository, SearchRepository } from '#db';
import { isVisibleTo, type Agent } from '#domain';
import { SearchService } from './search.service';

/** Agents `@o.<name>` by handle; `public` ones are visible to anyone. */
function directory(names: Array<[string, 'public' | 'private']>): Agent[] {
  return names
    .map(
      ([name, visibility], id) =>
        ({ id, handle: `@o.${name}`, visibility, allowlist: [], display_name: name }) as unknown as Agent,
    )
    .sort((a, b) => (a.handle < b.handle ? -1 : 1));
}

/** The repository's contract: visible agents matching `q`, by handle, after `afterHandle`, at most `limit`. */
function service(agents: Agent[]): SearchService {
  const repository = {
    searchVisible: async (q: string, callerHandle: string, limit: number, afterHandle?: string) =>
      agents
        .filter(
          (a) =>
            a.handle.includes(q) &&
            isVisibleTo(a, callerHandle) &&
            (afterHandle === undefined || a.handle > afterHandle),
        )
        .slice(0, limit),
  } as unknown as AgentsRepository;
  return new SearchService(repository, {} as SearchRepository);
}

const caller = { id: -1, handle: '@x.caller', allowlist: [], visibility: 'private' } as unknown as Agent;
const handles = (page: { agents: Array<{ canonical_handle: string }> }) => page.agents.map((a) => a.canonical_handle);
const decode = (cursor: string | null) => (cursor === null ? null : Buffer.from(cursor, 'base64url').toString('utf8'));

describe('SearchService.agentsPage: the cursor never names an agent the caller cannot see', () => {
  it('a full page of visible agents carries a cursor naming the last one returned', async () => {
    const search = service(
      directory([
        ['a1', 'private'],
        ['a2', 'public'],
        ['a3', 'private'],
        ['a4', 'public'],
        ['a5', 'public'],
      ]),
    );
    const page = await search.agentsPage(caller, { q: '@o.', limit: 2 });
    expect(handles(page)).toEqual(['@o.a2', '@o.a4']);
    expect(decode(page.next_cursor)).toBe('@o.a4');
    const next = await search.agentsPage(caller, { q: '@o.', limit: 2, cursor: page.next_cursor! });
    expect(next).toEqual({ agents: [expect.objectContaining({ canonical_handle: '@o.a5' })], next_cursor: null });
  });

  it('a query matching only hidden agents answers exactly as one matching nothing', async () => {
    const search = service(
      directory([
        ['hidden', 'private'],
        ['other', 'private'],
      ]),
    );
    for (const limit of [1, 2, 50]) {
      expect(await search.agentsPage(caller, { q: 'hid', limit })).toEqual({ agents: [], next_cursor: null });
      expect(await search.agentsPage(caller, { q: 'zzz', limit })).toEqual({ agents: [], next_cursor: null });
    }
  });

  it('a needle with a NUL matches nothing (no handle or display name can hold one)', async () => {
    const search = service(directory([['a1', 'public']]));
    expect(await search.agentsPage(caller, { q: 'a\u0000', limit: 5 })).toEqual({ agents: [], next_cursor: null });
  });
});
