import { randomBytes } from 'node:crypto';
import { Writable } from 'node:stream';
import { loadConfig } from '#config';
import { FrameBus } from '#bus';
import { ulid } from '#domain';
import { createLogger } from '#http';
import { EventsService } from '../../apps/api/src/admin/events.service';
import { buildRoostApp } from '../../apps/roost/src/bootstrap';
import { TestClient } from '../support/client';
import { createTestDatabase } from '../support/database';
import { envelope, startOperator, type TestOperator } from '../support/operator';
import { until } from '../support/until';
import { connect, type Listener } from '../support/ws';

/**
 * The console's admin API (docs/console-api.md, EXTENSIONS.md §5): whoami, the paged agent search,
 * the admin reads of one agent (scoped like every `/_admin/agents…` route, never changing read
 * state), the live feed (SSE fed by the frame bus), the overview, and the counting of reads.
 * Organizations `acme` (the agents read) and `rival` (the other tenant).
 */

jest.setTimeout(120_000);

const enc = encodeURIComponent;
const ALICE = '@acme.alice';
const BOB = '@acme.bob';
const MALLORY = '@rival.mallory';

/** An SSE client as the console has it: fetch() with the bearer header, read as a stream. */
class Feed {
  text = '';
  done = false;
  private readonly controller = new AbortController();
  private waiters: Array<() => void> = [];

  static async open(url: string, token: string): Promise<{ feed: Feed; response: Response }> {
    const feed = new Feed();
    const response = await fetch(url, {
      headers: { authorization: `Bearer ${token}` },
      signal: feed.controller.signal,
    });
    if (response.ok && response.body) void feed.pump(response.body);
    return { feed, response };
  }

  private async pump(body: ReadableStream<Uint8Array>): Promise<void> {
    const decoder = new TextDecoder();
    try {
      for await (const chunk of body as unknown as AsyncIterable<Uint8Array>) {
        this.text += decoder.decode(chunk, { stream: true });
        this.notify();
      }
    } catch {
      // aborted by the test
    }
    this.done = true;
    this.notify();
  }

  private notify(): void {
    for (const waiter of this.waiters.splice(0)) waiter();
  }

  /** The `data` of every `header` event so far. */
  get headers(): string[] {
    return this.text
      .split('\n\n')
      .filter((event) => event.startsWith('event: header\n'))
      .map((event) => event.slice('event: header\ndata: '.length));
  }

  async until(predicate: () => boolean, ms: number, what: string): Promise<void> {
    const deadline = Date.now() + ms;
    while (!predicate()) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}; feed so far:\n${this.text}`);
      await new Promise<void>((resolve) => {
        this.waiters.push(resolve);
        setTimeout(resolve, 50);
      });
    }
  }

  abort(): void {
    this.controller.abort();
  }
}

function upload(text: string) {
  const boundary = `roost${randomBytes(8).toString('hex')}`;
  const body =
    `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="note.txt"\r\n` +
    `Content-Type: text/plain\r\n\r\n${text}\r\n--${boundary}--\r\n`;
  return { body, headers: { 'content-type': `multipart/form-data; boundary=${boundary}` } };
}

describe.each([
  ['split (Redis Streams bus)', true],
  ['embedded (in-process bus)', false],
] as const)('console admin API, %s', (_name, redis) => {
  let op: TestOperator;
  let acmeAdmin: string;
  let rivalAdmin: string;
  let alice: string;
  let bob: string;
  let mallory: string;

  beforeAll(async () => {
    op = await startOperator({ redis });
    const org = async (name: string) =>
      (await op.client.post('/_admin/orgs', { name }, op.adminToken)).body.admin_token as string;
    acmeAdmin = await org('acme');
    rivalAdmin = await org('rival');
    alice = await op.agent(ALICE, { display_name: 'Alice Wonder' });
    bob = await op.agent(BOB, { display_name: 'Bob the Builder' });
    mallory = await op.agent(MALLORY, { display_name: 'Mallory Builder' });
  });

  afterAll(async () => {
    await op?.close();
  });

  describe('GET /_admin/whoami', () => {
    it('names the scope of the token, and refuses a wrong one with the ASMTP 401 body', async () => {
      expect((await op.client.get('/_admin/whoami', op.adminToken)).body).toEqual({ scope: 'operator' });
      expect((await op.client.get('/_admin/whoami', acmeAdmin)).body).toEqual({ scope: 'org', org: 'acme' });
      for (const token of [undefined, 'nope', alice]) {
        const reply = await op.client.get('/_admin/whoami', token);
        expect(reply.status).toBe(401);
        expect(reply.body.error.code).toBe('UNAUTHORIZED');
      }
    });
  });

  describe('GET /_admin/agents (search and keyset paging)', () => {
    const many = Array.from({ length: 12 }, (_, i) => `@acme.p${String(i).padStart(2, '0')}`);

    beforeAll(async () => {
      for (const handle of many)
        await op.agent(handle, { display_name: handle.endsWith('7') ? 'Special 50%_off' : 'plain' });
    });

    it('keeps the reference shape when no console parameter is given', async () => {
      const reply = await op.client.get('/_admin/agents', acmeAdmin);
      expect(Object.keys(reply.body)).toEqual(['agents']);
      expect(reply.body.agents.map((a: { handle: string }) => a.handle)).toEqual([ALICE, BOB, ...many].sort());
    });

    it('walks every page in handle order, each agent once, the last page ending with next null', async () => {
      const seen: string[] = [];
      let after: string | null = null;
      let pages = 0;
      do {
        const query: string = `limit=5${after ? `&after=${enc(after)}` : ''}`;
        const reply = await op.client.get(`/_admin/agents?${query}`, op.adminToken);
        expect(reply.status).toBe(200);
        seen.push(...reply.body.agents.map((a: { handle: string }) => a.handle));
        after = reply.body.next;
        pages++;
      } while (after !== null);
      expect(seen).toEqual([ALICE, BOB, MALLORY, ...many].sort());
      expect(pages).toBe(3); // 15 agents: 5 + 5 + 5, the third knows it is the last
    });

    it('an organization token pages only its own agents', async () => {
      const first = await op.client.get('/_admin/agents?limit=200', rivalAdmin);
      expect(first.body).toEqual({ agents: [expect.objectContaining({ handle: MALLORY })], next: null });
      const acme = await op.client.get(`/_admin/agents?limit=200&after=${enc('@acme.p05')}`, acmeAdmin);
      expect(acme.body.agents.map((a: { handle: string }) => a.handle)).toEqual(many.slice(6));
    });

    it('q matches a substring of handle or display name, case-insensitively, wildcards literal', async () => {
      const names = async (q: string, token = op.adminToken) =>
        (await op.client.get(`/_admin/agents?q=${enc(q)}`, token)).body.agents.map((a: { handle: string }) => a.handle);
      expect(await names('BUILDER')).toEqual([BOB, MALLORY]);
      expect(await names('BUILDER', acmeAdmin)).toEqual([BOB]);
      expect(await names('lic')).toEqual([ALICE]);
      expect(await names('50%_')).toEqual(['@acme.p07']);
      expect(await names('%')).toEqual(['@acme.p07']);
      expect(await names('zzz')).toEqual([]);
    });

    it('include=unread adds each agent’s unread count', async () => {
      const reply = await op.client.get(`/_admin/agents?q=p0&limit=2&include=unread`, acmeAdmin);
      expect(reply.body.agents).toEqual([
        expect.objectContaining({ handle: '@acme.p00', unread: 0 }),
        expect.objectContaining({ handle: '@acme.p01', unread: 0 }),
      ]);
      expect(reply.body.next).toBe('@acme.p01');
      const plain = await op.client.get('/_admin/agents?limit=1', acmeAdmin);
      expect(plain.body.agents[0]).not.toHaveProperty('unread');
    });

    it('a bad query is 400 INVALID_QUERY with the ASMTP body', async () => {
      for (const query of ['limit=0', 'limit=201', 'after=nobody', 'include=everything', 'q=a%00b']) {
        const reply = await op.client.get(`/_admin/agents?${query}`, op.adminToken);
        expect([query, reply.status, reply.body]).toEqual([
          query,
          400,
          { error: { code: 'INVALID_QUERY', message: expect.any(String) } },
        ]);
      }
    });
  });

  describe('admin reads of one agent', () => {
    let e1: string;
    let e2: string;
    let fileId: string;
    let schedule: string;

    beforeAll(async () => {
      const up = await op.client.request('POST', '/files', { token: bob, ...upload('attached bytes') });
      fileId = up.body.id;
      e1 = (
        await op.client.post(
          '/messages',
          envelope(ALICE, {
            subject: 'first',
            content_parts: [
              { type: 'text', text: 'one' },
              { type: 'file', file_id: fileId, name: 'n.txt' },
            ],
          }),
          bob,
        )
      ).body.id;
      e2 = (await op.client.post('/messages', envelope(ALICE, { subject: 'second' }), bob)).body.id;
      expect((await op.client.post(`/messages/${e1}/receipts`, { status: 'accepted' }, alice)).status).toBe(201);
      schedule = (
        await op.client.post(
          '/schedules',
          {
            envelope: { to: [ALICE], content_parts: [{ type: 'text', text: 'later' }] },
            start_at: Date.now() + 86_400_000,
          },
          bob,
        )
      ).body.id;
    });

    const unreadIds = async () =>
      (await op.client.get('/mailbox?unread=true&limit=1000', alice)).body.envelope_headers.map(
        (h: { id: string }) => h.id,
      );

    it('mailbox and message answer as the agent’s own routes, and the agent still sees both unread', async () => {
      for (const query of ['', '?direction=both&order=desc&limit=1', '?unread=true']) {
        const own = await op.client.get(`/mailbox${query}`, alice);
        for (const token of [op.adminToken, acmeAdmin]) {
          const admin = await op.client.get(`/_admin/agents/${enc(ALICE)}/mailbox${query}`, token);
          expect({ query, status: admin.status, text: admin.text }).toEqual({ query, status: 200, text: own.text });
        }
      }
      const message = await op.client.get(`/_admin/agents/${enc(ALICE)}/messages/${e1}`, acmeAdmin);
      expect(message.status).toBe(200);
      expect(message.body.id).toBe(e1);
      expect(message.body.content_parts[1]).toEqual(expect.objectContaining({ type: 'file' }));
      await op.client.get(`/_admin/agents/${enc(ALICE)}/messages/${e2}`, op.adminToken);
      expect(await unreadIds()).toEqual(expect.arrayContaining([e1, e2]));
      // The sender's copy, read by an admin, is the same stored body.
      const sent = await op.client.get(`/_admin/agents/${enc(BOB)}/messages/${e1}`, op.adminToken);
      expect(sent.text).toBe(message.text);
    });

    it('receipts, status, files and schedules answer as the agent’s own routes', async () => {
      const pairs: Array<[string, string, string]> = [
        [`/_admin/agents/${enc(BOB)}/receipts?id=${e1}`, `/messages/${e1}/receipts`, bob],
        [`/_admin/agents/${enc(BOB)}/status?id=${e1}`, `/messages/${e1}/status`, bob],
        [`/_admin/agents/${enc(ALICE)}/status?id=${e1}`, `/messages/${e1}/status`, alice],
        [`/_admin/agents/${enc(BOB)}/schedules`, '/schedules', bob],
      ];
      for (const [adminPath, ownPath, token] of pairs) {
        const own = await op.client.get(ownPath, token);
        const admin = await op.client.get(adminPath, acmeAdmin);
        expect({ adminPath, status: admin.status, body: admin.body }).toEqual({
          adminPath,
          status: 200,
          body: own.body,
        });
      }
      const file = await op.client.get(`/_admin/agents/${enc(ALICE)}/files/${fileId}`, acmeAdmin);
      expect([file.status, file.text, file.headers.get('content-type')]).toEqual([200, 'attached bytes', 'text/plain']);
      expect(await unreadIds()).toEqual(expect.arrayContaining([e1, e2]));
    });

    it('pauses, resumes and cancels a schedule as the agent’s PATCH and DELETE do', async () => {
      const path = `/_admin/agents/${enc(BOB)}/schedules/${schedule}`;
      expect((await op.client.patch(path, { paused: true }, acmeAdmin)).body.status).toBe('paused');
      expect((await op.client.get(`/schedules/${schedule}`, bob)).body.status).toBe('paused');
      expect((await op.client.patch(path, { paused: false }, acmeAdmin)).body.status).toBe('active');
      expect((await op.client.patch(path, { status: 'paused' }, op.adminToken)).body.status).toBe('paused');
      const bad = await op.client.patch(path, { paused: 'yes' }, acmeAdmin);
      expect([bad.status, bad.body.error.code]).toEqual([400, 'INVALID_SCHEDULE']); // the agent route's schema code
      expect((await op.client.delete(path, acmeAdmin)).body.status).toBe('cancelled');
      expect((await op.client.get(`/schedules/${schedule}`, bob)).body.status).toBe('cancelled');
      // Not the agent's schedule: the agent route's 404.
      expect((await op.client.delete(`/_admin/agents/${enc(ALICE)}/schedules/${schedule}`, acmeAdmin)).status).toBe(
        404,
      );
    });

    it('another organization’s token gets the 404 of an agent that does not exist; bad input 400; no token 401', async () => {
      const reads = (handle: string) => [
        ['GET', `/_admin/agents/${enc(handle)}/mailbox`],
        ['GET', `/_admin/agents/${enc(handle)}/messages/${e1}`],
        ['GET', `/_admin/agents/${enc(handle)}/receipts?id=${e1}`],
        ['GET', `/_admin/agents/${enc(handle)}/status?id=${e1}`],
        ['GET', `/_admin/agents/${enc(handle)}/files/${fileId}`],
        ['GET', `/_admin/agents/${enc(handle)}/schedules`],
        ['PATCH', `/_admin/agents/${enc(handle)}/schedules/${schedule}`],
        ['DELETE', `/_admin/agents/${enc(handle)}/schedules/${schedule}`],
        ['GET', `/_admin/agents/${enc(handle)}/events`],
      ];
      const missing = reads('@acme.nobody');
      for (const [i, [method, path]] of reads(ALICE).entries()) {
        const body = method === 'PATCH' ? { paused: true } : undefined;
        const refused = await op.client.request(method, path, { token: rivalAdmin, body });
        const twin = await op.client.request(method, missing[i][1], { token: rivalAdmin, body });
        expect({ path, status: refused.status, text: refused.text.replace(ALICE, '@acme.nobody') }).toEqual({
          path,
          status: 404,
          text: twin.text,
        });
        expect(refused.body.error.code).toBe('NOT_FOUND');
        const anonymous = await op.client.request(method, path, { body });
        expect([path, anonymous.status, anonymous.body.error.code]).toEqual([path, 401, 'UNAUTHORIZED']);
        const asAgent = await op.client.request(method, path, { token: alice, body });
        expect([path, asAgent.status]).toEqual([path, 401]);
      }
      const notHandle = await op.client.get('/_admin/agents/alice/mailbox', acmeAdmin);
      expect([notHandle.status, notHandle.body.error.code]).toEqual([400, 'INVALID_HANDLE']);
      const badQuery = await op.client.get(`/_admin/agents/${enc(ALICE)}/mailbox?limit=0`, acmeAdmin);
      expect([badQuery.status, badQuery.body.error.code]).toEqual([400, 'INVALID_QUERY']);
      const noId = await op.client.get(`/_admin/agents/${enc(ALICE)}/receipts`, acmeAdmin);
      expect([noId.status, noId.body.error.code]).toEqual([400, 'INVALID_QUERY']);
      const badId = await op.client.get(`/_admin/agents/${enc(ALICE)}/messages/nope`, acmeAdmin);
      expect([badId.status, badId.body.error.code]).toEqual([400, 'INVALID_ENVELOPE_ID']);
      // An envelope alice has no part in: the agent route's 404.
      const other = (await op.client.post('/messages', envelope(BOB, {}), mallory)).body.id;
      expect((await op.client.get(`/_admin/agents/${enc(ALICE)}/messages/${other}`, op.adminToken)).status).toBe(404);
    });

    it('each read is counted in roost_admin_reads_total{route}', async () => {
      const count = async (route: string) => {
        const text = (await op.client.get('/metrics')).text;
        return Number(new RegExp(`^roost_admin_reads_total\\{route="${route}"\\} (\\d+)$`, 'm').exec(text)?.[1] ?? 0);
      };
      const before = await count('mailbox');
      const beforeStatus = await count('status');
      await op.client.get(`/_admin/agents/${enc(ALICE)}/mailbox`, acmeAdmin);
      await op.client.get(`/_admin/agents/${enc(ALICE)}/mailbox`, rivalAdmin); // refused: not counted
      await op.client.get(`/_admin/agents/${enc(BOB)}/status?id=${e1}`, op.adminToken);
      expect(await count('mailbox')).toBe(before + 1);
      expect(await count('status')).toBe(beforeStatus + 1);
    });
  });

  describe('GET /_admin/agents/{handle}/events (live feed)', () => {
    const feedUrl = (handle: string) => `${op.url}/_admin/agents/${enc(handle)}/events`;
    const events = () => op.app.get(EventsService);

    it('streams each new header exactly as /connect pushes it, and only the agent’s own', async () => {
      const socket: Listener = await connect(op.url, { token: alice });
      const { feed, response } = await Feed.open(feedUrl(ALICE), acmeAdmin);
      try {
        expect(response.status).toBe(200);
        expect(response.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
        await feed.until(() => feed.text.startsWith(': keepalive\n\n'), 5_000, 'the first comment');
        const toBob = (await op.client.post('/messages', envelope(BOB, { subject: 'not for alice' }), mallory)).body.id;
        const ids: string[] = [];
        for (let i = 0; i < 3; i++)
          ids.push((await op.client.post('/messages', envelope(ALICE, { subject: `live ${i}` }), bob)).body.id);
        await feed.until(() => feed.headers.length >= 3, 10_000, 'three header events');
        await socket.until(() => ids.every((id) => socket.ids.includes(id)), 10_000, 'the socket frames');
        const pushed = socket.raw.filter((text) => ids.some((id) => text.includes(id)));
        expect(feed.headers).toEqual(pushed);
        expect(feed.text).not.toContain(toBob);
      } finally {
        feed.abort();
        socket.close();
      }
    });

    it('fills a lost frame from Postgres, in mailbox order, on the next frame and on a bus resync', async () => {
      const bus = op.app.get(FrameBus);
      const { feed } = await Feed.open(feedUrl(ALICE), op.adminToken);
      const publish = jest.spyOn(bus, 'publish');
      try {
        await feed.until(() => feed.text.length > 0, 5_000, 'the first comment');
        const start = feed.headers.length;
        // Publishing is best effort: a delivery whose frames never reach the bus.
        publish.mockImplementationOnce(async () => undefined);
        const lost = (await op.client.post('/messages', envelope(ALICE, { subject: 'lost frame' }), bob)).body.id;
        const next = (await op.client.post('/messages', envelope(ALICE, { subject: 'next frame' }), bob)).body.id;
        await feed.until(() => feed.headers.length >= start + 2, 10_000, 'both headers');
        expect(feed.headers.slice(start).map((h) => JSON.parse(h).id)).toEqual([lost, next]);
        publish.mockImplementationOnce(async () => undefined);
        const quiet = (await op.client.post('/messages', envelope(ALICE, { subject: 'lost, then resync' }), bob)).body
          .id;
        events().onResync();
        await feed.until(() => feed.headers.length >= start + 3, 10_000, 'the header read on resync');
        expect(feed.headers.slice(start).map((h) => JSON.parse(h).id)).toEqual([lost, next, quiet]);
      } finally {
        publish.mockRestore();
        feed.abort();
      }
    });

    it('sends a keepalive comment on its interval', async () => {
      events().keepaliveMs = 100;
      const { feed } = await Feed.open(feedUrl(BOB), op.adminToken);
      try {
        await feed.until(() => feed.text.split(': keepalive\n\n').length - 1 >= 3, 5_000, 'three keepalive comments');
      } finally {
        events().keepaliveMs = 15_000;
        feed.abort();
      }
    });

    it('lets go of the feed when the client goes away', async () => {
      const { feed } = await Feed.open(feedUrl(BOB), acmeAdmin);
      await feed.until(() => feed.text.length > 0, 5_000, 'the first comment');
      const open = events().openFeeds;
      expect(open).toBeGreaterThanOrEqual(1);
      feed.abort();
      await until(() => events().openFeeds === open - 1, 5_000, 'the feed to close');
    });

    it('org scoping: another organization’s token is 404 before any stream', async () => {
      const { response } = await Feed.open(feedUrl(ALICE), rivalAdmin);
      expect(response.status).toBe(404);
      expect(await response.json()).toEqual({ error: { code: 'NOT_FOUND', message: expect.any(String) } });
    });
  });

  describe('GET /_admin/overview', () => {
    it('operator: dependencies, 60 minutes of traffic from Postgres, backlogs, largest mailboxes by unread', async () => {
      const before = await op.client.get('/_admin/overview', op.adminToken);
      expect(before.status).toBe(200);
      const sentBefore = before.body.traffic.reduce((sum: number, m: { envelopes: number }) => sum + m.envelopes, 0);
      for (let i = 0; i < 3; i++) await op.client.post('/messages', envelope(MALLORY, {}), bob);
      const reply = await op.client.get('/_admin/overview', op.adminToken);
      expect(reply.body.dependencies).toEqual({ postgres: true, redis: true });
      expect(reply.body.traffic).toHaveLength(60);
      const minutes = reply.body.traffic.map((m: { minute: string }) => Date.parse(m.minute));
      expect(minutes.every((m: number, i: number) => i === 0 || m - minutes[i - 1] === 60_000)).toBe(true);
      expect(Date.now() - minutes[59]).toBeLessThan(60_000 + 5_000);
      const sent = reply.body.traffic.reduce((sum: number, m: { envelopes: number }) => sum + m.envelopes, 0);
      expect(sent).toBeGreaterThanOrEqual(sentBefore + 3);
      if (redis) {
        expect(reply.body.embedded).toBe(false);
        expect(reply.body.backlogs.streams).toHaveLength(op.config.streams.partitions);
        expect(
          reply.body.backlogs.streams.reduce((sum: number, s: { length: number }) => sum + s.length, 0),
        ).toBeGreaterThan(0);
        expect(reply.body.backlogs.queues).toEqual([
          { queue: 'roost-jobs', waiting: expect.any(Number), delayed: expect.any(Number), failed: expect.any(Number) },
        ]);
      } else {
        expect(reply.body.embedded).toBe(true);
        expect(reply.body.backlogs).toEqual({ streams: [], queues: [] });
      }
      const largest = reply.body.largest_mailboxes as Array<{ handle: string; unread: number }>;
      expect(largest.map((m) => m.handle)).toEqual(expect.arrayContaining([ALICE, MALLORY]));
      expect([...largest].sort((a, b) => b.unread - a.unread)).toEqual(largest);
    });

    it('an organization token sees its own traffic and mailboxes only, no dependencies or backlogs', async () => {
      const rivalBefore = await op.client.get('/_admin/overview', rivalAdmin);
      const total = (body: { traffic: Array<{ envelopes: number }> }) =>
        body.traffic.reduce((sum, m) => sum + m.envelopes, 0);
      await op.client.post('/messages', envelope(ALICE, {}), bob); // acme traffic
      const rival = await op.client.get('/_admin/overview', rivalAdmin);
      expect(rival.body.dependencies).toBeNull();
      expect(rival.body.backlogs).toBeNull();
      expect(rival.body).not.toHaveProperty('embedded');
      expect(total(rival.body)).toBe(total(rivalBefore.body));
      expect(rival.body.largest_mailboxes.every((m: { handle: string }) => m.handle.startsWith('@rival.'))).toBe(true);
      const acme = await op.client.get('/_admin/overview', acmeAdmin);
      expect(acme.body.largest_mailboxes.map((m: { handle: string }) => m.handle)).toContain(ALICE);
      expect(acme.body.largest_mailboxes.every((m: { handle: string }) => m.handle.startsWith('@acme.'))).toBe(true);
      expect(total(acme.body)).toBeGreaterThan(0);
    });
  });
});

describe('the live feed on an api-only node', () => {
  it('receives headers of envelopes another node accepted, through Redis Streams', async () => {
    const accepting = await startOperator({ redis: true });
    const api = await startOperator({
      redis: true,
      databaseUrl: accepting.config.databaseUrl!,
      env: { ROOST_ROLE: 'api', ROOST_REDIS_PREFIX: accepting.config.redisPrefix },
    });
    try {
      await accepting.client.post('/_admin/orgs', { name: 'acme' }, accepting.adminToken);
      const bob = await accepting.agent(BOB);
      await accepting.agent(ALICE);
      const { feed } = await Feed.open(`${api.url}/_admin/agents/${enc(ALICE)}/events`, api.adminToken);
      try {
        await feed.until(() => feed.text.length > 0, 5_000, 'the first comment');
        const id = (await accepting.client.post('/messages', envelope(ALICE, { subject: 'across nodes' }), bob)).body
          .id;
        await feed.until(() => feed.headers.length === 1, 10_000, 'the header from the other node');
        expect(JSON.parse(feed.headers[0])).toEqual(
          expect.objectContaining({ op: 'envelope.notify', id, subject: 'across nodes' }),
        );
      } finally {
        feed.abort();
      }
    } finally {
      await api.close();
      await accepting.close();
    }
  });
});

describe('the live feed at shutdown', () => {
  it('outlives the server’s idle-socket timeout, then ends when the server drains, so closing does not wait for the client', async () => {
    // A 2 s idle timeout: keepalives come every second, so a quiet feed is never cut as idle.
    const op = await startOperator({ redis: true, env: { ROOST_HTTP_REQUEST_TIMEOUT_MS: '2000' } });
    await op.client.post('/_admin/orgs', { name: 'acme' }, op.adminToken);
    await op.agent('@acme.x');
    const open = await Feed.open(`${op.url}/_admin/agents/${enc('@acme.x')}/events`, op.adminToken);
    await open.feed.until(() => open.feed.text.length > 0, 5_000, 'the first comment');
    await new Promise((resolve) => setTimeout(resolve, 3_000));
    expect(open.feed.done).toBe(false);
    expect(open.feed.text.split(': keepalive').length - 1).toBeGreaterThanOrEqual(3);
    // Without the drain ending it, close() would wait for this response forever.
    await op.close();
    await open.feed.until(() => open.feed.done, 5_000, 'the stream to end');
    expect(open.feed.done).toBe(true);
  });
});

describe('admin read log lines', () => {
  it('each admin read’s access line carries the admin scope, the agent read, the route and the request id', async () => {
    const lines: Array<Record<string, unknown>> = [];
    const sink = new Writable({
      write(chunk: Buffer, _encoding, done) {
        for (const line of chunk.toString('utf8').split('\n'))
          if (line.trim()) lines.push(JSON.parse(line) as Record<string, unknown>);
        done();
      },
    });
    const database = await createTestDatabase();
    const adminToken = `admin-${ulid()}`;
    const config = loadConfig({
      DATABASE_URL: database.url,
      ROOST_ADMIN_TOKEN: adminToken,
      ROOST_LOG_LEVEL: 'info',
      ROOST_RATE_LIMIT_PER_S: '0',
      PORT: '0',
      ROOST_METRICS_PORT: '0',
    });
    const { app } = await buildRoostApp(config, createLogger(config, sink));
    try {
      await app.listen({ port: 0, host: '127.0.0.1' });
      const client = new TestClient(`http://127.0.0.1:${(app.getHttpServer().address() as { port: number }).port}`);
      const orgToken = (await client.post('/_admin/orgs', { name: 'logs' }, adminToken)).body.admin_token as string;
      expect((await client.post('/_admin/agents', { handle: '@logs.alice' }, adminToken)).status).toBe(201);
      const read = await client.request('GET', `/_admin/agents/${enc('@logs.alice')}/mailbox`, {
        token: orgToken,
        headers: { 'x-request-id': 'admin-read-1' },
      });
      expect(read.status).toBe(200);
      await client.request('GET', `/_admin/agents/${enc('@logs.alice')}/schedules`, {
        token: adminToken,
        headers: { 'x-request-id': 'admin-read-2' },
      });
      await until(() => lines.some((line) => line.req_id === 'admin-read-2'), 5_000, 'the access lines');
      expect(lines.find((line) => line.req_id === 'admin-read-1')).toEqual(
        expect.objectContaining({
          level: 'info',
          msg: 'request',
          admin: 'org:logs',
          target: '@logs.alice',
          route: '/_admin/agents/:handle/mailbox',
          status: 200,
        }),
      );
      expect(lines.find((line) => line.req_id === 'admin-read-2')).toEqual(
        expect.objectContaining({
          level: 'info',
          admin: 'operator',
          target: '@logs.alice',
          route: '/_admin/agents/:handle/schedules',
        }),
      );
      expect(JSON.stringify(lines)).not.toContain(orgToken);
    } finally {
      await app.close();
      await database.drop();
    }
  });
});
