import { loadavg } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import type WebSocket from 'ws';
import {
  BenchCluster,
  connectUrl,
  cpuSeconds,
  openFileLimit,
  openSocket,
  openSockets,
  rssBytes,
  tcpExt,
  type RoostNode,
} from './cluster';
import { round } from './support';

const SOCKETS = 10_000;
const OPEN_CONCURRENCY = 200;
/** Reconnect backoff of the bench clients: equal jitter, 200 ms doubling to a 1 s cap. */
const BACKOFF_BASE_MS = 200;
const BACKOFF_CAP_MS = 1_000;

/** Why reconnect attempts failed, by error message. */
const refusals = new Map<string, number>();

/** A value of the gateway's Prometheus text (first sample of `name`). */
function metric(text: string, name: string): number {
  const line = text.split('\n').find((l) => l.startsWith(`${name} `) || l.startsWith(`${name}{`));
  return line ? Number(line.slice(line.lastIndexOf(' ') + 1)) : NaN;
}

/**
 * An idle listener that reconnects whenever its socket closes, like an SDK: after a close (1012 on
 * a gateway restart) or a failed attempt it waits `min(cap, base·2^attempt)·U(0.5, 1)` and tries
 * the same gateway again.
 */
class IdleClient {
  ws: WebSocket | undefined;
  open = false;
  attempts = 0;
  /** Reconnect attempts that failed (gateway down or draining). */
  refused = 0;
  closeCodes: number[] = [];
  private stopped = false;

  constructor(
    private readonly url: string,
    private readonly token: string,
    private readonly onOpen: () => void,
    private readonly onDown: () => void,
  ) {}

  async connect(): Promise<void> {
    this.attach(await openSocket(this.url, this.token));
  }

  stop(): void {
    this.stopped = true;
    this.ws?.terminate();
  }

  private attach(ws: WebSocket): void {
    this.ws = ws;
    this.open = true;
    this.attempts = 0;
    this.onOpen();
    ws.once('close', (code: number) => {
      this.open = false;
      this.closeCodes.push(code);
      this.onDown();
      this.retry();
    });
  }

  private retry(): void {
    if (this.stopped) return;
    const delay = Math.min(BACKOFF_CAP_MS, BACKOFF_BASE_MS * 2 ** this.attempts) * (0.5 + Math.random() / 2);
    this.attempts++;
    setTimeout(() => {
      if (this.stopped) return;
      openSocket(this.url, this.token).then(
        (ws) => (this.stopped ? ws.terminate() : this.attach(ws)),
        (error: Error) => {
          this.refused++;
          const reason = error.message.replace(/\d+\.\d+\.\d+\.\d+:\d+/, '');
          refusals.set(reason, (refusals.get(reason) ?? 0) + 1);
          this.retry();
        },
      );
    }, delay);
  }
}

/**
 * `connections`: 10,000 idle authenticated sockets (10,000 agents, one socket each, created through
 * the admin API) on one gateway process. RSS per connection = (gateway VmRSS with the sockets open −
 * VmRSS before) / 10,000, both read from /proc after the gateway settled. Then SIGTERM the gateway:
 * clients get 1012 and reconnect (backoff above) to the gateway restarted on the same port; the
 * reconnect time runs from the restarted gateway answering /healthz to all 10,000 sockets open.
 */
export async function connectionsScenario(): Promise<Record<string, unknown>> {
  const limit = openFileLimit();
  if (limit < SOCKETS + 1_000) {
    throw new Error(
      `the bench needs ${SOCKETS + 1_000} file descriptors (ulimit -n is ${limit}): raise it, e.g. ulimit -n 20000`,
    );
  }
  const load_before = round(loadavg()[0]);
  // Pings would be answered by the clients anyway; the sweep runs at its default interval.
  const cluster = await BenchCluster.start({ api: 1, gateway: 1 });
  const clients: IdleClient[] = [];
  try {
    const gateway: RoostNode = cluster.gateways[0];
    const gatewayFdLimit = openFileLimit(gateway.pid);
    if (gatewayFdLimit < SOCKETS + 1_000) throw new Error(`gateway file descriptor limit ${gatewayFdLimit} is too low`);
    const setupStart = performance.now();
    const handles = Array.from({ length: SOCKETS }, (_, i) => `@bench.c${String(i).padStart(5, '0')}`);
    const tokens = await cluster.createAgents(handles, 32);
    const agentSetupS = (performance.now() - setupStart) / 1000;

    // Warm-up: the upgrade and start paths run (JIT, pool connections) before the baseline.
    const warm = await openSockets(200, 50, (i) => openSocket(connectUrl(gateway), tokens[i]));
    await sleep(1_000);
    for (const ws of warm) ws.close();
    await sleep(3_000);
    const rssBefore = rssBytes(gateway.pid);
    const metricsBefore = await gateway.metrics();

    let openCount = 0;
    let allOpen: (() => void) | undefined;
    const onOpen = () => {
      openCount++;
      if (openCount === SOCKETS) allOpen?.();
    };
    const onDown = () => openCount--;
    const url = connectUrl(gateway);
    for (let i = 0; i < SOCKETS; i++) clients.push(new IdleClient(url, tokens[i], onOpen, onDown));
    const cpuBefore = cpuSeconds(gateway.pid);
    const openStart = performance.now();
    let next = 0;
    await Promise.all(
      Array.from({ length: OPEN_CONCURRENCY }, async () => {
        while (next < SOCKETS) await clients[next++].connect();
      }),
    );
    const openS = (performance.now() - openStart) / 1000;
    // Let the gateway finish starting the sockets (token check, starting seq) and settle.
    await sleep(5_000);
    const openCpuS = cpuSeconds(gateway.pid) - cpuBefore;
    const rssAfter = rssBytes(gateway.pid);
    const metricsAfter = await gateway.metrics();
    const gaugeOpen = metric(metricsAfter, 'roost_ws_connections');
    const heapBefore = metric(metricsBefore, 'nodejs_heap_size_used_bytes');
    const heapAfter = metric(metricsAfter, 'nodejs_heap_size_used_bytes');

    // Restart: SIGTERM (1012 to every socket), start again on the same port, wait for every reconnect.
    const everyOpen = new Promise<void>((resolve) => (allOpen = resolve));
    const restartStart = performance.now();
    await gateway.stop();
    const exitedS = (performance.now() - restartStart) / 1000;
    await gateway.start();
    const readyAt = performance.now();
    const readyCpu = cpuSeconds(gateway.pid);
    const overflowsBefore = tcpExt('ListenOverflows');
    const timeline: number[] = [];
    const sampler = setInterval(() => timeline.push(openCount), 1_000);
    await Promise.race([everyOpen, sleep(120_000)]);
    clearInterval(sampler);
    const doneAt = performance.now();
    const reconnectCpuS = cpuSeconds(gateway.pid) - readyCpu;
    const listenOverflows = tcpExt('ListenOverflows') - overflowsBefore;
    const reconnected = openCount;
    const closes1012 = clients.filter((client) => client.closeCodes[0] === 1012).length;
    const failedAttempts = clients.reduce((sum, client) => sum + client.refused, 0);
    await sleep(2_000);
    const rssAfterReconnect = rssBytes(gateway.pid);

    const perConnection = (rssAfter - rssBefore) / SOCKETS;
    const reconnectS = (doneAt - readyAt) / 1000;
    return {
      scenario: 'connections',
      sockets: SOCKETS,
      agents: SOCKETS,
      agent_setup: `admin API, 32 in flight: ${round(agentSetupS, 1)} s for ${SOCKETS} agents`,
      gateway_open_sockets_gauge: gaugeOpen,
      open_all_s: round(openS, 2),
      open_gateway_cpu_s: round(openCpuS, 2),
      rss_before_mb: round(rssBefore / 2 ** 20, 1),
      rss_after_mb: round(rssAfter / 2 ** 20, 1),
      rss_per_connection_kb: round(perConnection / 1024, 2),
      heap_used_per_connection_kb: round((heapAfter - heapBefore) / SOCKETS / 1024, 2),
      target_rss_per_connection_kb: 16,
      sigterm_to_exit_s: round(exitedS, 2),
      sigterm_to_ready_s: round((readyAt - restartStart) / 1000, 2),
      closed_1012: closes1012,
      refused_reconnect_attempts: failedAttempts,
      reconnected,
      reconnect_all_after_ready_s: round(reconnectS, 2),
      open_each_second_after_ready: timeline,
      reconnect_gateway_cpu_s: round(reconnectCpuS, 2),
      listen_overflows_during_reconnect: listenOverflows,
      refused_by_reason: Object.fromEntries(refusals),
      sigterm_to_all_open_s: round((doneAt - restartStart) / 1000, 2),
      rss_after_reconnect_mb: round(rssAfterReconnect / 2 ** 20, 1),
      client_backoff: `equal jitter, ${BACKOFF_BASE_MS} ms doubling to ${BACKOFF_CAP_MS} ms`,
      met: perConnection <= 16 * 1024 && reconnected === SOCKETS,
      load_1m_before: load_before,
      load_1m_after: round(loadavg()[0]),
    };
  } finally {
    for (const client of clients) client.stop();
    await cluster.close();
  }
}

const IDLE_SOCKETS = 2_000;

/**
 * `idle-sockets-all`: the process most people run (one `ROOST_ROLE=all` on Postgres + Redis) with
 * 2,000 idle authenticated sockets (one agent each): its RSS with them open, and the RSS delta per
 * socket ((VmRSS after − VmRSS before) / 2,000, read from /proc after the process settled).
 */
export async function idleSocketsScenario(): Promise<Record<string, unknown>> {
  const load_before = round(loadavg()[0]);
  const cluster = await BenchCluster.start({ single: 'postgres' });
  const sockets: WebSocket[] = [];
  try {
    const node = cluster.gateways[0];
    const handles = Array.from({ length: IDLE_SOCKETS }, (_, i) => `@bench.i${String(i).padStart(4, '0')}`);
    const tokens = await cluster.createAgents(handles, 32);
    // Warm-up: the upgrade and start paths run (JIT, pool connections) before the baseline.
    const warm = await openSockets(200, 50, (i) => openSocket(connectUrl(node), tokens[i]));
    await sleep(1_000);
    for (const ws of warm) ws.close();
    await sleep(3_000);
    const rssBefore = rssBytes(node.pid);
    sockets.push(...(await openSockets(IDLE_SOCKETS, 100, (i) => openSocket(connectUrl(node), tokens[i]))));
    await sleep(5_000);
    const rssAfter = rssBytes(node.pid);
    const gaugeOpen = metric(await node.metrics(), 'roost_ws_connections');
    const perSocket = (rssAfter - rssBefore) / IDLE_SOCKETS;
    return {
      scenario: 'idle-sockets-all',
      process: 'one ROOST_ROLE=all process on Postgres + Redis',
      sockets: IDLE_SOCKETS,
      open_sockets_gauge: gaugeOpen,
      rss_before_mb: round(rssBefore / 2 ** 20, 1),
      rss_with_sockets_mb: round(rssAfter / 2 ** 20, 1),
      rss_per_socket_kb: round(perSocket / 1024, 2),
      target_rss_per_socket_kb: 16,
      met: perSocket <= 16 * 1024 && gaugeOpen === IDLE_SOCKETS,
      load_1m_before: load_before,
      load_1m_after: round(loadavg()[0]),
    };
  } finally {
    for (const ws of sockets) ws.terminate();
    await cluster.close();
  }
}
