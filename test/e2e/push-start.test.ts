import { setTimeout as sleep } from 'node:timers/promises';
import { TcpProxy } from '../../chaos/src/proxy';
import { ulid } from '#domain';
import { TestClient } from '../support/client';
import { createTestDatabase } from '../support/database';
import { testDatabaseUrl, testRedisUrl } from '../support/services';
import { connect, type Listener } from '../support/ws';
import { envelopeTo, freePort, RoostProcess } from './cluster';

/**
 * A plain `/connect` socket starts at the mailbox `seq` its gateway reads just after registering
 * it. An envelope committed between the registration and that read is below the start, yet was
 * committed while the socket was open: it must still be pushed, however late the frame stream
 * delivers it. Here the gateway's Postgres is slow (so the read comes after the commit) and the
 * api's Redis slower still (so the frame arrives seconds after the socket started): the frame
 * used to be dropped for good once a 2 s start window had passed, with the sweep unable to see
 * anything missing.
 */

jest.setTimeout(120_000);

const PG_DELAY_MS = 1_500;
const REDIS_DELAY_MS = 6_000;

let drop: () => Promise<void>;
let pgProxy: TcpProxy;
let redisProxy: TcpProxy;
let api: RoostProcess;
let gateway: RoostProcess;
let client: TestClient;
const adminToken = `admin-${ulid()}`;
const prefix = `roost-e2e:${ulid()}:`;

beforeAll(async () => {
  const database = await createTestDatabase('roost_e2e');
  drop = database.drop;
  const pgUrl = new URL(testDatabaseUrl());
  const redisUrl = new URL(testRedisUrl());
  pgProxy = await TcpProxy.start('pg', Number(pgUrl.port || 5432), pgUrl.hostname);
  redisProxy = await TcpProxy.start('redis', Number(redisUrl.port || 6379), redisUrl.hostname);
  const viaProxy = (url: string, proxy: TcpProxy) => {
    const proxied = new URL(url);
    proxied.hostname = '127.0.0.1';
    proxied.port = String(proxy.port);
    return proxied.toString();
  };
  const env = { ROOST_REDIS_PREFIX: prefix, ROOST_ADMIN_TOKEN: adminToken, ROOST_LOG_LEVEL: 'warn' };
  // The api reaches Redis through one proxy, the gateway reaches Postgres through the other.
  api = new RoostProcess('api-0', 'api', await freePort(), {
    ...env,
    DATABASE_URL: database.url,
    REDIS_URL: viaProxy(testRedisUrl(), redisProxy),
  });
  gateway = new RoostProcess('gateway-0', 'gateway', await freePort(), {
    ...env,
    DATABASE_URL: viaProxy(database.url, pgProxy),
    REDIS_URL: testRedisUrl(),
    ROOST_WS_SWEEP_INTERVAL_MS: '1000',
  });
  await api.start();
  await gateway.start();
  client = new TestClient(api.url);
});

afterAll(async () => {
  await Promise.all([api?.stop(3_000), gateway?.stop(3_000)]);
  await Promise.all([pgProxy?.close(), redisProxy?.close()]);
  await drop?.().catch(() => undefined);
});

async function agent(handle: string): Promise<string> {
  const reply = await client.post('/_admin/agents', { handle, policy: 'open' }, adminToken);
  if (reply.status !== 201) throw new Error(`creating ${handle}: ${reply.status} ${reply.text}`);
  return reply.body.token as string;
}

test('a commit made while a plain socket starts is pushed, however late its frame arrives', async () => {
  const bob = await agent('@pstart.bob');
  const alice = await agent('@pstart.alice');
  // Warm the gateway: the frame stream partitions are attached, the pool is connected.
  const warm = await connect(gateway.url.replace('http', 'ws'), { token: bob });
  warm.close();

  pgProxy.setDelay(PG_DELAY_MS);
  redisProxy.setDelay(REDIS_DELAY_MS);
  let listener: Listener | undefined;
  try {
    listener = await connect(gateway.url.replace('http', 'ws'), { token: bob });
    const opened = Date.now();
    // Committed at once (the api's Postgres is direct), well before the gateway's start read
    // reaches Postgres; published only REDIS_DELAY_MS later.
    const body = envelopeTo('@pstart.bob', 1);
    const reply = await client.post('/messages', body, alice);
    expect(reply.status).toBe(202);
    expect(Date.now() - opened).toBeLessThan(PG_DELAY_MS);
    const id = body.id as string;
    const socket = listener;
    await socket.until(() => socket.ids.includes(id), REDIS_DELAY_MS + 10_000, `the frame of ${id}`);
    await sleep(2_000); // several sweeps: nothing is sent twice
    expect(socket.ids.filter((seen) => seen === id)).toHaveLength(1);
    expect(socket.closeCode).toBeUndefined();
  } finally {
    pgProxy.heal();
    redisProxy.heal();
    listener?.close();
  }
});
