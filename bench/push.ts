import { loadavg } from 'node:os';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { ulid } from '#domain';
import { BenchCluster, connectUrl, cpuSeconds, notifyId, openSocket, openSockets } from './cluster';
import { percentile, request, round } from './support';

const RECIPIENTS = 50;
const SENDERS = 10;
const RATE_PER_S = 200;
const WARMUP_S = 3;

/** `nodejs_eventloop_lag_max_seconds` of a node, in ms (the max since the previous scrape, per prom-client), or null. */
async function eventLoopLagMax(node: { metrics(): Promise<string> }): Promise<number | null> {
  const line = (await node.metrics().catch(() => ''))
    .split('\n')
    .find((l) => l.startsWith('nodejs_eventloop_lag_max_seconds'));
  return line === undefined ? null : round(Number(line.split(' ')[1]) * 1000);
}

/**
 * Call `fn(n)` for n = 0 … count-1 at `ratePerS`, open loop (a slow answer never delays the next
 * call); resolves when every call has settled.
 */
export async function paced(
  ratePerS: number,
  count: number,
  fn: (n: number) => Promise<void>,
  offsetMs = 0,
): Promise<void> {
  const start = performance.now() + offsetMs;
  const inFlight: Array<Promise<void>> = [];
  for (let n = 0; n < count; n++) {
    const due = start + (n * 1000) / ratePerS;
    const wait = due - performance.now();
    if (wait > 0.5) await sleep(wait);
    inFlight.push(fn(n).catch(() => undefined));
  }
  await Promise.all(inFlight);
}

export const stats = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  return {
    p50_ms: round(percentile(sorted, 50)),
    p99_ms: round(percentile(sorted, 99)),
    max_ms: round(sorted.at(-1) ?? NaN),
  };
};

/**
 * The floor: a publisher connection XADDs a small entry and a reader connection blocked in XREAD
 * receives it, `count` samples at `ratePerS`, concurrently with the push run (same machine load).
 */
async function redisFloor(cluster: BenchCluster, ratePerS: number, count: number): Promise<number[]> {
  const publisher = cluster.redis();
  const reader = cluster.redis();
  const key = `${cluster.prefix}bench:floor`;
  const started = new Map<number, number>();
  const latencies: number[] = [];
  let running = true;
  let lastId = '$';
  await reader.ping();
  const readLoop = (async () => {
    while (running) {
      const reply = await reader.xread('BLOCK', 500, 'STREAMS', key, lastId);
      const now = performance.now();
      for (const [, entries] of reply ?? []) {
        for (const [id, fields] of entries) {
          lastId = id;
          const t0 = started.get(Number(fields[1]));
          if (t0 !== undefined) latencies.push(now - t0);
        }
      }
    }
  })();
  // Let the reader block first.
  await sleep(50);
  await paced(
    ratePerS,
    count,
    async (n) => {
      started.set(n, performance.now());
      await publisher.xadd(key, 'MAXLEN', '~', '10000', '*', 'i', String(n));
    },
    1000 / ratePerS / 2,
  );
  const deadline = Date.now() + 5_000;
  while (latencies.length < count && Date.now() < deadline) await sleep(10);
  running = false;
  await readLoop.catch(() => undefined);
  publisher.disconnect();
  reader.disconnect();
  return latencies;
}

/**
 * The durable-commit floor: a plain `pg` pool (Roost's default size, 20) commits a one-row INSERT
 * (autocommit, `synchronous_commit` as the server has it: on, as for Roost) at `ratePerS`, open
 * loop, concurrently with the push run on the same Postgres. Latency is the commit's round trip on
 * a connection already checked out (no pool wait), the part of an accept no batching can remove.
 */
async function pgFloor(
  databaseUrl: string,
  ratePerS: number,
  count: number,
): Promise<{ latencies: number[]; synchronousCommit: string }> {
  const size = 20;
  const pool = new pg.Pool({ connectionString: databaseUrl, max: size });
  try {
    await pool.query(
      'create table if not exists bench_floor (id bigint primary key, at bigint not null, pad text not null)',
    );
    const synchronousCommit = (await pool.query<{ synchronous_commit: string }>('show synchronous_commit')).rows[0]
      .synchronous_commit;
    // Open every connection before the first sample.
    const clients = await Promise.all(Array.from({ length: size }, () => pool.connect()));
    clients.forEach((client) => client.release());
    const pad = 'x'.repeat(400);
    const latencies: number[] = [];
    await paced(
      ratePerS,
      count,
      async (n) => {
        const client = await pool.connect();
        try {
          const t0 = performance.now();
          await client.query({
            name: 'bench_floor_insert',
            text: 'insert into bench_floor (id, at, pad) values ($1, $2, $3)',
            values: [n, Date.now(), pad],
          });
          latencies.push(performance.now() - t0);
        } finally {
          client.release();
        }
      },
      1000 / ratePerS / 4,
    );
    return { latencies, synchronousCommit };
  } finally {
    await pool.end();
  }
}

/**
 * CPU seconds so far of the Postgres backends serving the scratch database, by pid, and of the
 * Redis server (from /proc: the bench runs on their machine); a pid gone or unreadable counts 0.
 * The Redis figure includes the Redis floor's own XADD/XREAD.
 */
async function serverCpu(databaseUrl: string, redis: { info(section: string): Promise<string> }) {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    const { rows } = await client.query<{ pid: number }>(
      'select pid from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid()',
    );
    const redisPid = Number(/process_id:(\d+)/.exec(await redis.info('server'))?.[1]);
    const read = (pid: number) => {
      try {
        return cpuSeconds(pid);
      } catch {
        return 0;
      }
    };
    return {
      postgres: new Map(rows.map(({ pid }) => [pid, read(pid)])),
      redis: Number.isFinite(redisPid) ? read(redisPid) : 0,
    };
  } finally {
    await client.end();
  }
}

const STAGES = ['server', 'auth', 'prepare', 'queue', 'write', 'publish'] as const;

/**
 * Cumulative bucket counts (`le` in seconds) of `roost_accept_stage_seconds` by stage, and of
 * `roost_http_request_duration_seconds` for `POST /messages` as the stage `server` (the whole
 * request inside the process: parse, guard, handler, reply; coarser buckets).
 */
function stageBuckets(text: string): Map<string, Array<[number, number]>> {
  const byStage = new Map<string, Array<[number, number]>>();
  for (const line of text.split('\n')) {
    const m = /^(roost_accept_stage_seconds|roost_http_request_duration_seconds)_bucket\{(.*)\} (\S+)$/.exec(line);
    if (!m) continue;
    const stage =
      m[1] === 'roost_accept_stage_seconds'
        ? /stage="([^"]+)"/.exec(m[2])?.[1]
        : m[2].includes('route="/messages"') && m[2].includes('method="POST"')
          ? 'server'
          : undefined;
    const le = /le="([^"]+)"/.exec(m[2])?.[1];
    if (stage === undefined || le === undefined) continue;
    const buckets = byStage.get(stage) ?? [];
    buckets.push([le === '+Inf' ? Infinity : Number(le), Number(m[3])]);
    byStage.set(stage, buckets);
  }
  return byStage;
}

/** A quantile of a histogram delta, linear within its bucket (Prometheus `histogram_quantile`), in ms. */
function bucketQuantile(buckets: Array<[number, number]>, q: number): number | null {
  const total = buckets.at(-1)?.[1] ?? 0;
  if (total === 0) return null;
  const rank = q * total;
  let lower = 0;
  let below = 0;
  for (const [le, count] of buckets) {
    if (count >= rank) {
      if (le === Infinity) return round(lower * 1000);
      return round((lower + ((le - lower) * (rank - below)) / Math.max(1, count - below)) * 1000);
    }
    lower = le;
    below = count;
  }
  return null;
}

/** Per stage: samples, p50 and p99 (ms, bucket-interpolated) between two scrapes of a node's /metrics. */
function stageBreakdown(before: string, after: string): Record<string, unknown> {
  const b = stageBuckets(before);
  const a = stageBuckets(after);
  const out: Record<string, unknown> = {};
  for (const stage of STAGES) {
    const end = a.get(stage);
    if (!end) continue;
    const start = new Map(b.get(stage) ?? []);
    const delta = end.map(([le, count]): [number, number] => [le, count - (start.get(le) ?? 0)]);
    out[stage] = { n: delta.at(-1)?.[1] ?? 0, p50_ms: bucketQuantile(delta, 0.5), p99_ms: bucketQuantile(delta, 0.99) };
  }
  return out;
}

/**
 * `push`: 50 recipients connected to a gateway process, 200 envelopes/s posted through a separate
 * api process (one recipient each, round robin), for ROOST_BENCH_SECONDS (default 20). Latency is
 * from the start of the POST to the `envelope.notify` frame on the recipient's socket, matched by
 * envelope id (the sender mints the ULID). The floor is a raw Redis XADD → blocked XREAD round trip
 * measured during the same seconds, with as many samples.
 */
export async function pushScenario(mode: 'split' | 'all' | 'embedded' = 'split'): Promise<Record<string, unknown>> {
  const seconds = Number(process.env.ROOST_BENCH_SECONDS ?? 20);
  const load_before = round(loadavg()[0]);
  const cluster = await BenchCluster.start(
    mode === 'split'
      ? { api: 1, gateway: 1 }
      : { single: mode === 'all' ? 'postgres' : 'embedded', env: { ROOST_METRICS_PORT: '0' } },
  );
  const sockets: Array<{ terminate(): void }> = [];
  try {
    const recipients = Array.from({ length: RECIPIENTS }, (_, i) => `@bench.r${String(i).padStart(2, '0')}`);
    const senders = Array.from({ length: SENDERS }, (_, i) => `@bench.s${i}`);
    const tokens = await cluster.createAgents([...recipients, ...senders]);
    const recipientTokens = tokens.slice(0, RECIPIENTS);
    const senderTokens = tokens.slice(RECIPIENTS);

    const pending = new Map<string, number>();
    const warmupIds = new Map<string, number>();
    let latencies: number[] = [];
    let unexpected = 0;
    let stampToFrame: number[] = [];
    /** Arrival of each frame and of each 202, by envelope id: how the frame races the response. */
    const frameAt = new Map<string, number>();
    const acceptedAt = new Map<string, number>();
    const onFrame = (data: Buffer) => {
      const now = performance.now();
      const id = notifyId(data);
      if (id === undefined) return;
      const t0 = pending.get(id);
      if (t0 === undefined) {
        unexpected++;
        return;
      }
      pending.delete(id);
      latencies.push(now - t0);
      const second = warmupIds.get(id);
      if (second !== undefined) warmupBySecond[second].push(now - t0);
      frameAt.set(id, now);
      // `created_at` is stamped in the accept transaction just before its commit (same clock).
      const createdAt = (JSON.parse(data.toString('utf8')) as { created_at: number }).created_at;
      stampToFrame.push(Date.now() - createdAt);
    };
    sockets.push(
      ...(await openSockets(RECIPIENTS, 10, (i) =>
        openSocket(connectUrl(cluster.gateways[0]), recipientTokens[i], onFrame),
      )),
    );
    // Sockets start (token check, starting seq) asynchronously after the upgrade.
    await sleep(500);

    const api = cluster.apis[0];
    let postLatencies: number[] = [];
    let failed = 0;
    /** POST-start → frame of the warm-up envelopes, by second since the fresh operator's first POST. */
    const warmupStart = performance.now();
    const warmupBySecond: number[][] = Array.from({ length: WARMUP_S }, () => []);
    let warming = true;
    const post = async (n: number) => {
      const id = ulid();
      const body = JSON.stringify({
        id,
        to: [recipients[n % RECIPIENTS]],
        date_ms: Date.now(),
        subject: `push ${n}`,
        content_parts: [{ type: 'text', text: `push bench envelope ${n}` }],
      });
      const t0 = performance.now();
      pending.set(id, t0);
      if (warming) warmupIds.set(id, Math.min(WARMUP_S - 1, Math.floor((t0 - warmupStart) / 1000)));
      const reply = await request(api.url, 'POST', '/messages', senderTokens[n % SENDERS], body);
      if (reply.status === 202) {
        postLatencies.push(performance.now() - t0);
        acceptedAt.set(id, performance.now());
      } else {
        failed++;
        pending.delete(id);
      }
    };

    // Warm-up (connections, JIT, plans), not counted.
    await paced(RATE_PER_S, WARMUP_S * RATE_PER_S, post);
    await sleep(500);
    warming = false;
    const lagBefore = await eventLoopLagMax(api);
    const metricsBefore = await api.metrics();
    latencies = [];
    stampToFrame = [];
    frameAt.clear();
    acceptedAt.clear();
    postLatencies = [];
    failed = 0;
    pending.clear();
    unexpected = 0;

    const count = seconds * RATE_PER_S;
    // The client's own event-loop delay: a POST or frame it handles late counts as latency too.
    const benchLoop = monitorEventLoopDelay({ resolution: 5 });
    benchLoop.enable();
    const serverRedis = mode === 'embedded' ? undefined : cluster.redis();
    const serversBefore = serverRedis ? await serverCpu(cluster.databaseUrl, serverRedis) : undefined;
    const benchCpuBefore = process.cpuUsage();
    const nodeCpuBefore = cluster.nodes.map((node) => cpuSeconds(node.pid));
    const [floor, pgCommits] = await Promise.all([
      mode === 'embedded' ? Promise.resolve([]) : redisFloor(cluster, RATE_PER_S, count),
      mode === 'embedded' || process.env.ROOST_BENCH_PG_FLOOR === '0'
        ? Promise.resolve(undefined)
        : pgFloor(cluster.databaseUrl, RATE_PER_S, count),
      paced(RATE_PER_S, count, post),
    ]);
    const benchCpu = process.cpuUsage(benchCpuBefore);
    benchLoop.disable();
    const nodeCpuS = cluster.nodes.reduce((sum, node, i) => sum + cpuSeconds(node.pid) - nodeCpuBefore[i], 0);
    const serversAfter = serverRedis ? await serverCpu(cluster.databaseUrl, serverRedis) : undefined;
    serverRedis?.disconnect();
    // Backends that started during the run count from 0; the pg floor's own backends are gone by now.
    const postgresCpuS =
      serversAfter && serversBefore
        ? [...serversAfter.postgres].reduce((sum, [pid, cpu]) => sum + cpu - (serversBefore.postgres.get(pid) ?? 0), 0)
        : null;
    const redisCpuS = serversAfter && serversBefore ? serversAfter.redis - serversBefore.redis : null;
    const lagAfter = await eventLoopLagMax(api);
    const stages = stageBreakdown(metricsBefore, await api.metrics());
    const deadline = Date.now() + 10_000;
    while (pending.size > 0 && Date.now() < deadline) await sleep(20);

    const frameMinus202: number[] = [];
    for (const [id, at] of frameAt) {
      const accepted = acceptedAt.get(id);
      if (accepted !== undefined) frameMinus202.push(at - accepted);
    }
    const push = stats(latencies);
    const raw = stats(floor);
    return {
      scenario: mode === 'split' ? 'push' : `push-${mode}`,
      client: 'node-http (keep-alive http.Agent)',
      bench_cpu_s_in_run: round((benchCpu.user + benchCpu.system) / 1e6, 1),
      bench_event_loop_delay_p99_ms: round(benchLoop.percentile(99) / 1e6),
      bench_event_loop_delay_max_ms: round(benchLoop.max / 1e6),
      operator_cpu_ms_per_envelope: round((nodeCpuS * 1000) / count, 3),
      postgres_backends_cpu_ms_per_envelope: postgresCpuS === null ? null : round((postgresCpuS * 1000) / count, 3),
      redis_server_cpu_ms_per_envelope: redisCpuS === null ? null : round((redisCpuS * 1000) / count, 3),
      bench_cpu_ms_per_envelope: round((benchCpu.user + benchCpu.system) / 1e3 / count, 3),
      first_seconds: warmupBySecond.map((values, i) => ({ second: i + 1, n: values.length, ...stats(values) })),
      event_loop_lag_max_ms_boot_and_warmup: lagBefore,
      event_loop_lag_max_ms_run: lagAfter,
      recipients: RECIPIENTS,
      senders: SENDERS,
      rate_per_s: RATE_PER_S,
      seconds,
      posted: count,
      failed,
      frames: latencies.length,
      missing: pending.size,
      unexpected,
      p50_ms: push.p50_ms,
      p99_ms: push.p99_ms,
      max_ms: push.max_ms,
      created_at_to_frame_p50_ms: stats(stampToFrame).p50_ms,
      created_at_to_frame_p99_ms: stats(stampToFrame).p99_ms,
      post_202_p50_ms: stats(postLatencies).p50_ms,
      post_202_p99_ms: stats(postLatencies).p99_ms,
      frame_minus_202_p50_ms: stats(frameMinus202).p50_ms,
      frame_minus_202_p99_ms: stats(frameMinus202).p99_ms,
      redis_floor_samples: floor.length,
      redis_floor_p50_ms: raw.p50_ms,
      redis_floor_p99_ms: raw.p99_ms,
      pg_commit_floor_samples: pgCommits?.latencies.length ?? 0,
      pg_commit_floor_synchronous_commit: pgCommits?.synchronousCommit ?? null,
      pg_commit_floor_p50_ms: pgCommits ? stats(pgCommits.latencies).p50_ms : null,
      pg_commit_floor_p99_ms: pgCommits ? stats(pgCommits.latencies).p99_ms : null,
      accept_stages: stages,
      target_p99_ms: 15,
      met: push.p99_ms <= 15 && pending.size === 0,
      processes:
        mode === 'split'
          ? '1 api + 1 gateway, real Postgres and Redis'
          : mode === 'all'
            ? 'one ROOST_ROLE=all process on Postgres + Redis'
            : 'one embedded process (PGlite, in-process bus)',
      load_1m_before: load_before,
      load_1m_after: round(loadavg()[0]),
    };
  } finally {
    for (const ws of sockets) ws?.terminate();
    await cluster.close();
  }
}
