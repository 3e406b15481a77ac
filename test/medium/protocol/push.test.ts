import { setTimeout as sleep } from 'node:timers/promises';
import { FrameBus } from '#bus';
import { AuthService } from '#core';
import { ulid } from '#domain';
import { envelope, startOperator, type TestOperator } from '../../support/operator';
import { testBackend } from '../../support/services';
import { connect, refusal, type ConnectOptions, type Listener } from '../../support/ws';

/**
 * Realtime delivery on `/connect` (ASMTP.md §6, §10 #63–73; EXTENSIONS.md §1). On Postgres the
 * frames go through the Redis Streams adapter, on PGlite through the in-process bus.
 */
const redis = testBackend() === 'postgres';
const busName = redis ? 'Redis Streams' : 'in-process bus';

/** Key order of an `envelope.notify` frame (ASMTP.md §6.3). */
const FULL_KEYS = [
  'op',
  'id',
  'from',
  'to',
  'cc',
  'subject',
  'in_reply_to',
  'type_hint',
  'size_hint',
  'created_at',
  'date_ms',
];
const MINIMAL_KEYS = ['op', 'id', 'from', 'to', 'type_hint', 'size_hint', 'created_at', 'date_ms'];

/** A fixture around one operator: agents, sends, sockets closed after each test, metrics. */
function harness(env: Record<string, string> = {}) {
  const h = {
    op: undefined as unknown as TestOperator,
    sockets: [] as Listener[],
    closed: false,

    async open(token: string, options: ConnectOptions = {}): Promise<Listener> {
      const listener = await connect(h.op.url, { token, ...options });
      h.sockets.push(listener);
      return listener;
    },

    /**
     * Sends one envelope from `sender` to `to` and waits for its notify on `socket`: the socket is
     * live. The upgrade resolves before the gateway has read where a socket without a cursor starts,
     * and an envelope committed before that read is not the socket's, so a test that loses a publish
     * waits for this first (else the lost frame may be one the socket was never to get).
     */
    async firstNotify(socket: Listener, sender: string, to: string): Promise<{ id: string; created_at: number }> {
      const first = await h.send(sender, envelope(to));
      await socket.until(() => socket.ids.includes(first.id), 5_000, 'a first notify');
      return first;
    },

    /** POST /messages, expecting 202; returns the 202 body. */
    async send(token: string, body: Record<string, unknown>): Promise<{ id: string; created_at: number }> {
      const reply = await h.op.client.post('/messages', body, token);
      if (reply.status !== 202) throw new Error(`send: ${reply.status} ${reply.text}`);
      return reply.body;
    },

    /** `in` feed rows after `cursor` (all pages), ascending. */
    async inbox(token: string, cursor?: { created_at: number; envelope_id: string }): Promise<any[]> {
      const rows: any[] = [];
      let after = cursor;
      for (;;) {
        const query = after ? `&after_created_at=${after.created_at}&after_envelope_id=${after.envelope_id}` : '';
        const reply = await h.op.client.get(`/mailbox?order=asc&limit=1000${query}`, token);
        expect(reply.status).toBe(200);
        rows.push(...reply.body.envelope_headers);
        if (reply.body.next_cursor === null) return rows;
        after = reply.body.next_cursor;
      }
    },

    /** Sum of a metric's samples whose labels include `labels`. */
    async metric(name: string, labels: Record<string, string> = {}): Promise<number> {
      const reply = await h.op.client.get('/metrics');
      expect(reply.status).toBe(200);
      let sum = 0;
      for (const line of reply.text.split('\n')) {
        const match = /^([a-z_]+)(?:\{(.*)\})? (\S+)$/.exec(line);
        if (!match || match[1] !== name) continue;
        const sample = Object.fromEntries([...(match[2] ?? '').matchAll(/(\w+)="([^"]*)"/g)].map((m) => [m[1], m[2]]));
        if (Object.entries(labels).every(([key, value]) => sample[key] === value)) sum += Number(match[3]);
      }
      return sum;
    },

    /** Poll `/metrics` until `name` satisfies `predicate`. */
    async untilMetric(
      name: string,
      predicate: (value: number) => boolean,
      labels: Record<string, string> = {},
      timeoutMs = 5_000,
    ): Promise<number> {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const value = await h.metric(name, labels);
        if (predicate(value)) return value;
        if (Date.now() > deadline) throw new Error(`${name} ${JSON.stringify(labels)} stuck at ${value}`);
        await sleep(25);
      }
    },
  };
  beforeAll(async () => {
    h.op = await startOperator({ redis, env });
  });
  afterEach(() => {
    for (const socket of h.sockets.splice(0)) socket.close();
  });
  afterAll(async () => {
    if (h.op && !h.closed) await h.op.close();
  });
  return h;
}

/** Run `tasks` with at most `width` in flight; results in task order. */
async function pool<T>(tasks: Array<() => Promise<T>>, width: number): Promise<T[]> {
  const results: T[] = new Array(tasks.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: width }, async () => {
      while (next < tasks.length) {
        const index = next++;
        results[index] = await tasks[index]();
      }
    }),
  );
  return results;
}

const OPEN = 1;

describe(`push transport over the ${busName} (ASMTP.md §6, §10 #63–73)`, () => {
  // No sweep during these tests: every frame must arrive through the bus (or a gap backfill).
  const h = harness({ ROOST_WS_SWEEP_INTERVAL_MS: '3600000' });

  describe('handshake', () => {
    it('#63 an upgrade to /connect with a valid Authorization: Bearer succeeds with 101', async () => {
      const token = await h.op.agent('@p63.alice');
      const socket = await h.open(token);
      expect(socket.upgradeStatus).toBe(101);
      expect(socket.ws.readyState).toBe(OPEN);
      expect(socket.ws.protocol).toBe('');
    });

    it('#64 ?token= works without a header; the header wins over the query; an empty ?token= is missing', async () => {
      const token = await h.op.agent('@p64.alice');
      const socket = await h.open(token, { tokenInQuery: true });
      expect(socket.upgradeStatus).toBe(101);

      const badHeader = await refusal(h.op.url, { headers: { authorization: 'Bearer not-a-token' }, query: { token } });
      expect(badHeader.status).toBe(401);
      expect(badHeader.body.error.code).toBe('UNAUTHORIZED');

      const empty = await refusal(h.op.url, { query: { token: '' } });
      expect(empty.status).toBe(401);
      expect(empty.body.error.code).toBe('UNAUTHORIZED');

      // A header that carries no usable bearer falls back to the query token.
      const fallback = await h.open(token, { tokenInQuery: true, headers: { authorization: 'Basic abc' } });
      expect(fallback.upgradeStatus).toBe(101);
    });

    it('#65 no bearer or an unknown bearer is refused with HTTP 401, the ASMTP error body and Connection: close, before the upgrade', async () => {
      for (const [what, options] of [
        ['no bearer', {}],
        ['unknown bearer', { token: `unknown-${ulid()}` }],
        ['empty Bearer', { headers: { authorization: 'Bearer ' } }],
      ] as Array<[string, ConnectOptions]>) {
        const refused = await refusal(h.op.url, options);
        expect({ what, status: refused.status }).toEqual({ what, status: 401 });
        expect(refused.headers.connection).toBe('close');
        expect(refused.headers['content-type']).toMatch(/^application\/json/);
        expect(refused.headers.upgrade).toBeUndefined();
        expect(Object.keys(refused.body)).toEqual(['error']);
        expect(refused.body.error.code).toBe('UNAUTHORIZED');
        expect(typeof refused.body.error.message).toBe('string');
      }
    });

    it('a wrong path is refused with 404 and body code BAD_REQUEST (reference quirk)', async () => {
      const token = await h.op.agent('@p65p.alice');
      for (const path of ['/connectx', '/connect/x', '/']) {
        const refused = await refusal(h.op.url, { token, path });
        expect({ path, status: refused.status, code: refused.body?.error?.code }).toEqual({
          path,
          status: 404,
          code: 'BAD_REQUEST',
        });
        expect(refused.headers.connection).toBe('close');
      }
    });

    it('a malformed resume cursor is refused with 400 INVALID_QUERY or INVALID_ENVELOPE_ID before the upgrade', async () => {
      const token = await h.op.agent('@p65c.alice');
      const id = ulid();
      const cases: Array<[Record<string, string>, string]> = [
        [{ after_created_at: '12' }, 'INVALID_QUERY'],
        [{ after_envelope_id: id }, 'INVALID_QUERY'],
        [{ after_created_at: 'abc', after_envelope_id: id }, 'INVALID_QUERY'],
        [{ after_created_at: '-1', after_envelope_id: id }, 'INVALID_QUERY'],
        [{ after_created_at: '012', after_envelope_id: id }, 'INVALID_QUERY'],
        [{ after_created_at: '12', after_envelope_id: 'not-an-id' }, 'INVALID_ENVELOPE_ID'],
      ];
      for (const [query, code] of cases) {
        const refused = await refusal(h.op.url, { token, query });
        expect({ query, status: refused.status, code: refused.body?.error?.code }).toEqual({
          query,
          status: 400,
          code,
        });
        expect(refused.headers.connection).toBe('close');
      }
    });

    it('a non-upgrade GET /connect is ordinary HTTP routing: 404 NOT_FOUND', async () => {
      const token = await h.op.agent('@p65g.alice');
      for (const bearer of [undefined, token]) {
        const reply = await h.op.client.get('/connect', bearer);
        expect(reply.status).toBe(404);
        expect(reply.body.error.code).toBe('NOT_FOUND');
      }
    });
  });

  describe('envelope.notify and monitor.fact', () => {
    it('#66 every open socket of every recipient (two sockets of one agent, a cc recipient) gets exactly one envelope.notify', async () => {
      const alice = await h.op.agent('@p66.alice');
      const bob = await h.op.agent('@p66.bob');
      const carol = await h.op.agent('@p66.carol');
      const [bob1, bob2, carol1] = await Promise.all([h.open(bob), h.open(bob), h.open(carol)]);
      // Bob is in to and cc: one notify, not two.
      const sent = await h.send(alice, envelope('@p66.bob', { cc: ['@p66.carol', '@p66.bob'] }));
      const marker = await h.send(alice, envelope(['@p66.bob', '@p66.carol']));
      for (const socket of [bob1, bob2, carol1]) {
        await socket.until(() => socket.ids.includes(marker.id), 5_000, 'the marker');
        expect(socket.ids).toEqual([sent.id, marker.id]);
        expect(socket.frames.every((frame) => frame.op === 'envelope.notify')).toBe(true);
      }
    });

    it('#67 frame keys are exactly op,id,from,to,cc?,subject?,in_reply_to?,type_hint,size_hint,created_at,date_ms and never carry body, direction, unread, references or monitor', async () => {
      const alice = await h.op.agent('@p67.alice');
      const bob = await h.op.agent('@p67.bob');
      await h.op.agent('@p67.carol');
      const socket = await h.open(bob);
      const first = await h.send(alice, envelope('@p67.bob'));
      const full = envelope('@p67.bob', {
        cc: ['@p67.carol'],
        subject: 'quarterly numbers',
        in_reply_to: first.id,
        references: [first.id],
        monitor: 'mon_p67',
        content_parts: [{ type: 'text', text: 'the-secret-body-text' }],
      });
      await h.send(alice, full);
      const emptySubject = await h.send(alice, envelope('@p67.bob', { subject: '' }));
      await socket.until(() => socket.notifies.length === 3, 5_000, 'three notifies');

      const keys = socket.raw.map((text) => Object.keys(JSON.parse(text)));
      expect(keys[0]).toEqual(MINIMAL_KEYS);
      expect(keys[1]).toEqual(FULL_KEYS);
      expect(keys[2]).toEqual(['op', 'id', 'from', 'to', 'subject', 'type_hint', 'size_hint', 'created_at', 'date_ms']);
      const frame = socket.notifies[1];
      expect(frame).toMatchObject({
        op: 'envelope.notify',
        id: full.id,
        from: '@p67.alice',
        to: ['@p67.bob'],
        cc: ['@p67.carol'],
        subject: 'quarterly numbers',
        in_reply_to: first.id,
        type_hint: 'text',
        date_ms: full.date_ms,
      });
      expect(Number.isInteger(frame.size_hint)).toBe(true);
      expect(socket.notifies[2]).toMatchObject({ id: emptySubject.id, subject: '' });
      for (const text of socket.raw) {
        for (const field of ['content_parts', 'direction', 'unread', 'references', 'monitor', 'received_ms']) {
          expect(text).not.toContain(`"${field}"`);
        }
        expect(text).not.toContain('the-secret-body-text');
      }
    });

    it('#68 a frame carries the created_at of the 202 and of GET /mailbox; the frame is the listing row', async () => {
      const alice = await h.op.agent('@p68.alice');
      const bob = await h.op.agent('@p68.bob');
      const socket = await h.open(bob);
      const accepted = [];
      for (let i = 0; i < 3; i++) accepted.push(await h.send(alice, envelope('@p68.bob', { subject: `n${i}` })));
      await socket.until(() => socket.notifies.length === 3, 5_000, 'three notifies');
      const rows = await h.inbox(bob);
      expect(socket.ids).toEqual(accepted.map((a) => a.id));
      for (let i = 0; i < 3; i++) {
        expect(socket.notifies[i].created_at).toBe(accepted[i].created_at);
        expect(rows[i]).toEqual(socket.notifies[i]);
      }
    });

    it('#69 the sender gets no envelope.notify for a send that does not include itself; a self-send gives exactly one', async () => {
      const alice = await h.op.agent('@p69.alice');
      const bob = await h.op.agent('@p69.bob');
      const [aliceSocket, bobSocket] = await Promise.all([h.open(alice), h.open(bob)]);
      const toBob = await h.send(alice, envelope('@p69.bob'));
      await bobSocket.until(() => bobSocket.ids.includes(toBob.id), 5_000, 'bob’s notify');
      const self = await h.send(alice, envelope('@p69.alice'));
      const ccSelf = await h.send(alice, envelope('@p69.bob', { cc: ['@p69.alice'] }));
      await aliceSocket.until(() => aliceSocket.ids.includes(ccSelf.id), 5_000, 'the cc-self notify');
      expect(aliceSocket.ids).toEqual([self.id, ccSelf.id]);
      expect(aliceSocket.frames).toHaveLength(2);
    });

    it('#70 text and binary frames from the client are ignored; the socket stays open and keeps receiving', async () => {
      const alice = await h.op.agent('@p70.alice');
      const bob = await h.op.agent('@p70.bob');
      const socket = await h.open(bob);
      socket.ws.send('hello');
      socket.ws.send(JSON.stringify({ op: 'subscribe', cursor: null }));
      socket.ws.send(Buffer.from([0, 1, 2, 255]));
      socket.ws.send(Buffer.alloc(4096, 7), { binary: true });
      socket.ws.ping();
      const sent = await h.send(alice, envelope('@p70.bob'));
      await socket.until(() => socket.ids.includes(sent.id), 5_000, 'the notify');
      expect(socket.ws.readyState).toBe(OPEN);
      expect(socket.closeCode).toBeUndefined();
      expect(socket.frames).toHaveLength(1);
    });

    it('#71 envelopes accepted while disconnected are not replayed on a plain reconnect but GET /mailbox returns them after the saved cursor', async () => {
      const alice = await h.op.agent('@p71.alice');
      const bob = await h.op.agent('@p71.bob');
      const first = await h.open(bob);
      const seen = await h.send(alice, envelope('@p71.bob'));
      await first.until(() => first.ids.includes(seen.id), 5_000, 'the first notify');
      const cursor = { created_at: first.notifies[0].created_at, envelope_id: first.notifies[0].id };
      first.close();
      await first.untilClosed();

      const missed = [await h.send(alice, envelope('@p71.bob')), await h.send(alice, envelope('@p71.bob'))];
      const again = await h.open(bob);
      const live = await h.send(alice, envelope('@p71.bob'));
      await again.until(() => again.ids.includes(live.id), 5_000, 'the live notify');
      expect(again.frames.map((frame) => frame.id)).toEqual([live.id]);
      expect((await h.inbox(bob, cursor)).map((row) => row.id)).toEqual([...missed.map((m) => m.id), live.id]);
    });

    it('#72 monitor:"mon_x" sends one monitor.fact per recipient to every sender socket, after the notify frames', async () => {
      const alice = await h.op.agent('@p72.alice');
      const bob = await h.op.agent('@p72.bob');
      const carol = await h.op.agent('@p72.carol');
      const [alice1, alice2, bobSocket, carolSocket] = await Promise.all([
        h.open(alice),
        h.open(alice),
        h.open(bob),
        h.open(carol),
      ]);

      const self = await h.send(alice, envelope(['@p72.bob', '@p72.alice'], { cc: ['@p72.carol'], monitor: 'mon_x' }));
      const fact = (id: string, at: number, handle: string, monitor = 'mon_x') => ({
        op: 'monitor.fact',
        monitor,
        envelope_id: id,
        recipient_handle: handle,
        fact: 'stored',
        at_ms: at,
      });
      for (const socket of [alice1, alice2]) {
        await socket.until(() => socket.frames.length >= 4, 5_000, 'notify and three facts');
        expect(socket.frames).toEqual([
          socket.notifies[0],
          fact(self.id, self.created_at, '@p72.bob'),
          fact(self.id, self.created_at, '@p72.alice'),
          fact(self.id, self.created_at, '@p72.carol'),
        ]);
        expect(socket.notifies[0].id).toBe(self.id);
        expect(Object.keys(JSON.parse(socket.raw[1]))).toEqual([
          'op',
          'monitor',
          'envelope_id',
          'recipient_handle',
          'fact',
          'at_ms',
        ]);
      }

      // The sender is not a recipient: only the facts reach its sockets; recipients get no facts.
      const other = await h.send(alice, envelope('@p72.bob', { cc: ['@p72.carol'], monitor: 'mon_y' }));
      const marker = await h.send(alice, envelope('@p72.alice'));
      for (const socket of [alice1, alice2]) {
        await socket.until(() => socket.ids.includes(marker.id), 5_000, 'the marker');
        expect(socket.frames.slice(4)).toEqual([
          fact(other.id, other.created_at, '@p72.bob', 'mon_y'),
          fact(other.id, other.created_at, '@p72.carol', 'mon_y'),
          socket.notifies[1],
        ]);
      }
      for (const socket of [bobSocket, carolSocket]) {
        await socket.until(() => socket.ids.includes(other.id), 5_000, 'the second notify');
        expect(socket.ids).toEqual([self.id, other.id]);
        expect(socket.frames).toHaveLength(2);
      }
    });

    it('#72 monitor facts stay behind their own notify frame while a gap backfill is in flight', async () => {
      const alice = await h.op.agent('@p72g.alice');
      const socket = await h.open(alice);
      const first = await h.firstNotify(socket, alice, '@p72g.alice');
      const publish = jest.spyOn(h.op.app.get(FrameBus), 'publish').mockImplementationOnce(async () => undefined);
      try {
        const lost = await h.send(alice, envelope('@p72g.alice'));
        // Its frame shows a gap: the socket backfills `lost` from Postgres before sending it.
        const next = await h.send(alice, envelope('@p72g.alice', { monitor: 'mon_gap' }));
        await socket.until(() => socket.frames.length >= 4, 5_000, 'two more notifies and a fact');
        expect(socket.frames.map((frame) => [frame.op, frame.id ?? frame.envelope_id])).toEqual([
          ['envelope.notify', first.id],
          ['envelope.notify', lost.id],
          ['envelope.notify', next.id],
          ['monitor.fact', next.id],
        ]);
      } finally {
        publish.mockRestore();
      }
    });

    it('#73 an idempotent replay produces no push frames and no monitor facts', async () => {
      const alice = await h.op.agent('@p73.alice');
      const bob = await h.op.agent('@p73.bob');
      const [aliceSocket, bobSocket] = await Promise.all([h.open(alice), h.open(bob)]);
      const body = envelope('@p73.bob', { monitor: 'mon_once' });
      const first = await h.send(alice, body);
      await aliceSocket.until(() => aliceSocket.frames.length === 1, 5_000, 'the first fact');
      const replayed = await h.send(alice, body);
      expect(replayed.created_at).toBe(first.created_at);

      const marker = await h.send(alice, envelope(['@p73.bob', '@p73.alice'], { monitor: 'mon_after' }));
      await bobSocket.until(() => bobSocket.ids.includes(marker.id), 5_000, 'bob’s marker');
      await aliceSocket.until(() => aliceSocket.frames.length >= 4, 5_000, 'alice’s marker and facts');
      expect(bobSocket.ids).toEqual([first.id, marker.id]);
      expect(bobSocket.frames).toHaveLength(2);
      expect(
        aliceSocket.frames.map((frame) => [frame.op, frame.monitor ?? null, frame.envelope_id ?? frame.id]),
      ).toEqual([
        ['monitor.fact', 'mon_once', first.id],
        ['envelope.notify', null, marker.id],
        ['monitor.fact', 'mon_after', marker.id],
        ['monitor.fact', 'mon_after', marker.id],
      ]);
    });
  });

  describe('server-side resume (EXTENSIONS.md §1)', () => {
    it('replays exactly the headers after the cursor in (created_at, envelope_id) order, then replay.complete, then live frames, with no gap or duplicate while sends run concurrently', async () => {
      const alice = await h.op.agent('@pres.alice');
      const bob = await h.op.agent('@pres.bob');
      await pool(
        Array.from({ length: 300 }, (_, i) => () => h.send(alice, envelope('@pres.bob', { subject: `before ${i}` }))),
        8,
      );
      const listed = await h.inbox(bob);
      expect(listed).toHaveLength(300);
      const cursor = { created_at: listed[99].created_at, envelope_id: listed[99].id };

      const during = pool(
        Array.from({ length: 100 }, (_, i) => () => h.send(alice, envelope('@pres.bob', { subject: `during ${i}` }))),
        4,
      );
      const socket = await h.open(bob, {
        query: { after_created_at: String(cursor.created_at), after_envelope_id: cursor.envelope_id },
      });
      await during;
      await socket.until(() => socket.notifies.length >= 300, 20_000, '300 notifies');

      const expected = (await h.inbox(bob, cursor)).map((row) => row.id);
      expect(expected).toHaveLength(300);
      expect(socket.ids).toEqual(expected);
      const completes = socket.frames.filter((frame) => frame.op === 'replay.complete');
      expect(completes).toHaveLength(1);
      const at = socket.frames.indexOf(completes[0]);
      const replayed = socket.frames.slice(0, at);
      expect(replayed.every((frame) => frame.op === 'envelope.notify')).toBe(true);
      expect(replayed.length).toBeGreaterThanOrEqual(200);
      const last = replayed[replayed.length - 1];
      expect(socket.raw[at]).toBe(
        JSON.stringify({
          op: 'replay.complete',
          cursor: { created_at: last.created_at, envelope_id: last.id },
          replayed: replayed.length,
        }),
      );
      // The seam was crossed: some of the concurrent sends came live, after replay.complete.
      const live = socket.frames.slice(at + 1);
      expect(live.length).toBeGreaterThan(0);
      expect(live.every((frame) => frame.op === 'envelope.notify')).toBe(true);

      // And it keeps streaming live, still without duplicates.
      const after = await h.send(alice, envelope('@pres.bob'));
      await socket.until(() => socket.ids.includes(after.id), 5_000, 'the live notify');
      expect(socket.ids).toEqual([...expected, after.id]);
    });

    it('a cursor after everything gives replay.complete with cursor null and replayed 0, then live frames', async () => {
      const alice = await h.op.agent('@pend.alice');
      const bob = await h.op.agent('@pend.bob');
      const old = await h.send(alice, envelope('@pend.bob'));
      const socket = await h.open(bob, {
        query: { after_created_at: String(old.created_at), after_envelope_id: old.id },
      });
      await socket.until(() => socket.frames.length === 1, 5_000, 'replay.complete');
      expect(socket.raw[0]).toBe('{"op":"replay.complete","cursor":null,"replayed":0}');
      const live = await h.send(alice, envelope('@pend.bob'));
      await socket.until(() => socket.ids.includes(live.id), 5_000, 'the live notify');
      expect(socket.frames.map((frame) => frame.op)).toEqual(['replay.complete', 'envelope.notify']);

      // A cursor far in the future: same.
      const future = await h.open(bob, {
        query: { after_created_at: String(Date.now() + 86_400_000), after_envelope_id: ulid() },
      });
      await future.until(() => future.frames.length === 1, 5_000, 'replay.complete');
      expect(future.frames[0]).toEqual({ op: 'replay.complete', cursor: null, replayed: 0 });
    });

    it('without the cursor pair there is no replay and no replay.complete frame', async () => {
      const alice = await h.op.agent('@pnone.alice');
      const bob = await h.op.agent('@pnone.bob');
      await h.send(alice, envelope('@pnone.bob'));
      const socket = await h.open(bob);
      const live = await h.send(alice, envelope('@pnone.bob'));
      await socket.until(() => socket.ids.includes(live.id), 5_000, 'the live notify');
      expect(socket.frames.map((frame) => [frame.op, frame.id])).toEqual([['envelope.notify', live.id]]);
    });
  });

  describe('revocation (EXTENSIONS.md quirk table)', () => {
    it('rotate-token closes every open socket of the agent with 4001 within 1 s; other agents’ sockets stay open', async () => {
      const alice = await h.op.agent('@prev.alice');
      const bob = await h.op.agent('@prev.bob');
      const [alice1, alice2, bobSocket] = await Promise.all([h.open(alice), h.open(alice), h.open(bob)]);
      const started = Date.now();
      const rotated = await h.op.client.post(
        `/_admin/agents/${encodeURIComponent('@prev.alice')}/rotate-token`,
        undefined,
        h.op.adminToken,
      );
      expect(rotated.status).toBe(200);
      for (const socket of [alice1, alice2]) {
        await socket.untilClosed(1_000);
        expect(socket.closeCode).toBe(4001);
        expect(socket.closedAt! - started).toBeLessThan(1_000);
      }
      // The old token no longer upgrades; the new one does.
      expect((await refusal(h.op.url, { token: alice })).status).toBe(401);
      const fresh = await h.open(rotated.body.token);

      const sent = await h.send(rotated.body.token, envelope(['@prev.bob', '@prev.alice']));
      await bobSocket.until(() => bobSocket.ids.includes(sent.id), 5_000, 'bob’s notify');
      await fresh.until(() => fresh.ids.includes(sent.id), 5_000, 'alice’s notify on the new socket');
      expect(bobSocket.closeCode).toBeUndefined();
      expect(bobSocket.ws.readyState).toBe(OPEN);
    });

    it('DELETE of an agent closes its open sockets with 4001 within 1 s; other agents’ sockets stay open', async () => {
      const alice = await h.op.agent('@pdel.alice');
      const bob = await h.op.agent('@pdel.bob');
      const carol = await h.op.agent('@pdel.carol');
      const [bob1, bob2, carolSocket] = await Promise.all([h.open(bob), h.open(bob), h.open(carol)]);
      const started = Date.now();
      const deleted = await h.op.client.delete(`/_admin/agents/${encodeURIComponent('@pdel.bob')}`, h.op.adminToken);
      expect(deleted.status).toBeLessThan(300);
      for (const socket of [bob1, bob2]) {
        await socket.untilClosed(1_000);
        expect(socket.closeCode).toBe(4001);
        expect(socket.closedAt! - started).toBeLessThan(1_000);
      }
      const sent = await h.send(alice, envelope('@pdel.carol'));
      await carolSocket.until(() => carolSocket.ids.includes(sent.id), 5_000, 'carol’s notify');
      expect(carolSocket.closeCode).toBeUndefined();
    });

    it('a token rotated while its upgrade is being authenticated still gets that socket closed with 4001', async () => {
      const alice = await h.op.agent('@prace.alice');
      const auth = h.op.app.get(AuthService);
      const agentFor = auth.agentFor.bind(auth);
      let rotated = false;
      // The rotation (and its revoke message) lands after the upgrade checked the old token and
      // before the gateway registered the socket.
      const spy = jest.spyOn(auth, 'agentFor').mockImplementation(async (token) => {
        const agent = await agentFor(token);
        if (token === alice && !rotated) {
          rotated = true;
          const reply = await h.op.client.post(
            `/_admin/agents/${encodeURIComponent('@prace.alice')}/rotate-token`,
            undefined,
            h.op.adminToken,
          );
          expect(reply.status).toBe(200);
        }
        return agent;
      });
      try {
        const socket = await h.open(alice);
        const opened = Date.now();
        await socket.untilClosed(1_000);
        expect(socket.closeCode).toBe(4001);
        expect(socket.closedAt! - opened).toBeLessThan(1_000);
      } finally {
        spy.mockRestore();
      }
    });
  });

  describe('gap backfill (DESIGN.md, Fan-out)', () => {
    it('a lost publish is recovered from Postgres as soon as the next frame shows the gap: each envelope exactly once, in order', async () => {
      const alice = await h.op.agent('@pgap.alice');
      const bob = await h.op.agent('@pgap.bob');
      const socket = await h.open(bob);
      const first = await h.firstNotify(socket, alice, '@pgap.bob');

      const gaps = await h.metric('roost_ws_backfills_total', { cause: 'gap' });
      const bus = h.op.app.get(FrameBus);
      const publish = jest.spyOn(bus, 'publish').mockImplementationOnce(async () => undefined);
      try {
        const lost = await h.send(alice, envelope('@pgap.bob'));
        expect(publish).toHaveBeenCalledTimes(1);
        const next = await h.send(alice, envelope('@pgap.bob'));
        // The sweep is off (1 h): only the gap in `seq` can bring the lost envelope.
        await socket.until(() => socket.ids.includes(next.id), 5_000, 'the next notify');
        expect(socket.ids).toEqual([first.id, lost.id, next.id]);
        expect(await h.metric('roost_ws_backfills_total', { cause: 'gap' })).toBe(gaps + 1);
        const third = await h.send(alice, envelope('@pgap.bob'));
        await socket.until(() => socket.ids.includes(third.id), 5_000, 'the third notify');
        expect(socket.ids).toEqual([first.id, lost.id, next.id, third.id]);
      } finally {
        publish.mockRestore();
      }
    });
  });

  it('a socket whose peer stops reading is closed with 4008 once its send buffer passes the bound', async () => {
    const alice = await h.op.agent('@pslow.alice');
    const bob = await h.op.agent('@pslow.bob');
    const socket = await h.open(bob);
    const slowClosed = await h.metric('roost_ws_closed_total', { reason: 'slow_consumer' });
    const slowCloses = await h.metric('roost_ws_slow_consumer_closes_total');
    // What ROOST_WS_MAX_BUFFERED_BYTES=2048 sets; the gateway reads the live config on every send
    // (changed here rather than starting one more operator, which costs seconds on PGlite).
    const bound = h.op.config.gateway.maxBufferedBytes;
    h.op.config.gateway.maxBufferedBytes = 2048;
    try {
      (socket.ws as any)._socket.pause();
      // Large subjects fill the kernel's socket buffers quickly; stop once the gateway gave up.
      const subject = 'x'.repeat(256 * 1024);
      const sent: string[] = [];
      let closed = slowClosed;
      while (closed === slowClosed && sent.length < 80) {
        sent.push((await h.send(alice, envelope('@pslow.bob', { subject }))).id);
        closed = await h.metric('roost_ws_closed_total', { reason: 'slow_consumer' });
      }
      closed = await h.untilMetric('roost_ws_closed_total', (value) => value > slowClosed, { reason: 'slow_consumer' });
      expect(closed).toBe(slowClosed + 1);
      expect(await h.metric('roost_ws_slow_consumer_closes_total')).toBe(slowCloses + 1);
      (socket.ws as any)._socket.resume();
      await socket.untilClosed(5_000);
      expect(socket.closeCode).toBe(4008);
      // What it did get is a prefix of what was sent, in order: the client resumes from there.
      expect(socket.ids).toEqual(sent.slice(0, socket.ids.length));
    } finally {
      h.op.config.gateway.maxBufferedBytes = bound;
    }
  });

  it('/metrics shows roost_ws_connections, frames sent, replayed frames and backfills moving with the traffic', async () => {
    const alice = await h.op.agent('@pmet.alice');
    const bob = await h.op.agent('@pmet.bob');
    const baseline = await h.untilMetric('roost_ws_connections', (value) => value === 0);
    const notifies = await h.metric('roost_ws_frames_sent_total', { kind: 'notify' });
    const replays = await h.metric('roost_ws_replayed_frames_total');
    const backfills = await h.metric('roost_ws_backfills_total');

    const [one, two] = await Promise.all([h.open(bob), h.open(bob)]);
    await h.untilMetric('roost_ws_connections', (value) => value === baseline + 2);
    const sent = await h.send(alice, envelope('@pmet.bob'));
    await Promise.all(
      [one, two].map((socket) => socket.until(() => socket.ids.includes(sent.id), 5_000, 'the notify')),
    );
    expect(await h.metric('roost_ws_frames_sent_total', { kind: 'notify' })).toBe(notifies + 2);

    const resumed = await h.open(bob, { query: { after_created_at: '0', after_envelope_id: `01${'0'.repeat(24)}` } });
    await resumed.until(() => resumed.frames.some((frame) => frame.op === 'replay.complete'), 5_000, 'replay.complete');
    expect(await h.metric('roost_ws_replayed_frames_total')).toBe(replays + 1);
    expect(await h.metric('roost_ws_frames_sent_total', { kind: 'replay' })).toBeGreaterThanOrEqual(1);

    const publish = jest.spyOn(h.op.app.get(FrameBus), 'publish').mockImplementationOnce(async () => undefined);
    try {
      await h.send(alice, envelope('@pmet.bob'));
      const next = await h.send(alice, envelope('@pmet.bob'));
      await resumed.until(() => resumed.ids.includes(next.id), 5_000, 'the next notify');
    } finally {
      publish.mockRestore();
    }
    expect(await h.metric('roost_ws_backfills_total')).toBeGreaterThan(backfills);

    for (const socket of [one, two, resumed]) socket.close();
    await h.untilMetric('roost_ws_connections', (value) => value === baseline);
  });
});

describe(`gateway timers over the ${busName}: pings, the sweep, drain`, () => {
  const h = harness({ ROOST_WS_PING_INTERVAL_MS: '200', ROOST_WS_SWEEP_INTERVAL_MS: '200' });

  it('a client that never answers pings is terminated within about a second; a normal client stays open across several intervals', async () => {
    const bob = await h.op.agent('@pping.bob');
    const alice = await h.op.agent('@pping.alice');
    const started = Date.now();
    const [dead, alive] = await Promise.all([h.open(bob, { autoPong: false }), h.open(bob)]);
    await dead.untilClosed(3_000);
    expect(dead.closeCode).toBe(1006); // terminated, no close frame
    expect(dead.closedAt! - started).toBeLessThan(1_500);

    await sleep(1_200 - (Date.now() - started));
    expect(alive.closeCode).toBeUndefined();
    const sent = await h.send(alice, envelope('@pping.bob'));
    await alive.until(() => alive.ids.includes(sent.id), 5_000, 'the notify');
    expect(alive.ws.readyState).toBe(OPEN);
  });

  it('a lost publish is recovered by the periodic sweep without any further traffic, exactly once and in order', async () => {
    const alice = await h.op.agent('@psweep.alice');
    const bob = await h.op.agent('@psweep.bob');
    const socket = await h.open(bob);
    const first = await h.firstNotify(socket, alice, '@psweep.bob');
    const sweeps = await h.metric('roost_ws_backfills_total', { cause: 'sweep' });
    const publish = jest.spyOn(h.op.app.get(FrameBus), 'publish').mockImplementationOnce(async () => undefined);
    let lost: { id: string };
    try {
      lost = await h.send(alice, envelope('@psweep.bob'));
      expect(publish).toHaveBeenCalledTimes(1);
    } finally {
      publish.mockRestore();
    }
    await socket.until(() => socket.ids.includes(lost.id), 3_000, 'the swept notify');
    expect(await h.metric('roost_ws_backfills_total', { cause: 'sweep' })).toBeGreaterThan(sweeps);
    const next = await h.send(alice, envelope('@psweep.bob'));
    await socket.until(() => socket.ids.includes(next.id), 5_000, 'the next notify');
    await sleep(500); // a few more sweeps: nothing is sent twice
    expect(socket.ids).toEqual([first.id, lost.id, next.id]);
  });

  it('drain: closing the operator closes open sockets with 1012', async () => {
    const bob = await h.op.agent('@pdrain.bob');
    const carol = await h.op.agent('@pdrain.carol');
    const sockets = await Promise.all([h.open(bob), h.open(bob), h.open(carol)]);
    h.closed = true;
    await h.op.close();
    for (const socket of sockets) {
      await socket.untilClosed(2_000);
      expect(socket.closeCode).toBe(1012);
    }
  });
});
