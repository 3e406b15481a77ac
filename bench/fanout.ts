import { readFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { RedisFrameBus, type HeaderFrame } from '#bus';
import { ulid } from '#domain';
import { counter } from './accept';
import {
  BenchCluster,
  benchListener,
  connectUrl,
  cpuWindow,
  notifyId,
  openListener,
  openSockets,
  type ListenerSocket,
} from './cluster';
import { stats } from './push';
import { request, round } from './support';

const AGENTS = 2_000;
const PER_ENVELOPE = 50;
const GROUPS = AGENTS / PER_ENVELOPE;
const SENDERS = 16;
const WARMUP_S = 3;

interface Sent {
  t0: number;
  frames: number;
  measured: boolean;
  /** Which group of PER_ENVELOPE agents it went to (sockets group * PER_ENVELOPE …). */
  group?: number;
  /** When the 202 arrived, and the last of the 50 frames. */
  acceptedAt: number;
  lastFrameAt: number;
  /** Gateway-only phase: latencies go here, and each frame is reported. */
  direct?: number[];
  onFrame?: () => void;
}

const CREATED_AT = Buffer.from('"created_at":');

/** The `created_at` of a header frame (digits after `"created_at":`), else -1: no JSON parse. */
export function frameCreatedAt(data: Buffer): number {
  let i = data.indexOf(CREATED_AT);
  if (i < 0) return -1;
  i += CREATED_AT.length;
  let value = 0;
  let digits = 0;
  for (; i < data.length && data[i] >= 0x30 && data[i] <= 0x39; i++, digits++) value = value * 10 + data[i] - 0x30;
  return digits > 0 ? value : -1;
}

/** User + system CPU ticks (10 ms) used so far by each named process. */
function cpuTicks(pids: Record<string, number>): Record<string, number> {
  return Object.fromEntries(
    Object.entries(pids).map(([name, pid]) => {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      return [name, Number(fields[11]) + Number(fields[12])];
    }),
  );
}

/** CPU microseconds per frame of each process (not the machine_* totals). */
function usPerFrame(cpuPct: Record<string, number>, framesPerS: number): Record<string, number> {
  return Object.fromEntries(
    Object.entries(cpuPct)
      .filter(([name]) => !name.startsWith('machine_'))
      .map(([name, pct]) => [name, round((pct / 100 / framesPerS) * 1e6, 1)]),
  );
}

/**
 * The fan-out layer alone: the bench publishes header frames straight to the Redis partition streams
 * (the api's `RedisFrameBus.publish`, same format, each mailbox's `seq` continuing from Postgres, so
 * gateways see no gap and never touch Postgres), `inFlight` envelopes of 50 frames at a time
 * (closed loop: a new one once all 50 frames of one arrived). Run last: the gateways' `seq` is then
 * ahead of Postgres.
 */
async function gatewayOnly(
  cluster: BenchCluster,
  handles: readonly string[],
  sent: Map<string, Sent>,
  seconds: number,
  inFlight: number,
  pids: Record<string, number>,
) {
  const db = new pg.Client({ connectionString: cluster.databaseUrl });
  await db.connect();
  const rows = await db.query<{ handle: string; id: string; last_seq: string }>(
    'SELECT a.handle, a.id, m.last_seq FROM agents a JOIN mailboxes m ON m.agent_id = a.id WHERE a.handle = ANY($1)',
    [handles],
  );
  await db.end();
  const byHandle = new Map(rows.rows.map((row) => [row.handle, { id: Number(row.id), seq: Number(row.last_seq) }]));
  const bus = new RedisFrameBus({
    url: cluster.redisUrl,
    prefix: cluster.prefix,
    partitions: Number(process.env.ROOST_STREAM_PARTITIONS ?? 16),
    maxLen: 100_000,
  });
  // Its command connection has no offline queue: wait until it is up.
  for (let tries = 0; !(await bus.ready()); tries++) {
    if (tries > 100) throw new Error('the bench frame bus did not connect to Redis');
    await sleep(20);
  }
  const latencies: number[] = [];
  let frames = 0;
  const waiting = new Map<string, () => void>();
  const done = (id: string, entry: Sent) => {
    if (entry.frames === PER_ENVELOPE) waiting.get(id)?.();
  };
  const cpu = cpuWindow(pids);
  cpu.begin();
  const ticksBefore = cpuTicks(pids);
  const start = performance.now();
  const until = start + seconds * 1000;
  let n = 0;
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (performance.now() < until) {
        const i = n++;
        const group = i % GROUPS;
        const members = handles.slice(group * PER_ENVELOPE, (group + 1) * PER_ENVELOPE);
        const id = ulid();
        const now = Date.now();
        const header = JSON.stringify({
          op: 'envelope.notify',
          id,
          from: '@bench.fs00',
          to: members,
          subject: `direct ${i}`,
          type_hint: 'text',
          size_hint: 24,
          created_at: now,
          date_ms: now,
        });
        const out: HeaderFrame[] = members.map((handle) => {
          const mailbox = byHandle.get(handle)!;
          return { mailbox_id: mailbox.id, seq: ++mailbox.seq, envelope_id: id, created_at: now, header };
        });
        const entry: Sent = {
          t0: performance.now(),
          frames: 0,
          measured: false,
          acceptedAt: NaN,
          lastFrameAt: NaN,
          direct: latencies,
        };
        sent.set(id, entry);
        const arrived = new Promise<void>((resolve) => waiting.set(id, resolve));
        entry.onFrame = () => {
          frames++;
          done(id, entry);
        };
        await bus.publish({ committed_at: now, frames: out, monitor: [] });
        await Promise.race([arrived, new Promise((resolve) => setTimeout(resolve, 5_000))]);
        waiting.delete(id);
      }
    }),
  );
  const elapsedS = (performance.now() - start) / 1000;
  const cpuPct = cpu.end();
  const ticksAfter = cpuTicks(pids);
  await bus.close();
  // From the processes' own tick counts, not the rounded percentages: precise enough for a short window.
  const cpuUsPerFrame = Object.fromEntries(
    Object.keys(pids).map((name) => [name, round(((ticksAfter[name] - ticksBefore[name]) * 10_000) / frames, 1)]),
  );
  return { framesPerS: round(frames / elapsedS, 0), ...stats(latencies), cpuPct, cpuUsPerFrame };
}

/**
 * `fanout`: 2,000 open-policy agents, one socket each, spread over ROOST_BENCH_GATEWAYS gateway
 * processes (default 2, agent i on gateway i % n); envelopes `to` 50 handles each (40 disjoint
 * groups of 50 consecutive agents, round robin) posted through ROOST_BENCH_APIS api processes
 * (default 1) by ROOST_BENCH_CONCURRENCY closed-loop senders (default 16: enough to keep the
 * accept path saturated) for ROOST_BENCH_SECONDS (default 20) after a 3 s warm-up. Frames per
 * second = `envelope.notify` frames the clients received during the window / window; latency is
 * POST start → each frame. Agents are created through the admin API, 16 requests in flight.
 */
export async function fanoutScenario(mode: 'split' | 'all' = 'split'): Promise<Record<string, unknown>> {
  const seconds = Number(process.env.ROOST_BENCH_SECONDS ?? 20);
  const gateways = mode === 'all' ? 1 : Number(process.env.ROOST_BENCH_GATEWAYS ?? 2);
  const apis = mode === 'all' ? 1 : Number(process.env.ROOST_BENCH_APIS ?? 1);
  const concurrency = Number(process.env.ROOST_BENCH_CONCURRENCY ?? 16);
  const load_before = round(loadavg()[0]);
  const cluster = await BenchCluster.start(mode === 'all' ? { single: 'postgres' } : { api: apis, gateway: gateways });
  const listener = benchListener();
  const sockets: ListenerSocket[] = [];
  let benchClosing = false;
  try {
    const handles = Array.from({ length: AGENTS }, (_, i) => `@bench.f${String(i).padStart(4, '0')}`);
    const senderHandles = Array.from({ length: SENDERS }, (_, i) => `@bench.fs${String(i).padStart(2, '0')}`);
    const setupStart = performance.now();
    const tokens = await cluster.createAgents([...handles, ...senderHandles]);
    const agentSetupS = (performance.now() - setupStart) / 1000;
    const senderTokens = tokens.slice(AGENTS);

    const sent = new Map<string, Sent>();
    let latencies: number[] = [];
    let framesInWindow = 0;
    let measuring = false;
    let unexpected = 0;
    // Per socket: notify frames of posted envelopes, and the close code if the server closed it, so
    // a shortfall can be told apart: frames a socket still open never got, or a closed socket's.
    const received = new Uint32Array(AGENTS);
    const closedWith = new Map<number, number>();
    // Per socket: the last frame's `created_at`. A mailbox's frames go out in `seq` order, which is
    // `created_at` order (the gateway-only phase stamps them in `seq` order too): a frame older than
    // the one before it on the same socket arrived out of order.
    const lastCreatedAt = new Float64Array(AGENTS);
    let outOfOrder = 0;
    const onFrame = (socket: number, data: Buffer) => {
      const now = performance.now();
      const id = notifyId(data);
      if (id === undefined) return;
      const createdAt = frameCreatedAt(data);
      if (createdAt < lastCreatedAt[socket]) outOfOrder++;
      else lastCreatedAt[socket] = createdAt;
      const entry = sent.get(id);
      if (!entry) {
        unexpected++;
        return;
      }
      if (!entry.direct) received[socket]++;
      entry.frames++;
      entry.lastFrameAt = now;
      if (entry.direct) {
        entry.direct.push(now - entry.t0);
        entry.onFrame?.();
        return;
      }
      if (measuring) framesInWindow++;
      if (entry.measured) latencies.push(now - entry.t0);
    };
    const socketStart = performance.now();
    sockets.push(
      ...(await openSockets(AGENTS, 50, async (i) => {
        const ws = await openListener(listener, connectUrl(cluster.gateways[i % gateways]), tokens[i], (data) =>
          onFrame(i, data),
        );
        ws.on('close', (code: number) => {
          if (!benchClosing) closedWith.set(i, code);
        });
        return ws;
      })),
    );
    const socketSetupS = (performance.now() - socketStart) / 1000;
    await sleep(1_000);

    let envelopes = 0;
    let failed = 0;
    let postLatencies: number[] = [];
    let n = 0;
    const sender = (measured: boolean, until: number) => async (worker: number) => {
      while (performance.now() < until) {
        const i = n++;
        const group = i % GROUPS;
        const id = ulid();
        const body = JSON.stringify({
          id,
          to: handles.slice(group * PER_ENVELOPE, (group + 1) * PER_ENVELOPE),
          date_ms: Date.now(),
          subject: `fanout ${i}`,
          content_parts: [{ type: 'text', text: `fanout bench envelope ${i}` }],
        });
        const api = cluster.apis[worker % apis];
        const t0 = performance.now();
        const entry: Sent = { t0, frames: 0, measured, group, acceptedAt: NaN, lastFrameAt: NaN };
        sent.set(id, entry);
        const reply = await request(api.url, 'POST', '/messages', senderTokens[worker % SENDERS], body).catch(() => ({
          status: 0,
          text: '',
        }));
        if (reply.status === 202) {
          entry.acceptedAt = performance.now();
          if (measured) {
            envelopes++;
            postLatencies.push(performance.now() - t0);
          }
        } else {
          sent.delete(id);
          if (measured) failed++;
        }
      }
    };
    const run = (measured: boolean, ms: number) => {
      const until = performance.now() + ms;
      return Promise.all(Array.from({ length: concurrency }, (_, worker) => sender(measured, until)(worker)));
    };

    await run(false, WARMUP_S * 1000);
    latencies = [];
    postLatencies = [];

    const pids: Record<string, number> = {};
    if (mode === 'all') pids.all = cluster.apis[0].pid;
    else {
      cluster.apis.forEach((node, i) => (pids[`api${i}`] = node.pid));
      cluster.gateways.forEach((node, i) => (pids[`gateway${i}`] = node.pid));
    }
    const apiMetrics = () =>
      Promise.all(cluster.apis.map((api) => request(api.url, 'GET', '/metrics', undefined).then((r) => r.text)));
    const gatewayMetrics = () =>
      Promise.all(cluster.gateways.map((gw) => request(gw.url, 'GET', '/metrics', undefined).then((r) => r.text)));
    const metricsBefore = await apiMetrics();
    const gatewaysBefore = await gatewayMetrics();
    const benchCpuBefore = process.cpuUsage();
    const cpu = cpuWindow(pids);

    cpu.begin();
    measuring = true;
    const windowStart = performance.now();
    await run(true, seconds * 1000);
    const windowS = (performance.now() - windowStart) / 1000;
    measuring = false;
    const cpuPct = cpu.end();
    const benchCpu = process.cpuUsage(benchCpuBefore);
    // The window's accept path on every api: database statements and lock fallbacks per envelope.
    const metricsAfter = await apiMetrics();
    const gatewaysAfter = await gatewayMetrics();
    const gatewayDelta = (name: string) =>
      gatewaysAfter.reduce((sum, text, i) => sum + counter(text, name) - counter(gatewaysBefore[i], name), 0);
    const delta = (name: string) =>
      metricsAfter.reduce((sum, text, i) => sum + counter(text, name) - counter(metricsBefore[i], name), 0);
    const batched = delta('roost_accept_batch_envelopes_sum');
    const perEnvelope = (name: string) => (batched > 0 ? round(delta(name) / batched, 3) : null);
    const acceptPath = {
      api_statements_per_envelope: perEnvelope('roost_db_query_duration_seconds_count'),
      api_batches_per_envelope: perEnvelope('roost_accept_batch_envelopes_count'),
      lock_fallbacks_per_envelope: perEnvelope('roost_accept_lock_fallbacks_total'),
      // The window's gateway backfills from Postgres (a frame past lastSeq + 1, the periodic sweep).
      gateway_backfills: {
        gap: gatewayDelta('roost_ws_backfills_total{cause="gap"}'),
        sweep: gatewayDelta('roost_ws_backfills_total{cause="sweep"}'),
      },
    };

    // Everything sent must arrive (and nothing twice).
    const expected = () => {
      let missing = 0;
      let duplicated = 0;
      for (const entry of sent.values()) {
        if (entry.frames < PER_ENVELOPE) missing += PER_ENVELOPE - entry.frames;
        if (entry.frames > PER_ENVELOPE) duplicated += entry.frames - PER_ENVELOPE;
      }
      return { missing, duplicated };
    };
    const drainStart = performance.now();
    const deadline = Date.now() + 30_000;
    while (expected().missing > 0 && Date.now() < deadline) await sleep(50);
    const drainS = (performance.now() - drainStart) / 1000;
    const { missing, duplicated } = expected();
    const perGroup = new Uint32Array(GROUPS);
    for (const entry of sent.values()) if (entry.group !== undefined) perGroup[entry.group]++;
    const shortfall = { open_sockets: 0, open_frames: 0, closed_sockets: 0, closed_frames: 0 };
    for (let i = 0; i < AGENTS; i++) {
      const short = perGroup[Math.floor(i / PER_ENVELOPE)] - received[i];
      if (short <= 0) continue;
      if (closedWith.has(i)) {
        shortfall.closed_sockets++;
        shortfall.closed_frames += short;
      } else {
        shortfall.open_sockets++;
        shortfall.open_frames += short;
      }
    }
    const closeCodes: Record<string, number> = {};
    for (const code of closedWith.values()) closeCodes[code] = (closeCodes[code] ?? 0) + 1;

    const gatewayOnlySeconds = Number(process.env.ROOST_BENCH_GATEWAY_ONLY_SECONDS ?? Math.min(10, seconds));
    const direct = await gatewayOnly(cluster, handles, sent, gatewayOnlySeconds, concurrency, pids);
    const directCheck = expected();

    const completion: number[] = [];
    for (const entry of sent.values()) {
      if (entry.measured && entry.frames === PER_ENVELOPE) completion.push(entry.lastFrameAt - entry.acceptedAt);
    }
    const fanoutDone = stats(completion);
    const frames = stats(latencies);
    const post = stats(postLatencies);
    const framesPerS = round(framesInWindow / windowS, 0);
    return {
      scenario: mode === 'all' ? 'fanout-all' : 'fanout',
      processes:
        mode === 'all' ? 'one ROOST_ROLE=all process on Postgres + Redis' : `${apis} api + ${gateways} gateway`,
      client: 'node-http (keep-alive http.Agent)',
      // The 2,000 listening sockets' client: `ws`, or the light raw RFC 6455 one (ROOST_BENCH_LISTENER).
      listener: listener === 'raw' ? 'raw (bench/raw-socket.ts over net.Socket)' : 'ws',
      bench_cpu_s_in_window: round((benchCpu.user + benchCpu.system) / 1e6, 1),
      agents: AGENTS,
      sockets: AGENTS,
      gateways,
      apis,
      recipients_per_envelope: PER_ENVELOPE,
      senders_in_flight: concurrency,
      seconds,
      agent_setup: `admin API, 16 in flight: ${round(agentSetupS, 1)} s for ${AGENTS + SENDERS}`,
      socket_setup_s: round(socketSetupS, 1),
      envelopes_per_s: round(envelopes / windowS, 1),
      failed,
      ...acceptPath,
      frames_per_s: framesPerS,
      frame_p50_ms: frames.p50_ms,
      frame_p99_ms: frames.p99_ms,
      frame_max_ms: frames.max_ms,
      post_202_p50_ms: post.p50_ms,
      post_202_p99_ms: post.p99_ms,
      last_frame_minus_202_p50_ms: fanoutDone.p50_ms,
      last_frame_minus_202_p99_ms: fanoutDone.p99_ms,
      missing,
      duplicated,
      unexpected,
      // Frames (both phases) older than the frame before them on the same socket.
      out_of_order: outOfOrder,
      missing_by_socket: shortfall,
      sockets_closed_by_server: closeCodes,
      // Why the gateways closed sockets, if they did: their last warnings.
      ...(Object.keys(closeCodes).length > 0
        ? { gateway_warnings: cluster.gateways.flatMap((gw) => gw.output.filter((l) => /warn|WARN/.test(l)).slice(-3)) }
        : {}),
      drain_after_window_s: round(drainS, 2),
      cpu_pct_of_one_core: cpuPct,
      cpu_us_per_frame: usPerFrame(cpuPct, framesInWindow / windowS),
      gateway_only: {
        frames_per_s: direct.framesPerS,
        p50_ms: direct.p50_ms,
        p99_ms: direct.p99_ms,
        envelopes_in_flight: concurrency,
        missing: directCheck.missing - missing,
        duplicated: directCheck.duplicated - duplicated,
        cpu_pct_of_one_core: direct.cpuPct,
        seconds: gatewayOnlySeconds,
        cpu_us_per_frame: { ...usPerFrame(direct.cpuPct, direct.framesPerS), ...direct.cpuUsPerFrame },
      },
      target_frames_per_s: mode === 'all' ? 10_000 : 20_000,
      met: framesPerS >= (mode === 'all' ? 10_000 : 20_000) && missing === 0 && duplicated === 0,
      load_1m_before: load_before,
      load_1m_after: round(loadavg()[0]),
    };
  } finally {
    benchClosing = true;
    for (const ws of sockets) ws?.terminate();
    await cluster.close();
  }
}
