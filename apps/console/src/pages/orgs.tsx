import { useState } from 'preact/hooks';
import type { Org } from '../api';
import type { Session } from '../app';
import { ConfirmDelete, ErrorBanner, href, Scroll, TokenReveal, useLoad, when } from '../ui';

type GuardPolicy = Org['content_guard'];

/** `""` in the retention field means keep forever (`null`). */
function parseRetention(text: string): number | null {
  return text.trim() === '' ? null : Number(text);
}

export function OrgsPage({ session }: { session: Session }) {
  const { api } = session;
  const { data, error, reload } = useLoad(() => api.orgs(), [api]);
  const [reveal, setReveal] = useState<{ label: string; token: string } | null>(null);
  const [editing, setEditing] = useState<string | null>(null);
  const [deleting, setDeleting] = useState<string | null>(null);
  const [actionError, setActionError] = useState<unknown>(undefined);

  const rotate = async (name: string) => {
    setActionError(undefined);
    try {
      const org = await api.rotateOrg(name);
      setReveal({ label: `New admin token of ${name}`, token: org.admin_token ?? '' });
    } catch (failure) {
      setActionError(failure);
    }
  };

  return (
    <>
      <h1>Organizations</h1>
      {reveal && <TokenReveal label={reveal.label} token={reveal.token} onDone={() => setReveal(null)} />}
      <CreateOrg
        session={session}
        onCreated={(org) => {
          setReveal({ label: `Admin token of ${org.name}`, token: org.admin_token ?? '' });
          reload();
        }}
      />
      <ErrorBanner error={error ?? actionError} />
      {deleting && (
        <ConfirmDelete
          what="organization"
          name={deleting}
          onCancel={() => setDeleting(null)}
          onConfirm={async () => {
            await api.deleteOrg(deleting);
            setDeleting(null);
            reload();
          }}
        >
          <p>
            Removes the organization, its admin token and every agent <span class="mono">@{deleting}.*</span> with their
            tokens, mailbox entries, allowlists, blocks, schedules and undelivered files. Envelopes its agents already
            delivered stay in their recipients' mailboxes.
          </p>
        </ConfirmDelete>
      )}
      {data && (
        <Scroll label="Organizations">
          <table>
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Agents</th>
                <th scope="col">Retention</th>
                <th scope="col">Content guard</th>
                <th scope="col">Created</th>
                <th scope="col">Actions</th>
              </tr>
            </thead>
            <tbody>
              {data.length === 0 && (
                <tr>
                  <td colSpan={6}>No organizations yet.</td>
                </tr>
              )}
              {data.map((org) =>
                editing === org.name ? (
                  <EditOrg
                    key={org.name}
                    session={session}
                    org={org}
                    onDone={() => {
                      setEditing(null);
                      reload();
                    }}
                  />
                ) : (
                  <tr key={org.name}>
                    <th scope="row">
                      <a href={`${href('agents')}?q=${encodeURIComponent(`@${org.name}.`)}`}>{org.name}</a>
                    </th>
                    <td>
                      {org.agent_count ?? '—'}
                      {org.max_agents !== null ? ` / ${org.max_agents}` : ''}
                    </td>
                    <td>{org.retention_days === null ? 'forever' : `${org.retention_days} days`}</td>
                    <td>{org.content_guard}</td>
                    <td>{when(org.created_at)}</td>
                    <td class="actions">
                      <button type="button" onClick={() => setEditing(org.name)} aria-label={`Settings of ${org.name}`}>
                        Settings
                      </button>
                      <button type="button" onClick={() => void rotate(org.name)} aria-label={`Rotate token of ${org.name}`}>
                        Rotate token
                      </button>
                      <button type="button" class="destructive" onClick={() => setDeleting(org.name)} aria-label={`Delete ${org.name}`}>
                        Delete
                      </button>
                    </td>
                  </tr>
                ),
              )}
            </tbody>
          </table>
        </Scroll>
      )}
    </>
  );
}

function GuardSelect({ value, onChange, id }: { value: GuardPolicy; onChange: (value: GuardPolicy) => void; id: string }) {
  return (
    <select id={id} value={value} onChange={(e) => onChange(e.currentTarget.value as GuardPolicy)}>
      <option value="off">off</option>
      <option value="warn">warn</option>
      <option value="block">block</option>
    </select>
  );
}

function CreateOrg({ session, onCreated }: { session: Session; onCreated: (org: Org) => void }) {
  const [name, setName] = useState('');
  const [retention, setRetention] = useState('');
  const [guard, setGuard] = useState<GuardPolicy>('off');
  const [error, setError] = useState<unknown>(undefined);
  const submit = async (event: Event) => {
    event.preventDefault();
    setError(undefined);
    try {
      const org = await session.api.createOrg(name.trim(), { retention_days: parseRetention(retention), content_guard: guard });
      setName('');
      setRetention('');
      onCreated(org);
    } catch (failure) {
      setError(failure);
    }
  };
  return (
    <form class="panel" onSubmit={(e) => void submit(e)} aria-labelledby="create-org">
      <h2 id="create-org">Create an organization</h2>
      <div class="row wrap">
        <label>
          Name
          <input name="org-name" value={name} onInput={(e) => setName(e.currentTarget.value)} required pattern="[a-z0-9][a-z0-9-]*" />
        </label>
        <label>
          Retention (days, empty = forever)
          <input name="org-retention" type="number" min={1} value={retention} onInput={(e) => setRetention(e.currentTarget.value)} />
        </label>
        <label for="create-org-guard">
          Content guard
          <GuardSelect id="create-org-guard" value={guard} onChange={setGuard} />
        </label>
        <button type="submit">Create</button>
      </div>
      <ErrorBanner error={error} />
    </form>
  );
}

function EditOrg({ session, org, onDone }: { session: Session; org: Org; onDone: () => void }) {
  const [retention, setRetention] = useState(org.retention_days === null ? '' : String(org.retention_days));
  const [guard, setGuard] = useState<GuardPolicy>(org.content_guard);
  const [maxAgents, setMaxAgents] = useState(org.max_agents === null ? '' : String(org.max_agents));
  const [error, setError] = useState<unknown>(undefined);
  const save = async (event: Event) => {
    event.preventDefault();
    try {
      await session.api.updateOrg(org.name, {
        retention_days: parseRetention(retention),
        content_guard: guard,
        max_agents: maxAgents.trim() === '' ? null : Number(maxAgents),
      });
      onDone();
    } catch (failure) {
      setError(failure);
    }
  };
  const id = `edit-${org.name}`;
  return (
    <tr>
      <td colSpan={6}>
        <form onSubmit={(e) => void save(e)} aria-label={`Settings of ${org.name}`} class="row wrap">
          <strong class="mono">{org.name}</strong>
          <label>
            Retention (days, empty = forever)
            <input type="number" min={1} value={retention} onInput={(e) => setRetention(e.currentTarget.value)} />
          </label>
          <label for={`${id}-guard`}>
            Content guard
            <GuardSelect id={`${id}-guard`} value={guard} onChange={setGuard} />
          </label>
          <label>
            Agent quota (empty = none)
            <input type="number" min={0} value={maxAgents} onInput={(e) => setMaxAgents(e.currentTarget.value)} />
          </label>
          <button type="submit">Save</button>
          <button type="button" onClick={onDone}>
            Cancel
          </button>
          <ErrorBanner error={error} />
        </form>
      </td>
    </tr>
  );
}
