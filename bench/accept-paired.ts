import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { ulid } from '#domain';
import { acceptEnvelope, SENDERS, TEXT_KIND } from './accept';
import { processCounters } from './cluster';
import {
  createAgent,
  embeddedStore,
  HttpConnection,
  nodeArgsFromEnv,
  round,
  scratchDatabase,
  startOperatorProcess,
  type OperatorProcess,
} from './support';

const WARMUP_MS = 3_000;

interface Side {
  op: OperatorProcess;
  drop: () => Promise<void>;
  tokens: string[];
  connections: HttpConnection[];
}

/** `postgres`: `ROOST_ROLE=all` on its own scratch database and Redis prefix. `embedded`: no DATABASE_URL, PGlite in its own temporary folder. */
type PairedMode = 'postgres' | 'embedded';

async function side(main: string | undefined, mode: PairedMode, nodeArgs: readonly string[]): Promise<Side> {
  let env: Record<string, string>;
  let drop: () => Promise<void>;
  if (mode === 'embedded') {
    const store = embeddedStore();
    env = store.env;
    drop = () => Promise.resolve(store.drop());
  } else {
    const database = await scratchDatabase('roost_paired');
    env = { DATABASE_URL: database.url, ROOST_REDIS_PREFIX: `paired${ulid().slice(-8).toLowerCase()}:` };
    drop = database.drop;
  }
  const op = await startOperatorProcess(env, main, nodeArgs);
  await createAgent(op, '@bench.inbox');
  const tokens = await Promise.all(Array.from({ length: SENDERS }, (_, i) => createAgent(op, `@bench.sender${i}`)));
  return { op, drop, tokens, connections: tokens.map(() => new HttpConnection(op.url)) };
}

/** 32 light senders post the `accept` envelope to one recipient for `ms`; resolves with the 202s. */
async function load(s: Side, ms: number): Promise<number> {
  let accepted = 0;
  const end = performance.now() + ms;
  await Promise.all(
    s.connections.map(async (connection, w) => {
      while (performance.now() < end) {
        const body = acceptEnvelope('@bench.inbox', 'bench');
        if ((await connection.request('POST', '/messages', s.tokens[w], body)).status === 202) accepted++;
      }
    }),
  );
  return accepted;
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];

/**
 * `accept-paired`: this build against a baseline build under the same `accept` load **at the same
 * time**, so a machine whose speed drifts from one minute to the next (docs/benchmarks.md,
 * 2026-12-04 evening) slows both alike. Each round starts one `ROOST_ROLE=all` operator of each
 * build (own scratch database and Redis prefix, new agents), loads both with 32 light keep-alive
 * senders to one recipient (3 s warm-up, then ROOST_BENCH_SECONDS, default 15, counted), and
 * reads each one's envelopes/s and its main thread's CPU per envelope; the start order swaps each
 * round. ROOST_BENCH_BASELINE: the root of another checkout, built (`npm ci && npm run build`);
 * ROOST_BENCH_ROUNDS (default 3); ROOST_BENCH_PAIRED_MODE=embedded: both on the embedded default
 * (PGlite in the operator's process, each in its own temporary folder) instead of Postgres;
 * ROOST_BENCH_THIS_NODE_ARGS: Node/V8 flags for this build's operator only, so the baseline may be
 * this same checkout (the A/B of a flag). Besides the main thread's CPU per envelope it reports the
 * whole process's (GC helper threads, libuv's pool).
 */
export async function acceptPairedScenario(): Promise<Record<string, unknown>> {
  const baseline = process.env.ROOST_BENCH_BASELINE;
  if (!baseline) throw new Error('ROOST_BENCH_BASELINE is required: the root of another checkout, built');
  const baselineRoot = resolve(baseline);
  const baselineMain = join(baselineRoot, 'dist', 'apps', 'roost', 'src', 'main.js');
  if (!existsSync(baselineMain)) throw new Error(`no built baseline at ${baselineMain}: run npm run build there`);
  const seconds = Number(process.env.ROOST_BENCH_SECONDS ?? 15);
  const rounds = Number(process.env.ROOST_BENCH_ROUNDS ?? 3);
  const mode: PairedMode = process.env.ROOST_BENCH_PAIRED_MODE === 'embedded' ? 'embedded' : 'postgres';
  const thisNodeArgs = nodeArgsFromEnv('ROOST_BENCH_THIS_NODE_ARGS');
  const perRound: Array<Record<string, number>> = [];
  for (let r = 0; r < rounds; r++) {
    const order = r % 2 === 0 ? (['baseline', 'this'] as const) : (['this', 'baseline'] as const);
    const sides: Partial<Record<'baseline' | 'this', Side>> = {};
    try {
      for (const name of order) {
        sides[name] = await side(
          name === 'baseline' ? baselineMain : undefined,
          mode,
          name === 'this' ? thisNodeArgs : [],
        );
      }
      const both = [sides.baseline!, sides.this!];
      await Promise.all(both.map((s) => load(s, WARMUP_MS)));
      const before = both.map((s) => processCounters(s.op.child.pid ?? 0));
      const accepted = await Promise.all(both.map((s) => load(s, seconds * 1000)));
      const after = both.map((s) => processCounters(s.op.child.pid ?? 0));
      const cpuMs = both.map((_, i) => ((after[i].mainThreadS - before[i].mainThreadS) * 1000) / accepted[i]);
      const processMs = both.map(
        (_, i) => ((after[i].userS + after[i].systemS - before[i].userS - before[i].systemS) * 1000) / accepted[i],
      );
      perRound.push({
        baseline_per_s: round(accepted[0] / seconds, 0),
        this_per_s: round(accepted[1] / seconds, 0),
        baseline_main_thread_cpu_ms_per_envelope: round(cpuMs[0], 4),
        this_main_thread_cpu_ms_per_envelope: round(cpuMs[1], 4),
        baseline_process_cpu_ms_per_envelope: round(processMs[0], 4),
        this_process_cpu_ms_per_envelope: round(processMs[1], 4),
        rate_ratio: round(accepted[1] / accepted[0], 3),
        cpu_ratio: round(cpuMs[1] / cpuMs[0], 3),
        process_cpu_ratio: round(processMs[1] / processMs[0], 3),
      });
    } finally {
      for (const s of Object.values(sides)) {
        s.connections.forEach((connection) => connection.close());
        await s.op.stop();
        await s.drop();
      }
    }
  }
  return {
    scenario: 'accept-paired',
    baseline: baselineRoot,
    this_node_args: thisNodeArgs.join(' '),
    mode,
    senders_each: SENDERS,
    text: TEXT_KIND,
    seconds,
    rounds: perRound,
    median_rate_ratio: median(perRound.map((r) => r.rate_ratio)),
    median_cpu_ratio: median(perRound.map((r) => r.cpu_ratio)),
    median_process_cpu_ratio: median(perRound.map((r) => r.process_cpu_ratio)),
  };
}
