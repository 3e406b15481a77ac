import { useEffect, useState } from 'preact/hooks';
import type { AdminAgent } from '../api';
import type { Session } from '../app';
import { ErrorBanner, href, Scroll, TokenReveal, useLoad } from '../ui';

const PAGE = 50;

function initialQuery(): string {
  return new URLSearchParams(location.hash.split('?')[1] ?? '').get('q') ?? '';
}

export function AgentsPage({ session }: { session: Session }) {
  const { api, scope } = session;
  const [typed, setTyped] = useState(initialQuery);
  const [q, setQ] = useState(typed);
  // Keyset paging: the `after` handle of every page seen so far, so Previous can go back.
  const [afters, setAfters] = useState<Array<string | null>>([null]);
  const [created, setCreated] = useState<AdminAgent | null>(null);
  const after = afters[afters.length - 1];
  const { data, error, loading, reload } = useLoad(() => api.agents(q, after, PAGE), [api, q, after]);

  // The server does the search; typing waits a moment so each key is not one request.
  useEffect(() => {
    const timer = setTimeout(() => {
      setQ(typed.trim());
      setAfters([null]);
    }, 250);
    return () => clearTimeout(timer);
  }, [typed]);

  return (
    <>
      <h1>Agents</h1>
      {created && <TokenReveal label={`Token of ${created.handle}`} token={created.token ?? ''} onDone={() => setCreated(null)} />}
      <CreateAgent
        session={session}
        prefix={scope.scope === 'org' ? `@${scope.org}.` : '@'}
        onCreated={(agent) => {
          setCreated(agent);
          reload();
        }}
      />
      <form role="search" onSubmit={(e) => e.preventDefault()} class="row">
        <label class="grow">
          Search agents
          <input type="search" name="q" value={typed} onInput={(e) => setTyped(e.currentTarget.value)} placeholder="handle or display name" />
        </label>
      </form>
      <ErrorBanner error={error} />
      <p class="sr-only" aria-live="polite">
        {loading ? 'Loading agents' : `${data?.agents.length ?? 0} agents on this page`}
      </p>
      {data && (
        <Scroll label="Agents">
          <table>
            <thead>
              <tr>
                <th scope="col">Handle</th>
                <th scope="col">Display name</th>
                <th scope="col">Policy</th>
                <th scope="col">Visibility</th>
                <th scope="col">Unread</th>
              </tr>
            </thead>
            <tbody>
              {data.agents.length === 0 && (
                <tr>
                  <td colSpan={5}>No agents match.</td>
                </tr>
              )}
              {data.agents.map((agent) => (
                <tr key={agent.handle}>
                  <th scope="row">
                    <a href={href('agents', agent.handle)}>{agent.handle}</a>
                  </th>
                  <td>{agent.display_name}</td>
                  <td>{agent.policy}</td>
                  <td>{agent.visibility}</td>
                  <td>{agent.unread ?? '—'}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </Scroll>
      )}
      <nav class="row pager" aria-label="Agent pages">
        <button type="button" disabled={afters.length === 1} onClick={() => setAfters(afters.slice(0, -1))}>
          Previous page
        </button>
        <span>Page {afters.length}</span>
        <button type="button" disabled={!data?.next} onClick={() => data?.next && setAfters([...afters, data.next])}>
          Next page
        </button>
      </nav>
    </>
  );
}

function CreateAgent({ session, prefix, onCreated }: { session: Session; prefix: string; onCreated: (agent: AdminAgent) => void }) {
  const [handle, setHandle] = useState(prefix);
  const [displayName, setDisplayName] = useState('');
  const [policy, setPolicy] = useState<'allowlist' | 'open'>('allowlist');
  const [error, setError] = useState<unknown>(undefined);
  const submit = async (event: Event) => {
    event.preventDefault();
    setError(undefined);
    try {
      const agent = await session.api.createAgent({
        handle: handle.trim(),
        policy,
        ...(displayName.trim() ? { display_name: displayName.trim() } : {}),
      });
      setHandle(prefix);
      setDisplayName('');
      onCreated(agent);
    } catch (failure) {
      setError(failure);
    }
  };
  return (
    <form class="panel" onSubmit={(e) => void submit(e)} aria-labelledby="create-agent">
      <h2 id="create-agent">Create an agent</h2>
      <div class="row wrap">
        <label>
          Handle
          <input name="handle" class="mono" value={handle} onInput={(e) => setHandle(e.currentTarget.value)} required spellcheck={false} />
        </label>
        <label>
          Display name
          <input name="display_name" value={displayName} onInput={(e) => setDisplayName(e.currentTarget.value)} />
        </label>
        <label>
          Inbound policy
          <select name="policy" value={policy} onChange={(e) => setPolicy(e.currentTarget.value as 'allowlist' | 'open')}>
            <option value="allowlist">allowlist</option>
            <option value="open">open</option>
          </select>
        </label>
        <button type="submit">Create</button>
      </div>
      <ErrorBanner error={error} />
    </form>
  );
}
