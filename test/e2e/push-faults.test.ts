import { setTimeout as sleep } from 'node:timers/promises';
import Redis from 'ioredis';
import {
  Cluster,
  mailboxHeaders,
  RedisServer,
  ResumingClient,
  sendSteady,
  tally,
  type Accepted,
  type SendReport,
  type TestAgent,
} from './cluster';

/**
 * DESIGN.md invariant 5 under a steady send rate through both api nodes: `kill -9` of a gateway, a
 * trimmed frame stream, and a Redis restart lose no 202-acknowledged envelope and duplicate none
 * for a client that resumes from its cursor. Runs on a private redis-server that the test restarts.
 */

// `testTimeout` in a jest project entry is ignored (it is a global option): set it here.
jest.setTimeout(180_000);

const RATE = 50;

let redis: RedisServer;
let cluster: Cluster;
let senders: TestAgent[];

beforeAll(async () => {
  redis = await RedisServer.start();
  try {
    cluster = await Cluster.start({
      api: 2,
      gateway: 2,
      redisUrl: redis.url,
      env: { ROOST_WS_SWEEP_INTERVAL_MS: '500' },
    });
  } catch (error) {
    await redis.kill();
    throw error;
  }
  senders = await Promise.all(['@pf.s1', '@pf.s2', '@pf.s3'].map((handle) => cluster.agent(handle)));
});

afterAll(async () => {
  await cluster?.close();
  await redis?.kill();
});

const gatewayUrls = () => cluster.gateways.map((gateway) => gateway.url);

function percentile(values: number[], p: number): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

/** Every 202 seen exactly once, nothing else seen, and the client's set is the mailbox. */
async function expectExactlyOnce(label: string, agent: TestAgent, report: SendReport, clients: ResumingClient[]) {
  const ids = report.accepted.map((a) => a.id);
  for (const client of clients) {
    await client.waitFor(ids, 20_000).catch((error: Error) => {
      throw new Error(`${label}: ${error.message}; ${JSON.stringify(tally(report.accepted, client))}`);
    });
  }
  await sleep(1_000); // a late duplicate would show up now
  const mailbox = new Set((await mailboxHeaders(cluster.clients[0], agent.token)).map((header) => header.id));
  const refused = Object.fromEntries(report.refused);
  const counts = clients.map((client) => tally(report.accepted, client));
  for (const [i, client] of clients.entries()) {
    console.log(
      `push-faults ${label}${clients.length > 1 ? ` client ${i}` : ''}: ${JSON.stringify({ ...counts[i], refused, mailbox: mailbox.size, connections: client.connections })}`,
    );
  }
  for (const [i, client] of clients.entries()) {
    expect(counts[i]).toMatchObject({ sent: ids.length, missing: 0, duplicated: 0, outOfOrder: 0 });
    // Anything seen beyond the 202s (an answer lost in transit) must still be a real mailbox entry.
    expect([...client.counts.keys()].filter((id) => !mailbox.has(id))).toEqual([]);
  }
  expect(ids.filter((id) => !mailbox.has(id))).toEqual([]);
}

test('kill -9 of a gateway under load: the client resumes on the other one, every 202 seen exactly once', async () => {
  const erin = await cluster.agent('@pf.erin');
  const client = new ResumingClient(gatewayUrls, erin.token, { gateway: 0 });
  await client.start();
  try {
    const t0 = Date.now();
    const sending = sendSteady(cluster, senders, erin.handle, RATE, 10_000);
    const killed: number[] = [];
    const restarts: Promise<void>[] = [];
    for (const at of [3_000, 6_500]) {
      await sleep(t0 + at - Date.now());
      await Promise.all(restarts); // the other gateway is back before this one dies
      const victim = client.gatewayIndex;
      killed.push(victim);
      await cluster.gateways[victim].kill9();
      restarts.push(cluster.gateways[victim].start());
    }
    const report = await sending;
    await Promise.all(restarts);
    await client.settled();
    expect(killed).toEqual([0, 1]);
    expect(client.connections).toBeGreaterThanOrEqual(3);
    await expectExactlyOnce('gateway kill -9', erin, report, [client]);
  } finally {
    client.stop();
  }
});

test('frame streams trimmed to 0 under load: sockets stay open and still get every 202 exactly once', async () => {
  const fay = await cluster.agent('@pf.fay');
  const clients = [0, 1].map((gateway) => new ResumingClient(gatewayUrls, fay.token, { gateway }));
  await Promise.all(clients.map((client) => client.start()));
  const admin = new Redis(redis.url, { maxRetriesPerRequest: 1 });
  admin.on('error', () => undefined);
  const trimAll = async () => {
    let trimmed = 0;
    for (const key of await cluster.frameStreams(admin)) trimmed += Number(await admin.xtrim(key, 'MAXLEN', 0));
    return trimmed;
  };
  const trimFor = async (ms: number) => {
    let trimmed = 0;
    for (const until = Date.now() + ms; Date.now() < until; await sleep(2)) trimmed += await trimAll();
    return trimmed;
  };
  try {
    const sending = sendSteady(cluster, senders, fay.handle, RATE, 8_000);
    await sleep(2_000);
    // A running gateway reads a frame as soon as it is added, so trimming alone rarely beats it:
    // freeze gateway 0 while trimming, so every frame added meanwhile is gone before it reads it.
    let trimmed = (await trimFor(500)) + (await trimAll());
    cluster.gateways[0].pause();
    let unreadByGateway0: number;
    try {
      unreadByGateway0 = await trimFor(1_500);
    } finally {
      cluster.gateways[0].resume();
    }
    trimmed += unreadByGateway0 + (await trimFor(1_000));
    const report = await sending;
    console.log(
      `push-faults xtrim: ${trimmed} frames trimmed, ${unreadByGateway0} of them added and trimmed while gateway 0 was frozen`,
    );
    expect(unreadByGateway0).toBeGreaterThan(20);
    await expectExactlyOnce('xtrim', fay, report, clients);
    for (const client of clients) expect(client.connections).toBe(1);
  } finally {
    cluster.gateways[0].resume();
    admin.disconnect();
    for (const client of clients) client.stop();
  }
});

test('redis-server restart under load: api nodes keep answering 202, gateways recover, every 202 seen exactly once', async () => {
  const gus = await cluster.agent('@pf.gus');
  const steady = new ResumingClient(gatewayUrls, gus.token, { gateway: 0 });
  await steady.start();
  let late: ResumingClient | undefined;
  try {
    const started = Date.now();
    const sending = sendSteady(cluster, senders, gus.handle, RATE, 11_000);
    await sleep(3_000);
    await redis.kill();
    const downAt = Date.now();
    // A socket opened while Redis is down must also get everything (its gateway holds a new mailbox).
    await sleep(500);
    late = new ResumingClient(gatewayUrls, gus.token, { gateway: 1 });
    await late.start();
    await sleep(1_000);
    await redis.start();
    const upAt = Date.now();
    const report = await sending;
    await expectExactlyOnce('redis restart', gus, report, [steady, late]);
    expect(report.refused.size).toBe(0);
    const during = report.accepted.filter((a) => a.at >= downAt && a.at <= upAt).length;
    expect(during).toBeGreaterThan(0);

    // Recovery of the live path, not just the 500 ms sweep: once Redis has been back for 2 s,
    // frames reach the sockets in far less than a sweep interval.
    const latency = (client: ResumingClient, accepted: Accepted[]) =>
      accepted.map((a) => (client.firstSeen.get(a.id) ?? Infinity) - a.at);
    const recovered = report.accepted.filter((a) => a.at > upAt + 2_000);
    const before = report.accepted.filter((a) => a.at < downAt);
    const figures = {
      accepted_while_down: during,
      down_ms: upAt - downAt,
      run_ms: Date.now() - started,
      p50_ms_before: percentile(latency(steady, before), 50),
      p50_ms_after_recovery: [steady, late].map((client) => percentile(latency(client, recovered), 50)),
      p90_ms_after_recovery: [steady, late].map((client) => percentile(latency(client, recovered), 90)),
    };
    console.log(`push-faults redis restart latency: ${JSON.stringify(figures)}`);
    expect(recovered.length).toBeGreaterThan(50);
    for (const p50 of figures.p50_ms_after_recovery) expect(p50).toBeLessThan(150);
  } finally {
    steady.stop();
    late?.stop();
  }
});
