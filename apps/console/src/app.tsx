import { useEffect, useRef, useState } from 'preact/hooks';
import { Api, tokenStore, type Scope } from './api';
import { AgentPage } from './pages/agent';
import { AgentsPage } from './pages/agents';
import { MessagePage } from './pages/message';
import { OrgsPage } from './pages/orgs';
import { OverviewPage } from './pages/overview';
import { ErrorBanner } from './ui';

export interface Session {
  api: Api;
  scope: Scope;
}

/** Hash routes (`#/agents/@acme.bot`): relative asset URLs keep working under any path prefix. */
function useRoute(): string[] {
  const read = () =>
    location.hash
      .replace(/^#\/?/, '')
      .split('?')[0]
      .split('/')
      .filter((part) => part !== '')
      .map((part) => decodeURIComponent(part));
  const [route, setRoute] = useState(read);
  useEffect(() => {
    const onChange = () => setRoute(read());
    addEventListener('hashchange', onChange);
    return () => removeEventListener('hashchange', onChange);
  }, []);
  return route;
}

export function App() {
  const [session, setSession] = useState<Session | null>(null);
  const [restoring, setRestoring] = useState(tokenStore.get() !== null);
  const [error, setError] = useState<unknown>(undefined);

  const signIn = async (token: string) => {
    const api = new Api(token);
    const scope = await api.whoami();
    tokenStore.set(token);
    setSession({ api, scope });
  };

  useEffect(() => {
    const saved = tokenStore.get();
    if (saved === null) return;
    signIn(saved).then(
      () => setRestoring(false),
      (failure: unknown) => {
        tokenStore.clear();
        setError(failure);
        setRestoring(false);
      },
    );
  }, []);

  const signOut = () => {
    tokenStore.clear();
    setSession(null);
    location.hash = '#/';
  };

  if (restoring) return <p class="loading">Signing in…</p>;
  if (!session) return <SignIn onSignIn={signIn} initialError={error} />;
  return <Shell session={session} onSignOut={signOut} />;
}

function SignIn({ onSignIn, initialError }: { onSignIn: (token: string) => Promise<void>; initialError: unknown }) {
  const [token, setToken] = useState('');
  const [error, setError] = useState<unknown>(initialError);
  const [busy, setBusy] = useState(false);
  const submit = async (event: Event) => {
    event.preventDefault();
    setBusy(true);
    try {
      await onSignIn(token.trim());
    } catch (failure) {
      setError(failure);
      setBusy(false);
    }
  };
  return (
    <main id="main" class="signin">
      <h1>Roost console</h1>
      <form onSubmit={(e) => void submit(e)}>
        <label>
          Admin token
          <input
            name="token"
            type="password"
            value={token}
            onInput={(e) => setToken(e.currentTarget.value)}
            autoComplete="off"
            required
            aria-describedby="token-help"
          />
        </label>
        <p id="token-help" class="hint">
          The operator admin token or an organization's admin token. It is kept in this tab's session
          storage only and forgotten when the tab closes.
        </p>
        <ErrorBanner error={error} />
        <button type="submit" disabled={busy || token.trim() === ''}>
          Sign in
        </button>
      </form>
    </main>
  );
}

function Shell({ session, onSignOut }: { session: Session; onSignOut: () => void }) {
  const route = useRoute();
  const main = useRef<HTMLElement>(null);
  const key = route.join('/');
  // Moving focus to the new page tells keyboard and screen-reader users the view changed.
  useEffect(() => main.current?.focus(), [key]);
  const operator = session.scope.scope === 'operator';
  const [section = 'overview', handle, sub, id] = route;
  let page;
  if (section === 'orgs' && operator) page = <OrgsPage session={session} />;
  else if (section === 'agents' && handle && sub === 'messages' && id) page = <MessagePage session={session} handle={handle} id={id} />;
  else if (section === 'agents' && handle) page = <AgentPage session={session} handle={handle} />;
  else if (section === 'agents') page = <AgentsPage session={session} />;
  else page = <OverviewPage session={session} />;
  const current = (name: string) => (section === name ? 'page' : undefined);
  return (
    <>
      <a class="skip" href="#main" onClick={(e) => {
          e.preventDefault();
          main.current?.focus();
        }}>
        Skip to content
      </a>
      <header class="top">
        <span class="brand">Roost</span>
        <nav aria-label="Sections">
          <a href="#/" aria-current={current('overview')}>
            Overview
          </a>
          {operator && (
            <a href="#/orgs" aria-current={current('orgs')}>
              Organizations
            </a>
          )}
          <a href="#/agents" aria-current={current('agents')}>
            Agents
          </a>
        </nav>
        <span class="scope" data-testid="scope">
          {session.scope.scope === 'operator' ? 'Operator' : `Organization ${session.scope.org}`}
        </span>
        <button type="button" onClick={onSignOut}>
          Sign out
        </button>
      </header>
      <main id="main" ref={main} tabIndex={-1} key={key}>
        {page}
      </main>
    </>
  );
}
