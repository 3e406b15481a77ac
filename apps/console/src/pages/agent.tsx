import { useEffect, useState } from 'preact/hooks';
import type { AdminAgent, Header } from '../api';
import type { Session } from '../app';
import { ConfirmDelete, ErrorBanner, errorText, href, Scroll, TokenReveal, useLoad, when } from '../ui';

export function AgentPage({ session, handle }: { session: Session; handle: string }) {
  const { api } = session;
  const { data: agent, error, reload } = useLoad(() => api.agent(handle), [api, handle]);
  const [token, setToken] = useState<string | null>(null);
  const [deleting, setDeleting] = useState(false);
  const [actionError, setActionError] = useState<unknown>(undefined);

  const rotate = async () => {
    try {
      setToken((await api.rotateAgent(handle)).token ?? '');
    } catch (failure) {
      setActionError(failure);
    }
  };

  return (
    <>
      <p>
        <a href="#/agents">← Agents</a>
      </p>
      <h1 class="mono">{handle}</h1>
      <ErrorBanner error={error ?? actionError} />
      {token !== null && <TokenReveal label={`New token of ${handle}`} token={token} onDone={() => setToken(null)} />}
      {deleting && (
        <ConfirmDelete
          what="agent"
          name={handle}
          onCancel={() => setDeleting(false)}
          onConfirm={async () => {
            await api.deleteAgent(handle);
            location.hash = '#/agents';
          }}
        >
          <p>Deleting removes its tokens, its own mailbox entries, its allowlist and the blocks it made, its schedules, and files not attached to a delivered envelope.</p>
          <p>
            Envelopes it already delivered <strong>stay</strong> in their recipients' mailboxes, readable, with <span class="mono">from</span> unchanged. While any
            is stored, the handle cannot be created again.
          </p>
        </ConfirmDelete>
      )}
      {agent && (
        <div class="cards">
          <Settings session={session} agent={agent} onSaved={reload} />
          <section aria-labelledby="access">
            <h2 id="access">Access</h2>
            <p>
              Allowlist (edited only by the agent itself):{' '}
              {agent.allowlist.length === 0 ? 'empty' : <span class="mono">{agent.allowlist.join(', ')}</span>}
            </p>
            <div class="row wrap">
              <button type="button" onClick={() => void rotate()}>
                Rotate token
              </button>
              <button type="button" class="destructive" onClick={() => setDeleting(true)}>
                Delete agent
              </button>
            </div>
          </section>
        </div>
      )}
      <Mailbox session={session} handle={handle} />
      <Schedules session={session} handle={handle} />
    </>
  );
}

function Settings({ session, agent, onSaved }: { session: Session; agent: AdminAgent; onSaved: () => void }) {
  const [policy, setPolicy] = useState(agent.policy);
  const [displayName, setDisplayName] = useState(agent.display_name);
  const [visibility, setVisibility] = useState(agent.visibility);
  const [guard, setGuard] = useState(agent.content_guard ?? '');
  const [retention, setRetention] = useState(agent.retention_days === undefined ? '' : String(agent.retention_days));
  const [status, setStatus] = useState<string>('');
  const save = async (event: Event) => {
    event.preventDefault();
    try {
      await session.api.updateAgent(agent.handle, {
        policy,
        display_name: displayName,
        visibility,
        content_guard: guard === '' ? null : (guard as 'off' | 'warn' | 'block'),
        retention_days: retention.trim() === '' ? null : Number(retention),
      });
      setStatus('Saved.');
      onSaved();
    } catch (failure) {
      setStatus(errorText(failure));
    }
  };
  return (
    <form onSubmit={(e) => void save(e)} aria-labelledby="settings">
      <h2 id="settings">Settings</h2>
      <label>
        Display name
        <input value={displayName} onInput={(e) => setDisplayName(e.currentTarget.value)} />
      </label>
      <label>
        Inbound policy
        <select value={policy} onChange={(e) => setPolicy(e.currentTarget.value as AdminAgent['policy'])}>
          <option value="allowlist">allowlist</option>
          <option value="open">open</option>
        </select>
      </label>
      <label>
        Visibility
        <select value={visibility} onChange={(e) => setVisibility(e.currentTarget.value as AdminAgent['visibility'])}>
          <option value="private">private</option>
          <option value="public">public</option>
        </select>
      </label>
      <label>
        Content guard
        <select value={guard} onChange={(e) => setGuard(e.currentTarget.value)}>
          <option value="">organization default</option>
          <option value="off">off</option>
          <option value="warn">warn</option>
          <option value="block">block</option>
        </select>
      </label>
      <label>
        Retention (days, empty = organization default)
        <input type="number" min={1} value={retention} onInput={(e) => setRetention(e.currentTarget.value)} />
      </label>
      <button type="submit">Save settings</button>
      <p role="status">{status}</p>
    </form>
  );
}

type LiveState = 'connecting' | 'live' | 'reconnecting';

function Mailbox({ session, handle }: { session: Session; handle: string }) {
  const { api } = session;
  const [unreadOnly, setUnreadOnly] = useState(false);
  const [headers, setHeaders] = useState<Header[]>([]);
  const [next, setNext] = useState<{ created_at: number; envelope_id: string } | null>(null);
  const [error, setError] = useState<unknown>(undefined);
  const [live, setLive] = useState<LiveState>('connecting');
  const [arrived, setArrived] = useState(0);

  useEffect(() => {
    let stale = false;
    setHeaders([]);
    setNext(null);
    api.mailbox(handle, { unread: unreadOnly }).then(
      (page) => {
        if (stale) return;
        // A live arrival may have landed before the first page: keep it, drop the duplicate.
        setHeaders((seen) => merge(seen, page.envelope_headers));
        setNext(page.next_cursor);
      },
      (failure: unknown) => !stale && setError(failure),
    );
    return () => {
      stale = true;
    };
  }, [api, handle, unreadOnly]);

  // The live feed: reconnects with a growing pause until the page goes away.
  useEffect(() => {
    const abort = new AbortController();
    let pause = 500;
    const loop = async () => {
      while (!abort.signal.aborted) {
        try {
          await api.events(
            handle,
            abort.signal,
            (header) => {
              setHeaders((seen) => merge([header], seen));
              setArrived((count) => count + 1);
            },
            () => {
              setLive('live');
              pause = 500;
            },
          );
        } catch {
          // Dropped or refused: fall through to the pause and try again.
        }
        if (abort.signal.aborted) return;
        setLive('reconnecting');
        await new Promise((done) => setTimeout(done, pause));
        pause = Math.min(pause * 2, 15_000);
      }
    };
    void loop();
    return () => abort.abort();
  }, [api, handle]);

  const older = async () => {
    if (!next) return;
    try {
      const page = await api.mailbox(handle, { unread: unreadOnly, after: next });
      setHeaders((seen) => merge(seen, page.envelope_headers));
      setNext(page.next_cursor);
    } catch (failure) {
      setError(failure);
    }
  };

  return (
    <section aria-labelledby="mailbox">
      <h2 id="mailbox">Mailbox</h2>
      <div class="row wrap">
        <label class="check">
          <input type="checkbox" checked={unreadOnly} onChange={(e) => setUnreadOnly(e.currentTarget.checked)} />
          Unread only
        </label>
        <span class={`live ${live}`} role="status" data-testid="live">
          {live === 'live' ? 'Live' : live === 'connecting' ? 'Connecting…' : 'Reconnecting…'}
          {arrived > 0 ? ` · ${arrived} new` : ''}
        </span>
      </div>
      <p class="hint">Reading here never marks anything read for the agent.</p>
      <ErrorBanner error={error} />
      <Scroll label="Mailbox headers">
        <table data-testid="mailbox">
          <thead>
            <tr>
              <th scope="col">Date</th>
              <th scope="col">From</th>
              <th scope="col">To</th>
              <th scope="col">Subject</th>
              <th scope="col">State</th>
            </tr>
          </thead>
          <tbody>
            {headers.length === 0 && (
              <tr>
                <td colSpan={5}>No envelopes.</td>
              </tr>
            )}
            {headers.map((header) => (
              <tr key={header.id} class={header.unread ? 'unread' : undefined}>
                <td>{when(header.created_at)}</td>
                <td class="mono">{header.from}</td>
                <td class="mono">{[...header.to, ...(header.cc ?? [])].join(', ')}</td>
                <td>
                  <a href={href('agents', handle, 'messages', header.id)}>{header.subject || '(no subject)'}</a>
                  {header.flags && header.flags.length > 0 && <span class="flags"> {header.flags.join(', ')}</span>}
                </td>
                <td>
                  {header.direction === 'out' ? 'sent' : header.unread ? 'unread' : 'read'}
                  {header.receipt ? ` · receipt ${header.receipt.status}` : ''}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </Scroll>
      {next && (
        <button type="button" onClick={() => void older()}>
          Older envelopes
        </button>
      )}
    </section>
  );
}

/** Newest first, each envelope once. */
function merge(first: Header[], second: Header[]): Header[] {
  const seen = new Set<string>();
  return [...first, ...second]
    .filter((header) => (seen.has(header.id) ? false : (seen.add(header.id), true)))
    .sort((a, b) => b.created_at - a.created_at || (a.id < b.id ? 1 : -1));
}

function Schedules({ session, handle }: { session: Session; handle: string }) {
  const { api } = session;
  const { data, error, reload } = useLoad(() => api.schedules(handle), [api, handle]);
  const [actionError, setActionError] = useState<unknown>(undefined);
  const act = async (action: () => Promise<unknown>) => {
    setActionError(undefined);
    try {
      await action();
      reload();
    } catch (failure) {
      setActionError(failure);
    }
  };
  return (
    <section aria-labelledby="schedules">
      <h2 id="schedules">Schedules</h2>
      <ErrorBanner error={error ?? actionError} />
      {data && data.length === 0 && <p>No schedules.</p>}
      {data && data.length > 0 && (
        <Scroll label="Schedules">
          <table>
            <thead>
              <tr>
                <th scope="col">Subject</th>
                <th scope="col">To</th>
                <th scope="col">Status</th>
                <th scope="col">Next run</th>
                <th scope="col">Sent</th>
                <th scope="col">Actions</th>
              </tr>
            </thead>
            <tbody>
              {data.map((schedule) => (
                <tr key={schedule.id}>
                  <td>{schedule.envelope.subject || '(no subject)'}</td>
                  <td class="mono">{schedule.envelope.to.join(', ')}</td>
                  <td>{schedule.status}</td>
                  <td>{when(schedule.next_run_at)}</td>
                  <td>{schedule.send_count}</td>
                  <td class="actions">
                    {schedule.status === 'active' && (
                      <button type="button" onClick={() => void act(() => api.setSchedule(handle, schedule.id, 'paused'))}>
                        Pause
                      </button>
                    )}
                    {(schedule.status === 'paused' || schedule.status === 'failed') && (
                      <button type="button" onClick={() => void act(() => api.setSchedule(handle, schedule.id, 'active'))}>
                        Resume
                      </button>
                    )}
                    {(schedule.status === 'active' || schedule.status === 'paused' || schedule.status === 'failed') && (
                      <button type="button" class="destructive" onClick={() => void act(() => api.cancelSchedule(handle, schedule.id))}>
                        Cancel
                      </button>
                    )}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </Scroll>
      )}
    </section>
  );
}
