import { useEffect, useState } from 'preact/hooks';
import { ApiError, type StoredEnvelope } from '../api';
import type { Session } from '../app';
import { safeHref } from '../safe-href';
import { ErrorBanner, errorText, href, Scroll, useLoad, when } from '../ui';

type Part = StoredEnvelope['content_parts'][number];

/** How far up an in_reply_to chain the thread view walks when `references` is absent. */
const MAX_ANCESTORS = 20;

export function MessagePage({ session, handle, id }: { session: Session; handle: string; id: string }) {
  const { api } = session;
  const { data: envelope, error } = useLoad(() => api.message(handle, id), [api, handle, id]);
  return (
    <>
      <p>
        <a href={href('agents', handle)}>← Mailbox of {handle}</a>
      </p>
      <h1 data-testid="subject">{envelope ? envelope.subject || '(no subject)' : 'Envelope'}</h1>
      <ErrorBanner error={error} />
      {envelope && (
        <>
          <dl class="meta">
            <dt>From</dt>
            <dd class="mono">{envelope.from}</dd>
            <dt>To</dt>
            <dd class="mono">{envelope.to.join(', ')}</dd>
            {envelope.cc && (
              <>
                <dt>Cc</dt>
                <dd class="mono">{envelope.cc.join(', ')}</dd>
              </>
            )}
            <dt>Date</dt>
            <dd>{when(envelope.date_ms)}</dd>
            <dt>Id</dt>
            <dd class="mono">{envelope.id}</dd>
            {envelope.read !== undefined && (
              <>
                <dt>Read by {handle}</dt>
                <dd>{envelope.read ? 'yes' : 'no'}</dd>
              </>
            )}
          </dl>
          <Body session={session} handle={handle} parts={envelope.content_parts} />
          <Thread session={session} handle={handle} envelope={envelope} />
          <Delivery session={session} handle={handle} id={id} />
        </>
      )}
    </>
  );
}

function Body({ session, handle, parts }: { session: Session; handle: string; parts: Part[] }) {
  const [markdown, setMarkdown] = useState(true);
  return (
    <section aria-labelledby="body">
      <div class="row wrap">
        <h2 id="body">Body</h2>
        <label class="check">
          <input type="checkbox" checked={markdown} onChange={(e) => setMarkdown(e.currentTarget.checked)} />
          Render Markdown (sanitised)
        </label>
      </div>
      <div data-testid="body">
        {parts.map((part, index) => (
          <PartView key={index} session={session} handle={handle} part={part} markdown={markdown} />
        ))}
      </div>
    </section>
  );
}

function PartView({ session, handle, part, markdown }: { session: Session; handle: string; part: Part; markdown: boolean }) {
  if (part.type === 'text') return <TextPart text={String(part.text)} markdown={markdown} />;
  if (part.type === 'data') {
    return (
      <figure class="data">
        <figcaption>Data{typeof part.schema === 'string' ? ` (${part.schema})` : ''}</figcaption>
        <pre>{JSON.stringify(part.data, null, 2)}</pre>
      </figure>
    );
  }
  return <FileLink session={session} handle={handle} part={part} />;
}

type Renderer = (text: string) => string;
let renderer: Promise<Renderer> | null = null;

/** marked + DOMPurify are half the bundle: loaded with the first envelope, not the first page. */
function loadRenderer(): Promise<Renderer> {
  renderer ??= import('../markdown').then((module) => module.renderMarkdown);
  return renderer;
}

function TextPart({ text, markdown }: { text: string; markdown: boolean }) {
  const [render, setRender] = useState<Renderer | null>(null);
  useEffect(() => {
    if (markdown && !render) void loadRenderer().then((loaded) => setRender(() => loaded));
  }, [markdown, render]);
  // The only HTML the console inserts: sanitised by DOMPurify, under a CSP without inline script.
  // Until the sanitiser has loaded (or with Markdown off) the text is shown as text.
  if (markdown && render) return <div class="text markdown" dangerouslySetInnerHTML={{ __html: render(text) }} />;
  return <pre class="text">{text}</pre>;
}

/** A stored file's id: `file_id`, or the last segment of an operator `/files/{id}` URL. */
function fileId(part: Part): string | null {
  if (typeof part.file_id === 'string') return part.file_id;
  const match = typeof part.url === 'string' ? /\/files\/([^/?#]+)$/.exec(part.url) : null;
  return match ? decodeURIComponent(match[1]) : null;
}

function FileLink({ session, handle, part }: { session: Session; handle: string; part: Part }) {
  const [error, setError] = useState<unknown>(undefined);
  const name = typeof part.name === 'string' ? part.name : `${part.type} attachment`;
  const id = fileId(part);
  // The download needs the bearer header, so it is fetched and handed to the browser as a blob.
  const download = async () => {
    if (!id) return;
    try {
      const res = await session.api.file(handle, id);
      const url = URL.createObjectURL(await res.blob());
      const anchor = document.createElement('a');
      anchor.href = url;
      anchor.download = name.replace(/[/\\]/g, '_');
      anchor.click();
      setTimeout(() => URL.revokeObjectURL(url), 10_000);
    } catch (failure) {
      setError(failure);
    }
  };
  const external = id ? null : safeHref(part.url);
  return (
    <p class="file">
      {id ? (
        <button type="button" class="link" onClick={() => void download()}>
          Download {name}
        </button>
      ) : external ? (
        <a href={external} rel="noopener noreferrer nofollow" target="_blank">
          {name}
        </a>
      ) : (
        <span>
          {name} <span class="mono">{typeof part.url === 'string' ? part.url : ''}</span>
        </span>
      )}
      {typeof part.mime_type === 'string' && <span class="hint"> {part.mime_type}</span>}
      {typeof part.size === 'number' && <span class="hint"> {part.size} bytes</span>}
      <ErrorBanner error={error} />
    </p>
  );
}

interface ThreadEntry {
  id: string;
  envelope: (StoredEnvelope & { read?: boolean }) | null;
}

/**
 * The thread around this envelope: its ancestors (`references`, else the `in_reply_to` chain)
 * and the replies to it in this mailbox. Ancestors outside the mailbox show as "not in this mailbox".
 */
function Thread({ session, handle, envelope }: { session: Session; handle: string; envelope: StoredEnvelope }) {
  const { api } = session;
  const { data, error } = useLoad(async () => {
    const fetchOne = async (id: string) => {
      try {
        return await api.message(handle, id);
      } catch (failure) {
        if (failure instanceof ApiError && failure.status === 404) return null;
        throw failure;
      }
    };
    const ancestors: ThreadEntry[] = [];
    if (envelope.references && envelope.references.length > 0) {
      for (const id of envelope.references) ancestors.push({ id, envelope: await fetchOne(id) });
    } else {
      let parent = envelope.in_reply_to;
      while (parent && ancestors.length < MAX_ANCESTORS) {
        const found = await fetchOne(parent);
        ancestors.unshift({ id: parent, envelope: found });
        parent = found?.in_reply_to;
      }
    }
    const replies: string[] = [];
    let after: { created_at: number; envelope_id: string } | null = null;
    // Replies are found among the mailbox's headers (a bounded scan: the newest 500).
    for (let page = 0; page < 5; page++) {
      const listing = await api.mailbox(handle, { after, limit: 100 });
      for (const header of listing.envelope_headers) if (header.in_reply_to === envelope.id) replies.push(header.id);
      after = listing.next_cursor;
      if (!after) break;
    }
    return { ancestors, replies: await Promise.all(replies.map(async (id) => ({ id, envelope: await fetchOne(id) }))) };
  }, [api, handle, envelope.id]);
  if (!envelope.in_reply_to && !envelope.references?.length && data && data.replies.length === 0) return null;
  return (
    <section aria-labelledby="thread">
      <h2 id="thread">Thread</h2>
      <ErrorBanner error={error} />
      {data && (
        <ol class="thread" data-testid="thread">
          {data.ancestors.map((entry) => (
            <ThreadItem key={entry.id} handle={handle} entry={entry} />
          ))}
          <li aria-current="true" class="current">
            <strong>{envelope.subject || '(no subject)'}</strong> — <span class="mono">{envelope.from}</span> (this envelope)
          </li>
          {data.replies.map((entry) => (
            <ThreadItem key={entry.id} handle={handle} entry={entry} reply />
          ))}
        </ol>
      )}
    </section>
  );
}

function ThreadItem({ handle, entry, reply }: { handle: string; entry: ThreadEntry; reply?: boolean }) {
  return (
    <li class={reply ? 'reply' : undefined}>
      {entry.envelope ? (
        <>
          <a href={href('agents', handle, 'messages', entry.id)}>{entry.envelope.subject || '(no subject)'}</a> —{' '}
          <span class="mono">{entry.envelope.from}</span> {when(entry.envelope.date_ms)}
          {reply ? ' (reply)' : ''}
        </>
      ) : (
        <span>
          <span class="mono">{entry.id}</span> (not in this mailbox)
        </span>
      )}
    </li>
  );
}

function Delivery({ session, handle, id }: { session: Session; handle: string; id: string }) {
  const { api } = session;
  const receipts = useLoad(() => api.receipts(handle, id), [api, handle, id]);
  const status = useLoad(async () => {
    try {
      return await api.status(handle, id);
    } catch (failure) {
      // Delivery status belongs to the sender; for a received envelope there is none to show.
      if (failure instanceof ApiError && (failure.status === 404 || failure.status === 403)) return null;
      throw failure;
    }
  }, [api, handle, id]);
  return (
    <>
      <section aria-labelledby="receipts">
        <h2 id="receipts">Receipts</h2>
        <ErrorBanner error={receipts.error} />
        {receipts.data && receipts.data.length === 0 && <p>No receipts.</p>}
        {receipts.data && receipts.data.length > 0 && (
          <ol class="timeline" data-testid="receipts">
            {receipts.data.map((receipt) => (
              <li key={receipt.id}>
                <time>{when(receipt.created_at)}</time> <span class="mono">{receipt.from}</span> <strong>{receipt.status}</strong>
                {receipt.note ? ` — ${receipt.note}` : ''}
              </li>
            ))}
          </ol>
        )}
      </section>
      {status.error !== undefined && <p class="error">{errorText(status.error)}</p>}
      {status.data && (
        <section aria-labelledby="status">
          <h2 id="status">Delivery status</h2>
          <Scroll label="Delivery status per recipient">
            <table data-testid="status">
              <thead>
                <tr>
                  <th scope="col">Recipient</th>
                  <th scope="col">Read</th>
                  <th scope="col">Receipt</th>
                  <th scope="col">Updated</th>
                </tr>
              </thead>
              <tbody>
                {status.data.recipients.map((recipient) => (
                  <tr key={recipient.handle}>
                    <th scope="row" class="mono">
                      {recipient.handle}
                    </th>
                    <td>{recipient.read ? 'read' : 'unread'}</td>
                    <td>{recipient.status ?? '—'}</td>
                    <td>{when(recipient.updated_at)}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </Scroll>
        </section>
      )}
    </>
  );
}
