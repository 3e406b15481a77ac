import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { WebSocketServer, type WebSocket } from 'ws';
import { until as untilTrue } from '../../support/until';
import { Listener, ulid, type DeliveredFrame, type Header, type ListenerEvent } from '#client';

/**
 * The listener against a plain ASMTP operator written here in a few lines: it ignores the resume
 * parameters, never sends `replay.complete`, serves `GET /mailbox` from memory and lets the test
 * close sockets with any code.
 */

interface FakeOperator {
  url: string;
  headers: Header[];
  sockets: WebSocket[];
  connections: number;
  push(header: Header): void;
  close(): Promise<void>;
}

function header(createdAt: number): Header {
  return {
    op: 'envelope.notify',
    id: ulid(createdAt),
    from: '@fake.a',
    to: ['@fake.b'],
    type_hint: 'text',
    size_hint: 1,
    created_at: createdAt,
    date_ms: createdAt,
  };
}

async function fakeOperator(): Promise<FakeOperator> {
  const headers: Header[] = [];
  const server: Server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://x');
    if (url.pathname !== '/mailbox') {
      res.writeHead(404).end('{"error":{"code":"NOT_FOUND","message":"no"}}');
      return;
    }
    const limit = Number(url.searchParams.get('limit') ?? 100);
    const afterAt = url.searchParams.get('after_created_at');
    const afterId = url.searchParams.get('after_envelope_id') ?? '';
    const after = (h: Header) =>
      afterAt === null || h.created_at > Number(afterAt) || (h.created_at === Number(afterAt) && h.id > afterId);
    const rows = headers.filter(after).slice(0, limit);
    const last = rows.at(-1);
    const next = rows.length === limit && last ? { created_at: last.created_at, envelope_id: last.id } : null;
    res
      .writeHead(200, { 'content-type': 'application/json' })
      .end(JSON.stringify({ envelope_headers: rows, next_cursor: next }));
  });
  const wss = new WebSocketServer({ server, path: '/connect' });
  const fake: FakeOperator = {
    url: '',
    headers,
    sockets: [],
    connections: 0,
    push(h) {
      headers.push(h);
      for (const ws of fake.sockets) if (ws.readyState === ws.OPEN) ws.send(JSON.stringify(h));
    },
    close: () =>
      new Promise((done) => {
        for (const ws of fake.sockets) ws.terminate();
        wss.close();
        server.close(() => done());
      }),
  };
  wss.on('connection', (ws) => {
    fake.connections++;
    fake.sockets.push(ws);
    ws.on('close', () => fake.sockets.splice(fake.sockets.indexOf(ws), 1));
  });
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  fake.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return fake;
}

const until = (check: () => boolean, timeoutMs: number, what: string) => untilTrue(check, timeoutMs, what, 10);

let op: FakeOperator;
beforeEach(async () => (op = await fakeOperator()));
afterEach(() => op.close());

function listen(extra: Partial<ConstructorParameters<typeof Listener>[0]> = {}) {
  const ids: string[] = [];
  const events: ListenerEvent[] = [];
  const listener = new Listener({
    url: op.url,
    token: 't',
    resumeWaitMs: 150,
    catchUpConfirmMs: 50,
    pageSize: 7,
    onFrame: (frame: DeliveredFrame) => {
      if (frame.op === 'envelope.notify') ids.push(frame.id);
    },
    onEvent: (event) => events.push(event),
    ...extra,
  }).start();
  return { listener, ids, events };
}

it('learns the operator does not resume, catches up over REST page by page, and takes live frames without duplicates', async () => {
  const base = Date.now();
  for (let i = 0; i < 30; i++) op.headers.push(header(base + i));
  const { listener, ids, events } = listen();
  await until(() => events.some((e) => e.type === 'resume' && !e.supported), 5000, 'resume detection');
  // Live frames during the catch-up, one of them also in the pages.
  op.push(header(base + 100));
  op.sockets[0]?.send(JSON.stringify(op.headers[3]));
  await until(() => ids.length >= 31, 5000, 'catch-up and live');
  await sleep(100);
  expect(ids).toHaveLength(new Set(ids).size);
  expect(new Set(ids)).toEqual(new Set(op.headers.map((h) => h.id)));
  // Five pages, then the confirming pass.
  expect(events.find((e) => e.type === 'catchup')).toMatchObject({ pages: 6 });
  // Later connections skip the wait: the listener remembers the operator is plain.
  op.sockets[0].terminate();
  await until(() => op.connections === 2, 5000, 'reconnect');
  op.push(header(base + 200));
  await until(() => ids.length === 32, 5000, 'live after reconnect');
  // The cursor moves past a live frame only once that connection's catch-up has settled.
  await until(
    () => listener.cursor?.envelope_id === op.headers.at(-1)!.id,
    5000,
    'the cursor to reach the newest header',
  );
  expect(ids).toHaveLength(new Set(ids).size);
  await listener.stop();
});

it.each([1012, 4008])('reconnects at once after close %i', async (code) => {
  const { listener, events } = listen({ backoff: { baseMs: 5000, maxMs: 5000 } });
  await until(() => op.connections === 1 && op.sockets.length === 1, 5000, 'connect');
  const closedAt = Date.now();
  op.sockets[0].close(code, 'bye');
  await until(() => op.connections === 2, 2000, 'immediate reconnect');
  expect(Date.now() - closedAt).toBeLessThan(1000);
  expect(events.some((e) => e.type === 'retry')).toBe(false);
  await listener.stop();
});

it('stops for good on 4001 (token revoked)', async () => {
  const { listener } = listen();
  await until(() => op.sockets.length === 1, 5000, 'connect');
  op.sockets[0].close(4001, 'token revoked');
  expect(await listener.done).toBe('revoked');
  await sleep(200);
  expect(op.connections).toBe(1);
});

it('backs off with jitter after a dropped connection', async () => {
  const { listener, events } = listen({ backoff: { baseMs: 300, maxMs: 300 }, random: () => 0 });
  await until(() => op.sockets.length === 1, 5000, 'connect');
  const droppedAt = Date.now();
  op.sockets[0].terminate();
  await until(() => op.connections === 2, 3000, 'reconnect');
  expect(Date.now() - droppedAt).toBeGreaterThanOrEqual(200);
  expect(events.find((e) => e.type === 'retry')).toEqual({ type: 'retry', delayMs: 210, failures: 1 });
  await listener.stop();
});
