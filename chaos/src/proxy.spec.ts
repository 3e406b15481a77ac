import { connect, createServer, type Server, type Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { TcpProxy } from './proxy';

/** An upstream that echoes every byte back, like a request/response server would answer. */
let echo: Server;
let echoPort: number;
let proxy: TcpProxy;
const sockets: Socket[] = [];

beforeEach(async () => {
  echo = createServer((socket) => {
    sockets.push(socket);
    socket.on('error', () => undefined);
    socket.pipe(socket);
  });
  await new Promise<void>((done) => echo.listen(0, '127.0.0.1', () => done()));
  echoPort = (echo.address() as { port: number }).port;
  proxy = await TcpProxy.start('test', echoPort);
});

afterEach(async () => {
  await proxy.close();
  for (const socket of sockets.splice(0)) socket.destroy();
  await new Promise<void>((done) => echo.close(() => done()));
});

/** A client through the proxy that collects what comes back and how the connection ended. */
async function client(): Promise<{ socket: Socket; received: () => string; ended: Promise<string> }> {
  const socket = connect({ port: proxy.port, host: '127.0.0.1' });
  let data = '';
  socket.on('data', (chunk) => (data += chunk.toString()));
  const ended = new Promise<string>((done) => {
    socket.on('error', (error: NodeJS.ErrnoException) => done(error.code ?? 'error'));
    socket.on('close', () => done('closed'));
  });
  await new Promise<void>((done, fail) => {
    socket.once('connect', () => done());
    socket.once('error', fail);
  });
  return { socket, received: () => data, ended };
}

const until = async (predicate: () => boolean, timeoutMs = 5_000) => {
  const deadline = Date.now() + timeoutMs;
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error('timed out');
    await new Promise((done) => setTimeout(done, 5));
  }
};

test('with no fault, bytes pass both ways unchanged (a megabyte, with backpressure)', async () => {
  const c = await client();
  const big = 'x'.repeat(1 << 20);
  c.socket.write('hello ');
  c.socket.write(big);
  await until(() => c.received().length === big.length + 6);
  expect(c.received()).toBe(`hello ${big}`);
  expect(proxy.fault).toBe('pass');
  c.socket.end();
  expect(await c.ended).toBe('closed');
});

test('a delay holds every chunk at least that long each way, in order', async () => {
  proxy.setDelay(150, 20);
  expect(proxy.fault).toBe('delay');
  const c = await client();
  const sent = Date.now();
  for (let i = 0; i < 20; i++) c.socket.write(`${i},`);
  await until(() => c.received().split(',').length === 21);
  // Two hops (to the echo and back), each at least 130 ms.
  expect(Date.now() - sent).toBeGreaterThanOrEqual(255);
  expect(c.received()).toBe(Array.from({ length: 20 }, (_, i) => `${i},`).join(''));
  proxy.heal();
  c.received();
  const before = c.received().length;
  c.socket.write('again');
  await until(() => c.received().length === before + 5);
  c.socket.destroy();
});

test('a partition (blackhole) stalls open and new connections; the heal delivers everything', async () => {
  const open = await client();
  open.socket.write('a');
  await until(() => open.received() === 'a');
  proxy.partition();
  expect(proxy.fault).toBe('partition');
  open.socket.write('b');
  const fresh = await client(); // accepted, but not connected upstream
  fresh.socket.write('c');
  await sleep(300);
  expect(open.received()).toBe('a');
  expect(fresh.received()).toBe('');
  expect(sockets).toHaveLength(1); // the new connection has not reached the upstream
  proxy.heal();
  await until(() => open.received() === 'ab' && fresh.received() === 'c');
  expect(sockets).toHaveLength(2);
  open.socket.destroy();
  fresh.socket.destroy();
});

test('a cut resets every open connection and refuses new ones until the heal', async () => {
  const open = await client();
  open.socket.write('a');
  await until(() => open.received() === 'a');
  proxy.cut();
  expect(await open.ended).toBe('ECONNRESET');
  const refused = connect({ port: proxy.port, host: '127.0.0.1' });
  const outcome = await new Promise<string>((done) => {
    refused.on('error', (error: NodeJS.ErrnoException) => done(error.code ?? 'error'));
    refused.on('close', () => done('closed'));
  });
  expect(outcome).toBe('ECONNREFUSED');
  expect(proxy.resets).toBe(1);
  proxy.heal();
  const after = await client();
  after.socket.write('z');
  await until(() => after.received() === 'z');
  after.socket.destroy();
});

test('the upstream closing ends the client connection; an upstream that is down closes it at once', async () => {
  const c = await client();
  c.socket.write('a');
  await until(() => c.received() === 'a');
  sockets[0].end();
  expect(await c.ended).toBe('closed');
  await new Promise<void>((done) => echo.close(() => done()));
  echo.listen(0); // keep afterEach's close() valid
  const down = await client();
  expect(['closed', 'ECONNRESET']).toContain(await down.ended);
});
