import { monitorEventLoopDelay } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import Redis from 'ioredis';
import pg from 'pg';

/**
 * The floors of the push scenario: what Redis and Postgres alone take for the round trips an
 * envelope needs, measured in the same seconds as the push run. They run in a worker thread with
 * its own event loop: on the bench's main loop (HTTP senders, 50 listeners) a floor sample that
 * lands behind a burst of frames would measure the bench's own delay, not the servers'. The
 * worker reports its loop's delay too, so a disturbed floor shows as such.
 */

export interface FloorsOptions {
  redisUrl?: string;
  /** Redis key prefix of the run (the floor's stream lives under it and is deleted with it). */
  prefix: string;
  databaseUrl?: string;
  ratePerS: number;
  count: number;
}

export interface FloorsResult {
  redis: number[];
  pg: { latencies: number[]; synchronousCommit: string } | undefined;
  loopDelayP99Ms: number;
  loopDelayMaxMs: number;
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

/** Runs the floors asked for in a worker thread; resolves with their samples once they are done (none asked: no worker). */
export function runFloors(options: FloorsOptions): Promise<FloorsResult> {
  if (!options.redisUrl && !options.databaseUrl)
    return Promise.resolve({ redis: [], pg: undefined, loopDelayP99Ms: NaN, loopDelayMaxMs: NaN });
  return new Promise((resolve, reject) => {
    const worker = new Worker(__filename, { workerData: options });
    worker.once('message', (result: FloorsResult) => resolve(result));
    worker.once('error', reject);
    worker.once('exit', (code) => reject(new Error(`floors worker exited with ${code} before reporting`)));
  });
}

/**
 * The floor: a publisher connection XADDs a small entry and a reader connection blocked in XREAD
 * receives it, `count` samples at `ratePerS`.
 */
async function redisFloor(redisUrl: string, prefix: string, ratePerS: number, count: number): Promise<number[]> {
  const connect = () => {
    const redis = new Redis(redisUrl, { maxRetriesPerRequest: 1 });
    redis.on('error', () => undefined);
    return redis;
  };
  const publisher = connect();
  const reader = connect();
  const key = `${prefix}bench:floor`;
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
 * loop, on the same Postgres. Latency is the commit's round trip on a connection already checked
 * out (no pool wait), the part of an accept no batching can remove.
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

async function workerMain(options: FloorsOptions): Promise<FloorsResult> {
  const loop = monitorEventLoopDelay({ resolution: 5 });
  loop.enable();
  const { redisUrl, databaseUrl, prefix, ratePerS, count } = options;
  const [redis, pgCommits] = await Promise.all([
    redisUrl ? redisFloor(redisUrl, prefix, ratePerS, count) : Promise.resolve([]),
    databaseUrl ? pgFloor(databaseUrl, ratePerS, count) : Promise.resolve(undefined),
  ]);
  loop.disable();
  return {
    redis,
    pg: pgCommits,
    loopDelayP99Ms: loop.percentile(99) / 1e6,
    loopDelayMaxMs: loop.max / 1e6,
  };
}

if (!isMainThread && parentPort) {
  const port = parentPort;
  workerMain(workerData as FloorsOptions).then(
    (result) => port.postMessage(result),
    (error: unknown) => {
      throw error;
    },
  );
}
