import { randomBytes } from 'node:crypto';
import { apiError, RoostError, Transport, type TransportOptions } from './http';
import { ulid } from './ulid';
import type {
  Accepted,
  AdminAgent,
  AdminAgentInput,
  AgentHit,
  AgentSelf,
  AgentSelfPatch,
  Block,
  ContentPart,
  Cursor,
  DeliveryStatus,
  Header,
  Health,
  MailboxPage,
  MailboxQuery,
  MessageHit,
  Org,
  OrgInput,
  PostMessage,
  Receipt,
  ReceiptInput,
  Schedule,
  ScheduleInput,
  StoredEnvelope,
  UploadedFile,
} from './types';

const enc = encodeURIComponent;

/** `@acme.bot` → `/agents/acme/bot` (discovery path, ASMTP.md §3.8). */
function discoveryPath(handle: string): string {
  const at = handle.startsWith('@') ? handle.slice(1) : handle;
  const dot = at.indexOf('.');
  if (dot < 0) throw new RoostError('protocol', `not a handle: ${handle}`);
  return `/agents/${enc(at.slice(0, dot))}/${enc(at.slice(dot + 1))}`;
}

export interface ClientOptions extends TransportOptions {
  url: string;
  token: string;
}

export type Draft = Omit<PostMessage, 'id' | 'date_ms'> & { id?: string; date_ms?: number };

/**
 * A typed client for one agent: every ASMTP route (ASMTP.md §3) and Roost's extensions (receipts,
 * delivery status, schedules: EXTENSIONS.md §2–3). Errors are `RoostError`s carrying the ASMTP
 * error code.
 */
export class RoostClient {
  readonly transport: Transport;
  readonly token: string;

  constructor(options: ClientOptions) {
    this.transport = new Transport(options.url, options);
    this.token = options.token;
  }

  get url(): string {
    return this.transport.baseUrl;
  }

  private call<T>(
    method: string,
    path: string,
    body?: unknown,
    query?: Record<string, string | number | boolean | undefined>,
  ): Promise<T> {
    return this.transport.json<T>({ method, path, body, query, token: this.token });
  }

  // --- health ------------------------------------------------------------------------------

  health(): Promise<Health> {
    return this.transport.json<Health>({ method: 'GET', path: '/healthz' });
  }

  // --- messages ----------------------------------------------------------------------------

  /** `POST /messages`. A draft without `id`/`date_ms` gets a fresh ULID and the current time. */
  send(draft: Draft): Promise<Accepted> {
    const body: PostMessage = { ...draft, id: draft.id ?? ulid(), date_ms: draft.date_ms ?? Date.now() };
    return this.call<Accepted>('POST', '/messages', body);
  }

  /**
   * `GET /messages/{id}` (marks it read for a recipient). `peek` (a Roost extension) leaves the
   * read state alone.
   */
  message(id: string, options: { peek?: boolean } = {}): Promise<StoredEnvelope> {
    return this.call<StoredEnvelope>('GET', `/messages/${enc(id)}`, undefined, {
      peek: options.peek ? true : undefined,
    });
  }

  /** `GET /messages?ids=` in request order; unentitled ids are omitted (marks them read unless `peek`). */
  async messages(ids: string[], options: { peek?: boolean } = {}): Promise<StoredEnvelope[]> {
    const out: StoredEnvelope[] = [];
    for (let i = 0; i < ids.length; i += 100) {
      // The comma must stay unencoded (ASMTP.md §3.4): the operator splits before percent-decoding.
      const batch = ids
        .slice(i, i + 100)
        .map(enc)
        .join(',');
      const page = await this.call<{ envelopes: StoredEnvelope[] }>(
        'GET',
        `/messages?ids=${batch}${options.peek ? '&peek=true' : ''}`,
      );
      out.push(...page.envelopes);
    }
    return out;
  }

  // --- mailbox -----------------------------------------------------------------------------

  /** One `GET /mailbox` page. */
  mailbox(query: MailboxQuery = {}): Promise<MailboxPage> {
    return this.call<MailboxPage>('GET', '/mailbox', undefined, {
      direction: query.direction,
      order: query.order,
      limit: query.limit,
      unread: query.unread,
      after_created_at: query.after?.created_at,
      after_envelope_id: query.after?.envelope_id,
    });
  }

  /** Every header from `query.after` on, page by page until `next_cursor === null` (ASMTP.md §6.6). */
  async *headers(query: MailboxQuery = {}): AsyncGenerator<Header> {
    let after: Cursor | null = query.after ?? null;
    for (;;) {
      const page = await this.mailbox({ ...query, after });
      yield* page.envelope_headers;
      if (page.next_cursor === null) return;
      after = page.next_cursor;
    }
  }

  /** `POST /mailbox/read`: the ids that went from unread to read. */
  async markRead(ids: string[]): Promise<string[]> {
    return (await this.call<{ read: string[] }>('POST', '/mailbox/read', { ids })).read;
  }

  // --- receipts and delivery status (EXTENSIONS.md §2) --------------------------------------

  postReceipt(envelopeId: string, receipt: ReceiptInput): Promise<Receipt> {
    return this.call<Receipt>('POST', `/messages/${enc(envelopeId)}/receipts`, receipt);
  }

  async receipts(envelopeId: string): Promise<Receipt[]> {
    return (await this.call<{ receipts: Receipt[] }>('GET', `/messages/${enc(envelopeId)}/receipts`)).receipts;
  }

  status(envelopeId: string): Promise<DeliveryStatus> {
    return this.call<DeliveryStatus>('GET', `/messages/${enc(envelopeId)}/status`);
  }

  // --- schedules (EXTENSIONS.md §3) ----------------------------------------------------------

  createSchedule(input: ScheduleInput): Promise<Schedule> {
    return this.call<Schedule>('POST', '/schedules', input);
  }

  async schedules(): Promise<Schedule[]> {
    return (await this.call<{ schedules: Schedule[] }>('GET', '/schedules')).schedules;
  }

  schedule(id: string): Promise<Schedule> {
    return this.call<Schedule>('GET', `/schedules/${enc(id)}`);
  }

  setScheduleStatus(id: string, status: 'paused' | 'active'): Promise<Schedule> {
    return this.call<Schedule>('PATCH', `/schedules/${enc(id)}`, { status });
  }

  cancelSchedule(id: string): Promise<Schedule> {
    return this.call<Schedule>('DELETE', `/schedules/${enc(id)}`);
  }

  // --- files (ASMTP.md §7) -----------------------------------------------------------------

  /** `POST /files` as multipart with one part named `file`. */
  uploadFile(bytes: Buffer, filename: string, contentType: string): Promise<UploadedFile> {
    const boundary = `roost-${randomBytes(12).toString('hex')}`;
    const safeName = filename.replace(/["\r\n]/g, '_');
    const head = Buffer.from(
      `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="${safeName}"\r\nContent-Type: ${contentType}\r\n\r\n`,
    );
    const tail = Buffer.from(`\r\n--${boundary}--\r\n`);
    return this.transport.json<UploadedFile>({
      method: 'POST',
      path: '/files',
      token: this.token,
      body: Buffer.concat([head, bytes, tail]),
      headers: { 'content-type': `multipart/form-data; boundary=${boundary}` },
    });
  }

  /** `GET /files/{id}` (or an absolute file URL on this operator): the bytes, their type and, when the operator names it, the filename. */
  async downloadFile(idOrUrl: string): Promise<{ bytes: Buffer; contentType: string; filename?: string }> {
    let path = `/files/${enc(idOrUrl)}`;
    if (/^https?:\/\//.test(idOrUrl)) {
      if (!idOrUrl.startsWith(this.url))
        throw new RoostError(
          'protocol',
          `${idOrUrl} is not on ${this.url}; the bearer is only sent to its own operator`,
        );
      path = idOrUrl.slice(this.url.length);
    }
    const res = await this.transport.send({ method: 'GET', path, token: this.token });
    if (res.status !== 200) throw apiError(res);
    const disposition = /filename="([^"]*)"/.exec(String(res.headers['content-disposition'] ?? ''));
    return {
      bytes: res.body,
      contentType: String(res.headers['content-type'] ?? 'application/octet-stream'),
      ...(disposition?.[1] ? { filename: disposition[1] } : {}),
    };
  }

  // --- self, allowlist, blocks (ASMTP.md §3.7) -----------------------------------------------

  me(): Promise<AgentSelf> {
    return this.call<AgentSelf>('GET', '/agents/me');
  }

  updateMe(patch: AgentSelfPatch): Promise<AgentSelf> {
    return this.call<AgentSelf>('PATCH', '/agents/me', patch);
  }

  async allowlist(): Promise<string[]> {
    return (await this.call<{ entries: string[] }>('GET', '/agents/me/allowlist')).entries;
  }

  async allow(entries: string[]): Promise<string[]> {
    return (await this.call<{ entries: string[] }>('POST', '/agents/me/allowlist', { entries })).entries;
  }

  async disallow(entry: string): Promise<string[]> {
    return (await this.call<{ entries: string[] }>('DELETE', `/agents/me/allowlist/${enc(entry)}`)).entries;
  }

  blocks(query: { limit?: number; cursor?: string } = {}): Promise<{ blocks: Block[]; next_cursor: string | null }> {
    return this.call('GET', '/agents/me/blocks', undefined, query);
  }

  block(handle: string): Promise<Block> {
    return this.call<Block>('POST', '/agents/me/blocks', { handle });
  }

  unblock(handle: string): Promise<{ unblocked: true }> {
    return this.call('DELETE', `/agents/me/blocks/${enc(handle)}`);
  }

  // --- discovery and search (ASMTP.md §3.8–3.9) ----------------------------------------------

  agent(handle: string): Promise<{ agent: AgentSelf; viewer: { relationship: 'owner' | 'none'; can_edit: boolean } }> {
    return this.call('GET', discoveryPath(handle));
  }

  async card(handle: string): Promise<string> {
    const res = await this.transport.send({ method: 'GET', path: `${discoveryPath(handle)}/card`, token: this.token });
    if (res.status !== 200) throw apiError(res);
    return res.body.toString('utf8');
  }

  search(q: string, limit?: number): Promise<{ agents: AgentHit[]; people: unknown[]; organizations: unknown[] }> {
    return this.call('GET', '/search', undefined, { q, limit });
  }

  searchAgents(
    q: string,
    query: { limit?: number; cursor?: string } = {},
  ): Promise<{ agents: AgentHit[]; next_cursor: string | null }> {
    return this.call('GET', '/search/agents', undefined, { q, ...query });
  }

  async searchMessages(q: string, limit?: number): Promise<MessageHit[]> {
    return (await this.call<{ envelopes: MessageHit[] }>('GET', '/search/messages', undefined, { q, limit })).envelopes;
  }
}

/** Text, data and already-uploaded parts for a draft: the common case of `send`. */
export function textPart(text: string): ContentPart {
  return { type: 'text', text };
}

export interface AdminClientOptions extends TransportOptions {
  url: string;
  /** The operator admin token, or an organization's admin token (agents `@<org>.*` only). */
  adminToken: string;
}

/** `/_admin/agents…` (ASMTP.md §1.4) and `/_admin/orgs…` (EXTENSIONS.md §5). */
export class RoostAdminClient {
  readonly transport: Transport;
  private readonly token: string;

  constructor(options: AdminClientOptions) {
    this.transport = new Transport(options.url, options);
    this.token = options.adminToken;
  }

  private call<T>(method: string, path: string, body?: unknown): Promise<T> {
    return this.transport.json<T>({ method, path, body, token: this.token });
  }

  /** Registers an agent; the response carries its `token`, shown this once. */
  createAgent(handle: string, fields: AdminAgentInput = {}): Promise<AdminAgent & { token: string }> {
    return this.call('POST', '/_admin/agents', { handle, ...fields });
  }

  async agents(): Promise<AdminAgent[]> {
    return (await this.call<{ agents: AdminAgent[] }>('GET', '/_admin/agents')).agents;
  }

  agent(handle: string): Promise<AdminAgent> {
    return this.call('GET', `/_admin/agents/${enc(handle)}`);
  }

  updateAgent(handle: string, patch: AdminAgentInput): Promise<AdminAgent> {
    return this.call('PATCH', `/_admin/agents/${enc(handle)}`, patch);
  }

  rotateAgentToken(handle: string): Promise<AdminAgent & { token: string }> {
    return this.call('POST', `/_admin/agents/${enc(handle)}/rotate-token`);
  }

  async deleteAgent(handle: string): Promise<void> {
    await this.call('DELETE', `/_admin/agents/${enc(handle)}`);
  }

  createOrg(name: string, fields: OrgInput = {}): Promise<Org & { admin_token: string }> {
    return this.call('POST', '/_admin/orgs', { name, ...fields });
  }

  async orgs(): Promise<Org[]> {
    return (await this.call<{ orgs: Org[] }>('GET', '/_admin/orgs')).orgs;
  }

  org(name: string): Promise<Org> {
    return this.call('GET', `/_admin/orgs/${enc(name)}`);
  }

  updateOrg(name: string, patch: OrgInput): Promise<Org> {
    return this.call('PATCH', `/_admin/orgs/${enc(name)}`, patch);
  }

  rotateOrgToken(name: string): Promise<Org & { admin_token: string }> {
    return this.call('POST', `/_admin/orgs/${enc(name)}/rotate-token`);
  }

  async deleteOrg(name: string): Promise<void> {
    await this.call('DELETE', `/_admin/orgs/${enc(name)}`);
  }
}
