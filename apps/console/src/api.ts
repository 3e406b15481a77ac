import type {
  AdminAgent,
  AdminAgentInput,
  DeliveryStatus,
  Header,
  MailboxPage,
  Org,
  OrgInput,
  Receipt,
  Schedule,
  StoredEnvelope,
} from '../../../libs/client/src/types';

export type { AdminAgent, DeliveryStatus, Header, MailboxPage, Org, Receipt, Schedule, StoredEnvelope };

/** `GET /_admin/whoami` (the Console API contract). */
export type Scope = { scope: 'operator' } | { scope: 'org'; org: string };

export interface AgentRow extends AdminAgent {
  unread?: number;
}

export interface AgentPage {
  agents: AgentRow[];
  next: string | null;
}

export interface Overview {
  dependencies: { postgres: boolean; redis: boolean } | null;
  traffic: Array<{ minute: string; envelopes: number }>;
  backlogs: {
    streams: Array<{ partition: number; length: number; lag: number }>;
    queues: Array<{ queue: string; waiting: number; delayed: number; failed: number }>;
  } | null;
  largest_mailboxes: Array<{ handle: string; unread: number }>;
  /** Operator only: the embedded default (in-process bus, no Redis, no queues). */
  embedded?: boolean;
}

/** The ASMTP error body, kept whole so the UI can show its code and message. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

const TOKEN_KEY = 'roost.console.token';

/** sessionStorage only: the token dies with the tab and is never sent as a cookie. */
export const tokenStore = {
  get: (): string | null => sessionStorage.getItem(TOKEN_KEY),
  set: (token: string): void => sessionStorage.setItem(TOKEN_KEY, token),
  clear: (): void => sessionStorage.removeItem(TOKEN_KEY),
};

/**
 * The operator's root as seen from the page: `/console/` → ``, `/x/roost/console/` → `/x/roost`,
 * so the API is reached through the same Ingress prefix as the console.
 */
export function apiBase(pathname: string = location.pathname): string {
  const at = pathname.search(/\/console(?:\/|$)/);
  return at < 0 ? '' : pathname.slice(0, at);
}

const enc = encodeURIComponent;

function query(params: Record<string, string | number | boolean | undefined | null>): string {
  const pairs = Object.entries(params).filter(([, value]) => value !== undefined && value !== null && value !== '');
  return pairs.length === 0 ? '' : `?${pairs.map(([key, value]) => `${enc(key)}=${enc(String(value))}`).join('&')}`;
}

export class Api {
  constructor(
    private readonly token: string,
    private readonly base: string = apiBase(),
  ) {}

  async raw(method: string, path: string, body?: unknown, signal?: AbortSignal): Promise<Response> {
    const headers: Record<string, string> = { authorization: `Bearer ${this.token}` };
    if (body !== undefined) headers['content-type'] = 'application/json';
    const res = await fetch(`${this.base}${path}`, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      signal,
      cache: 'no-store',
      credentials: 'omit',
    });
    if (!res.ok) {
      let code = 'HTTP_ERROR';
      let message = `${res.status} ${res.statusText}`;
      try {
        const parsed = (await res.json()) as { error?: { code?: string; message?: string } };
        if (parsed.error?.code) code = parsed.error.code;
        if (parsed.error?.message) message = parsed.error.message;
      } catch {
        // Not the ASMTP body (a proxy's page): the status line says enough.
      }
      throw new ApiError(res.status, code, message);
    }
    return res;
  }

  async call<T>(method: string, path: string, body?: unknown): Promise<T> {
    const res = await this.raw(method, path, body);
    return (res.status === 204 ? undefined : await res.json()) as T;
  }

  whoami(): Promise<Scope> {
    return this.call('GET', '/_admin/whoami');
  }

  // --- organizations (operator) ---
  async orgs(): Promise<Org[]> {
    return (await this.call<{ orgs: Org[] }>('GET', '/_admin/orgs')).orgs;
  }
  createOrg(name: string, fields: OrgInput): Promise<Org> {
    return this.call('POST', '/_admin/orgs', { name, ...fields });
  }
  updateOrg(name: string, fields: OrgInput): Promise<Org> {
    return this.call('PATCH', `/_admin/orgs/${enc(name)}`, fields);
  }
  rotateOrg(name: string): Promise<Org> {
    return this.call('POST', `/_admin/orgs/${enc(name)}/rotate-token`);
  }
  deleteOrg(name: string): Promise<void> {
    return this.call('DELETE', `/_admin/orgs/${enc(name)}`);
  }

  // --- agents ---
  agents(q: string, after: string | null, limit = 50): Promise<AgentPage> {
    return this.call('GET', `/_admin/agents${query({ q, limit, after, include: 'unread' })}`);
  }
  agent(handle: string): Promise<AdminAgent> {
    return this.call('GET', `/_admin/agents/${enc(handle)}`);
  }
  createAgent(fields: AdminAgentInput & { handle: string }): Promise<AdminAgent> {
    return this.call('POST', '/_admin/agents', fields);
  }
  updateAgent(handle: string, fields: AdminAgentInput): Promise<AdminAgent> {
    return this.call('PATCH', `/_admin/agents/${enc(handle)}`, fields);
  }
  rotateAgent(handle: string): Promise<AdminAgent> {
    return this.call('POST', `/_admin/agents/${enc(handle)}/rotate-token`);
  }
  deleteAgent(handle: string): Promise<void> {
    return this.call('DELETE', `/_admin/agents/${enc(handle)}`);
  }

  // --- admin reads of one agent's mailbox (never change its read state) ---
  mailbox(
    handle: string,
    params: { unread?: boolean; after?: { created_at: number; envelope_id: string } | null; limit?: number },
  ): Promise<MailboxPage> {
    return this.call(
      'GET',
      `/_admin/agents/${enc(handle)}/mailbox${query({
        direction: 'both',
        order: 'desc',
        limit: params.limit ?? 50,
        unread: params.unread ? true : undefined,
        after_created_at: params.after?.created_at,
        after_envelope_id: params.after?.envelope_id,
      })}`,
    );
  }
  message(handle: string, id: string): Promise<StoredEnvelope & { read?: boolean }> {
    return this.call('GET', `/_admin/agents/${enc(handle)}/messages/${enc(id)}`);
  }
  async receipts(handle: string, id: string): Promise<Receipt[]> {
    return (await this.call<{ receipts: Receipt[] }>('GET', `/_admin/agents/${enc(handle)}/receipts${query({ id })}`))
      .receipts;
  }
  status(handle: string, id: string): Promise<DeliveryStatus> {
    return this.call('GET', `/_admin/agents/${enc(handle)}/status${query({ id })}`);
  }
  file(handle: string, id: string): Promise<Response> {
    return this.raw('GET', `/_admin/agents/${enc(handle)}/files/${enc(id)}`);
  }
  async schedules(handle: string): Promise<Schedule[]> {
    return (await this.call<{ schedules: Schedule[] }>('GET', `/_admin/agents/${enc(handle)}/schedules`)).schedules;
  }
  /** Pause or resume, with the body of the agent's own `PATCH /schedules/{id}`. */
  setSchedule(handle: string, id: string, status: 'paused' | 'active'): Promise<Schedule> {
    return this.call('PATCH', `/_admin/agents/${enc(handle)}/schedules/${enc(id)}`, { status });
  }
  cancelSchedule(handle: string, id: string): Promise<unknown> {
    return this.call('DELETE', `/_admin/agents/${enc(handle)}/schedules/${enc(id)}`);
  }

  overview(): Promise<Overview> {
    return this.call('GET', '/_admin/overview');
  }

  /**
   * The agent's live feed (`text/event-stream`). EventSource cannot send the bearer header, so this
   * reads the stream with fetch(); resolves when the stream ends or `signal` aborts.
   */
  async events(
    handle: string,
    signal: AbortSignal,
    onHeader: (header: Header) => void,
    onOpen?: () => void,
  ): Promise<void> {
    const res = await this.raw('GET', `/_admin/agents/${enc(handle)}/events`, undefined, signal);
    onOpen?.();
    if (!res.body) return;
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
    const parser = new SseParser((event, data) => {
      if (event !== 'header') return;
      try {
        onHeader(JSON.parse(data) as Header);
      } catch {
        // A malformed frame is skipped, not fatal: the next one may be fine.
      }
    });
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      parser.push(value);
    }
  }
}

/** Server-Sent Events framing (WHATWG): `event:`/`data:` lines, a blank line ends an event. */
export class SseParser {
  private buffer = '';
  private event = '';
  private data: string[] = [];

  constructor(private readonly onEvent: (event: string, data: string) => void) {}

  push(chunk: string): void {
    this.buffer += chunk;
    for (;;) {
      const end = this.buffer.search(/\r\n|\r|\n/);
      if (end < 0) return;
      const line = this.buffer.slice(0, end);
      this.buffer = this.buffer.slice(end + (this.buffer.startsWith('\r\n', end) ? 2 : 1));
      this.line(line);
    }
  }

  private line(line: string): void {
    if (line === '') {
      if (this.data.length > 0) this.onEvent(this.event || 'message', this.data.join('\n'));
      this.event = '';
      this.data = [];
      return;
    }
    if (line.startsWith(':')) return;
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'event') this.event = value;
    else if (field === 'data') this.data.push(value);
  }
}
