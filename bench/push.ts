import { loadavg } from 'node:os';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { ulid } from '#domain';
import {
  BenchCluster,
  connectUrl,
  notifyId,
  openSocket,
  openSockets,
  processCounters,
  serverCpu,
  serverCpuBetween,
} from './cluster';
import { firstSecondEnd, firstSecondProcesses, firstSecondStart } from './first-second';
import { paced, runFloors } from './push-floors';
import { gcCounters, gcFields, percentile, request, round, stallFields } from './support';

const RECIPIENTS = 50;
const SENDERS = 10;
const RATE_PER_S = 200;
/** The first seconds reported one by one (`first_seconds`); the warm-up lasts at least this long. */
const WARMUP_S = 3;

/** `nodejs_eventloop_lag_max_seconds` of a node, in ms (the max since the previous scrape, per prom-client), or null. */
async function eventLoopLagMax(node: { metrics(): Promise<string> }): Promise<number | null> {
  const line = (await node.metrics().catch(() => ''))
    .split('\n')
    .find((l) => l.startsWith('nodejs_eventloop_lag_max_seconds'));
  return line === undefined ? null : round(Number(line.split(' ')[1]) * 1000);
}

export const stats = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  return {
    p50_ms: round(percentile(sorted, 50)),
    p99_ms: round(percentile(sorted, 99)),
    max_ms: round(sorted.at(-1) ?? NaN),
  };
};

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

/** Garbage collections between two scrapes of a node's /metrics (prom-client's default `nodejs_gc_duration_seconds`), by kind. */
function gcBreakdown(before: string, after: string): Record<string, { count: number; ms: number }> {
  const read = (text: string) => {
    const byKind = new Map<string, { count: number; sum: number }>();
    for (const line of text.split('\n')) {
      const m = /^nodejs_gc_duration_seconds_(count|sum)\{kind="([^"]+)"\} (\S+)$/.exec(line);
      if (!m) continue;
      const entry = byKind.get(m[2]) ?? { count: 0, sum: 0 };
      if (m[1] === 'count') entry.count = Number(m[3]);
      else entry.sum = Number(m[3]);
      byKind.set(m[2], entry);
    }
    return byKind;
  };
  const b = read(before);
  const out: Record<string, { count: number; ms: number }> = {};
  for (const [kind, end] of read(after)) {
    const start = b.get(kind) ?? { count: 0, sum: 0 };
    out[kind] = { count: end.count - start.count, ms: round((end.sum - start.sum) * 1000, 1) };
  }
  return out;
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
 * envelope id (the sender mints the ULID). The floors are a raw Redis XADD → blocked XREAD round
 * trip, measured during the same seconds with as many samples, and a one-row Postgres commit at the
 * same rate right after them, each in a worker thread so that the bench's own event loop does not
 * inflate them (see push-floors.ts).
 */
export async function pushScenario(mode: 'split' | 'all' | 'embedded' = 'split'): Promise<Record<string, unknown>> {
  const seconds = Number(process.env.ROOST_BENCH_SECONDS ?? 20);
  const load_before = round(loadavg()[0]);
  // The stall probe (gc-probe.ts) in every operator process: what its event loop's late ticks were made of.
  const probe = { ROOST_BENCH_STALL_PROBE: '1' };
  const cluster = await BenchCluster.start(
    mode === 'split'
      ? { api: 1, gateway: 1, env: probe }
      : { single: mode === 'all' ? 'postgres' : 'embedded', env: { ROOST_METRICS_PORT: '0', ...probe } },
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
    // What each operator process did in the first second of load (first_second_processes).
    const pids = cluster.nodes.map((node) => node.child?.pid);
    const firstBefore = await firstSecondStart(pids);
    /** POST-start → frame of the warm-up envelopes, by second since the fresh operator's first POST. */
    const warmupStart = performance.now();
    const firstSecond = firstSecondEnd(pids, warmupStart);
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
      const second = Math.floor((t0 - warmupStart) / 1000);
      if (warming && second < WARMUP_S) warmupIds.set(id, second);
      const reply = await request(api.url, 'POST', '/messages', senderTokens[n % SENDERS], body);
      if (reply.status === 202) {
        postLatencies.push(performance.now() - t0);
        acceptedAt.set(id, performance.now());
      } else {
        failed++;
        pending.delete(id);
      }
    };

    // Warm-up (connections, JIT, plans), not counted. ROOST_BENCH_WARMUP_SECONDS (default 3) runs
    // it longer: at 200/s V8's optimizing compiler is still busy well past 3 s (see docs/benchmarks.md).
    const warmupSeconds = Math.max(WARMUP_S, Number(process.env.ROOST_BENCH_WARMUP_SECONDS ?? WARMUP_S));
    await paced(RATE_PER_S, warmupSeconds * RATE_PER_S, post);
    const first = await firstSecond.read();
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
    const gcBefore = await Promise.all(cluster.nodes.map((node) => gcCounters(node.pid)));
    const countersBefore = cluster.nodes.map((node) => processCounters(node.pid));
    const runStart = performance.now();
    // The Redis floor runs in a worker thread (own event loop), in the same seconds as the posts.
    const [floors] = await Promise.all([
      runFloors({
        redisUrl: mode === 'embedded' ? undefined : cluster.redisUrl,
        prefix: cluster.prefix,
        ratePerS: RATE_PER_S,
        count,
      }),
      paced(RATE_PER_S, count, post),
    ]);
    const floor = floors.redis;
    const runS = (performance.now() - runStart) / 1000;
    const benchCpu = process.cpuUsage(benchCpuBefore);
    benchLoop.disable();
    // Per envelope, summed over the operator processes: where the CPU goes (user or kernel), and
    // the counts behind the kernel part (syscalls, switches) that per-request work multiplies.
    const counters = cluster.nodes.map((node, i) => {
      const after = processCounters(node.pid);
      const before = countersBefore[i];
      const user = after.userS - before.userS;
      const system = after.systemS - before.systemS;
      const main = after.mainThreadS - before.mainThreadS;
      return {
        user,
        system,
        main,
        runQueue: after.mainThreadRunQueueS - before.mainThreadRunQueueS,
        // V8's compiler and GC threads, libuv's pool.
        helpers: user + system - main,
        syscalls: after.syscalls - before.syscalls,
        voluntary: after.voluntarySwitches - before.voluntarySwitches,
        involuntary: after.involuntarySwitches - before.involuntarySwitches,
      };
    });
    const perEnvelope = (key: keyof (typeof counters)[number], scale: number) =>
      round((counters.reduce((sum, c) => sum + c[key], 0) * scale) / count, 3);
    const nodeCpuS = counters.reduce((sum, c) => sum + c.user + c.system, 0);
    const gcAfter = await Promise.all(cluster.nodes.map((node) => gcCounters(node.pid)));
    const serversAfter = serverRedis ? await serverCpu(cluster.databaseUrl, serverRedis) : undefined;
    serverRedis?.disconnect();
    // The pg floor's own backends are gone by now.
    const servers = serversBefore && serversAfter ? serverCpuBetween(serversBefore, serversAfter) : undefined;
    const postgresCpuS = servers?.postgres ?? null;
    const redisCpuS = servers?.redis ?? null;
    const lagAfter = await eventLoopLagMax(api);
    const metricsAfter = await api.metrics();
    const stages = stageBreakdown(metricsBefore, metricsAfter);
    // In the split mode the api's collections only (the gateway's are not scraped here).
    const gc = gcBreakdown(metricsBefore, metricsAfter);
    const deadline = Date.now() + 10_000;
    while (pending.size > 0 && Date.now() < deadline) await sleep(20);
    // The Postgres commit floor in its own seconds, after the counted ones: 200 commits a second
    // are a second writer as busy as the operator, and on a 2-core machine running them beside the
    // posts put the operator's main thread in the run queue a quarter longer (its event-loop lag max
    // 15-24 ms with them, 15 without, in alternated runs; docs/benchmarks.md, 2026-12-05).
    const pgCommits =
      mode === 'embedded' || process.env.ROOST_BENCH_PG_FLOOR === '0'
        ? undefined
        : (
            await runFloors({
              prefix: cluster.prefix,
              databaseUrl: cluster.databaseUrl,
              ratePerS: RATE_PER_S,
              count,
            })
          ).pg;

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
      floors_in: floor.length > 0 || pgCommits ? 'worker thread (own event loop)' : null,
      floors_event_loop_delay_p99_ms: round(floors.loopDelayP99Ms),
      floors_event_loop_delay_max_ms: round(floors.loopDelayMaxMs),
      operator_cpu_ms_per_envelope: round((nodeCpuS * 1000) / count, 3),
      operator_user_cpu_ms_per_envelope: perEnvelope('user', 1000),
      operator_system_cpu_ms_per_envelope: perEnvelope('system', 1000),
      operator_main_thread_cpu_ms_per_envelope: perEnvelope('main', 1000),
      operator_other_threads_cpu_ms_per_envelope: perEnvelope('helpers', 1000),
      operator_syscalls_per_envelope: perEnvelope('syscalls', 1),
      operator_voluntary_switches_per_envelope: perEnvelope('voluntary', 1),
      operator_involuntary_switches_per_envelope: perEnvelope('involuntary', 1),
      // Every operator process, from its own GC statistics (bench/gc-probe.ts).
      ...gcFields(gcBefore, gcAfter, count),
      ...stallFields(
        gcBefore,
        gcAfter,
        cluster.nodes.map((node, i) => ({
          name: node.role,
          onCpuS: counters[i].main,
          runQueueS: counters[i].runQueue,
        })),
        runS,
      ),
      postgres_backends_cpu_ms_per_envelope: postgresCpuS === null ? null : round((postgresCpuS * 1000) / count, 3),
      redis_server_cpu_ms_per_envelope: redisCpuS === null ? null : round((redisCpuS * 1000) / count, 3),
      bench_cpu_ms_per_envelope: round((benchCpu.user + benchCpu.system) / 1e3 / count, 3),
      first_seconds: warmupBySecond.map((values, i) => ({ second: i + 1, n: values.length, ...stats(values) })),
      first_second_processes: firstSecondProcesses(
        cluster.nodes.map((node) => node.role),
        firstBefore,
        first,
      ),
      event_loop_lag_max_ms_boot_and_warmup: lagBefore,
      event_loop_lag_max_ms_run: lagAfter,
      warmup_s: warmupSeconds,
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
      pg_commit_floor_when: pgCommits ? 'after the counted seconds, alone' : null,
      pg_commit_floor_samples: pgCommits?.latencies.length ?? 0,
      pg_commit_floor_synchronous_commit: pgCommits?.synchronousCommit ?? null,
      pg_commit_floor_p50_ms: pgCommits ? stats(pgCommits.latencies).p50_ms : null,
      pg_commit_floor_p99_ms: pgCommits ? stats(pgCommits.latencies).p99_ms : null,
      accept_stages: stages,
      api_gc_in_run: gc,
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
