import { randomBytes } from 'node:crypto';
import { availableParallelism, loadavg } from 'node:os';
import { join } from 'node:path';
import { acceptEnvelope, SENDERS, TEXT_BODY, TEXT_KIND } from './accept';
import { machineBusyShare, machineCpu, processCounters, serverCpu, serverCpuBetween } from './cluster';
import { pgbenchCeiling } from './pgbench';
import {
  gcCounters,
  gcFields,
  HttpConnection,
  loadLoop,
  round,
  scratchDatabase,
  startOperatorProcess,
  summary,
} from './support';

/** Seconds of load before each counted run (a fresh process's JIT and the connections warm up). */
const WARMUP_SECONDS = 3;

/**
 * One floor run: 32 light keep-alive senders post the accept bench's envelope to a floor server for
 * the warm-up and then `seconds` counted. CPU per request over the counted seconds: the server
 * (whole process and its main thread), this bench (the senders), and with a database its backends.
 */
async function floorRun(databaseUrl: string | undefined, seconds: number) {
  // Started like an operator, with its flags (a CPU profile with ROOST_BENCH_CPU_PROF, the GC probe).
  const server = await startOperatorProcess(
    { FLOOR_DATABASE_URL: databaseUrl ?? '' },
    join(__dirname, 'floor-server.js'),
    [],
    `floor-${databaseUrl ? 'pg' : 'http'}`,
  );
  const pid = server.child.pid ?? 0;
  const connections = Array.from({ length: SENDERS }, () => new HttpConnection(server.url));
  try {
    const body = () => acceptEnvelope('@bench.inbox', `bench ${randomBytes(3).toString('hex')}`);
    const send = async (w: number) =>
      (await connections[w].request('POST', '/messages', 'floor', body())).status === 202;
    await loadLoop(SENDERS, WARMUP_SECONDS * 1000, send);
    const gcBefore = await gcCounters(pid);
    const serverBefore = processCounters(pid);
    const backendsBefore = databaseUrl ? await serverCpu(databaseUrl) : undefined;
    const machineBefore = machineCpu();
    const benchBefore = process.cpuUsage();
    const result = await loadLoop(SENDERS, seconds * 1000, send);
    const bench = process.cpuUsage(benchBefore);
    const machineAfter = machineCpu();
    const serverAfter = processCounters(pid);
    const gcAfter = await gcCounters(pid);
    const backends =
      databaseUrl && backendsBefore ? serverCpuBetween(backendsBefore, await serverCpu(databaseUrl)) : undefined;
    const figures = summary(result);
    const perRequest = (s: number) => (figures.ok > 0 ? round((s * 1000) / figures.ok, 3) : null);
    const serverS = serverAfter.userS + serverAfter.systemS - serverBefore.userS - serverBefore.systemS;
    const benchS = (bench.user + bench.system) / 1e6;
    const sum = (serverS + benchS + (backends?.postgres ?? 0)) * 1000;
    const cpuMsPerRequest = figures.ok > 0 ? sum / figures.ok : 0;
    return {
      per_s: figures.per_s,
      p50_ms: figures.p50_ms,
      p99_ms: figures.p99_ms,
      failed: figures.failed,
      server_cpu_ms_per_request: perRequest(serverS),
      server_main_thread_cpu_ms_per_request: perRequest(serverAfter.mainThreadS - serverBefore.mainThreadS),
      bench_cpu_ms_per_request: perRequest(benchS),
      ...Object.fromEntries(
        Object.entries(gcFields([gcBefore], [gcAfter], figures.ok)).map(([key, value]) => [
          key.replace('operator_', 'server_').replace('_envelope', '_request'),
          value,
        ]),
      ),
      ...(backends ? { postgres_backends_cpu_ms_per_request: perRequest(backends.postgres) } : {}),
      machine_cpu_busy: round(machineBusyShare(machineBefore, machineAfter), 2),
      cpu_ms_per_request_measured: round(cpuMsPerRequest, 3),
      cpu_bound_requests_per_s:
        cpuMsPerRequest > 0 ? Math.round((availableParallelism() * 1000) / cpuMsPerRequest) : null,
    };
  } finally {
    connections.forEach((connection) => connection.close());
    await server.stop();
  }
}

/**
 * `accept-floor`: what the accept ratio's target leaves to Roost on this machine. The same 32 light
 * senders and ~1 KB envelopes as `accept`, against a bare `node:http` server (`floor-server.ts`):
 * first answering at once (`http_only`: the cost of HTTP and JSON alone), then writing one envelope
 * row and one mailbox row per request before answering, batched per event-loop turn (`http_pg`:
 * about the least any Node HTTP service can spend to accept durably). pgbench's transaction (the
 * ceiling the accept ratio divides by) runs before and after, on the same Postgres, so
 * `http_pg.ratio_to_pgbench` is the ratio such a server reaches in the same minutes, and
 * `cpu_bound_ratio_to_pgbench` the one its CPU per request would allow with every core busy.
 */
export async function acceptFloorScenario(): Promise<Record<string, unknown>> {
  const seconds = Number(process.env.ROOST_BENCH_SECONDS ?? 20);
  const loadBefore = round(loadavg()[0]);
  const database = await scratchDatabase('roost_bench');
  try {
    const before = await pgbenchCeiling(database.url, SENDERS, seconds, TEXT_BODY);
    const httpOnly = await floorRun(undefined, seconds);
    const httpPg = await floorRun(database.url, seconds);
    const after = await pgbenchCeiling(database.url, SENDERS, seconds, TEXT_BODY);
    const tps = (before.tps + after.tps) / 2;
    return {
      scenario: 'accept-floor',
      load_1m_before: loadBefore,
      server: 'bare node:http, keep-alive; JSON.parse each body; 202 with a small JSON',
      client: 'light',
      senders: SENDERS,
      seconds,
      text: TEXT_KIND,
      http_only: httpOnly,
      http_pg: {
        ...httpPg,
        ratio_to_pgbench: round(httpPg.per_s / tps, 3),
        cpu_bound_ratio_to_pgbench:
          httpPg.cpu_bound_requests_per_s === null ? null : round(httpPg.cpu_bound_requests_per_s / tps, 3),
      },
      pgbench_tps: round(tps, 1),
      pgbench_tps_before: before.tps,
      pgbench_tps_after: after.tps,
      pgbench_cpu_ms_per_transaction: round(((before.cpu_s + after.cpu_s) * 1000) / (tps * 2 * seconds), 3),
      load_1m_after: round(loadavg()[0]),
    };
  } finally {
    await database.drop();
  }
}
