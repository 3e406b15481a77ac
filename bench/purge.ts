import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import pg from 'pg';
import { ulid } from '#domain';
import { createAgent, loadLoop, request, round, scratchDatabase, startOperatorProcess, summary } from './support';

const SENDERS = 32;
const TEXT = 'x'.repeat(900) + ' the quick brown fox jumps over the lazy dog';
const DAY = 24 * 60 * 60 * 1000;
const CHUNK = 100_000;

/**
 * `rows` expired envelopes from `@bench.seeder` into `@bench.big`, each with its mailbox entry,
 * three days old or more, generated inside Postgres (sorted ids, one `seq` per entry, 90% read).
 */
async function seedExpired(pool: pg.Pool, rows: number): Promise<void> {
  const { rows: ids } = await pool.query<{ id: string; handle: string }>(
    "SELECT id::text, handle FROM agents WHERE handle IN ('@bench.seeder', '@bench.big')",
  );
  const seeder = ids.find((r) => r.handle === '@bench.seeder')!.id;
  const big = ids.find((r) => r.handle === '@bench.big')!.id;
  const base = Date.now() - 3 * DAY - rows;
  for (let from = 1; from <= rows; from += CHUNK) {
    const to = Math.min(rows, from + CHUNK - 1);
    await pool.query(
      `INSERT INTO envelopes (id, sender_id, created_at, received_ms, body, header, recipients, self_addressed, search)
       SELECT '01H' || lpad(n::text, 23, '0'), $1::bigint, $2::bigint + n, $2::bigint + n,
         json_build_object('id', '01H' || lpad(n::text, 23, '0'), 'from', '@bench.seeder', 'to', json_build_array('@bench.big'),
           'date_ms', $2::bigint + n, 'subject', 'seed ' || n,
           'content_parts', json_build_array(json_build_object('type', 'text', 'text', 'seeded envelope ' || n || ' ' || repeat('y', 160))))::text,
         json_build_object('op', 'envelope.notify', 'id', '01H' || lpad(n::text, 23, '0'), 'from', '@bench.seeder',
           'to', json_build_array('@bench.big'), 'subject', 'seed ' || n, 'type_hint', 'text', 'size_hint', 180,
           'created_at', $2::bigint + n, 'date_ms', $2::bigint + n)::text,
         ARRAY['@bench.big']::text[], false, ''::tsvector
       FROM generate_series($3::int, $4::int) AS n`,
      [seeder, base, from, to],
    );
    await pool.query(
      `INSERT INTO mailbox_entries (mailbox_id, seq, envelope_id, created_at, kind, read)
       SELECT $1::bigint, n, '01H' || lpad(n::text, 23, '0'), $2::bigint + n, 'to', n % 10 <> 0
       FROM generate_series($3::int, $4::int) AS n`,
      [big, base, from, to],
    );
  }
  await pool.query('UPDATE mailboxes SET last_seq = $2, last_created_at = $3 WHERE agent_id = $1', [
    big,
    rows,
    base + rows,
  ]);
  await pool.query('ANALYZE envelopes; ANALYZE mailbox_entries');
}

/** `loadLoop`, but until `running()` turns false instead of for a fixed time. */
async function loadWhile(concurrency: number, running: () => boolean, task: (worker: number) => Promise<boolean>) {
  const latencies: number[] = [];
  let failures = 0;
  const start = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async (_, worker) => {
      while (running()) {
        const t0 = performance.now();
        const ok = await task(worker).catch(() => false);
        if (ok) latencies.push(performance.now() - t0);
        else failures++;
      }
    }),
  );
  return { latencies: latencies.sort((a, b) => a - b), failures, elapsedMs: performance.now() - start };
}

/** The purge in its own process (bench/purge-runner.ts): the worker's RetentionProcessor. */
function runPurge(env: Record<string, string>): Promise<{ entries: number; envelopes: number; seconds: number }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [join(__dirname, 'purge-runner.js')], {
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
    child.on('error', reject);
    child.on('exit', (code) => {
      if (code !== 0) return reject(new Error(`purge runner exited with ${code}: ${out}`));
      resolve(JSON.parse(out.trim().split('\n').at(-1)!) as { entries: number; envelopes: number; seconds: number });
    });
  });
}

/**
 * `npm run bench -- purge`: accept latency while retention purges a large mailbox. Seeds
 * ROOST_BENCH_PURGE_ROWS (default 1,000,000) expired entries (and their envelopes) through SQL, gives
 * their mailbox and sender retention_days=1, measures accept p99 of 32 senders posting ~1 KB
 * envelopes to another mailbox for ROOST_BENCH_SECONDS without a purge, then again while a separate
 * process runs the worker's purge to the end. Target: during_p99 / idle_p99 <= 2.
 */
export async function purgeScenario(): Promise<Record<string, unknown>> {
  const seconds = Number(process.env.ROOST_BENCH_SECONDS ?? 20);
  const rows = Number(process.env.ROOST_BENCH_PURGE_ROWS ?? 1_000_000);
  const database = await scratchDatabase('roost_bench');
  // Embedded bus and job timers (no Redis); the operator's own retention timer is parked.
  const env = {
    DATABASE_URL: database.url,
    REDIS_URL: '',
    ROOST_ROLE: 'all',
    ROOST_RATE_LIMIT_PER_S: '0',
    ROOST_RETENTION_INTERVAL_MS: '86400000',
  };
  const op = await startOperatorProcess(env);
  const pool = new pg.Pool({ connectionString: database.url, max: 2 });
  pool.on('error', () => undefined);
  try {
    await createAgent(op, '@bench.seeder');
    await createAgent(op, '@bench.big');
    await createAgent(op, '@bench.inbox');
    const tokens = await Promise.all(Array.from({ length: SENDERS }, (_, i) => createAgent(op, `@bench.sender${i}`)));
    const seedStart = performance.now();
    await seedExpired(pool, rows);
    const seedSeconds = (performance.now() - seedStart) / 1000;
    for (const handle of ['@bench.big', '@bench.seeder']) {
      const reply = await request(
        op.url,
        'PATCH',
        `/_admin/agents/${encodeURIComponent(handle)}`,
        op.adminToken,
        JSON.stringify({ retention_days: 1 }),
      );
      if (reply.status !== 200) throw new Error(`retention for ${handle}: ${reply.status} ${reply.text}`);
    }

    const post = async (w: number) => {
      const body = JSON.stringify({
        id: ulid(),
        to: ['@bench.inbox'],
        date_ms: Date.now(),
        subject: `bench ${randomBytes(3).toString('hex')}`,
        content_parts: [{ type: 'text', text: TEXT }],
      });
      return (await request(op.url, 'POST', '/messages', tokens[w], body)).status === 202;
    };
    await loadLoop(SENDERS, 2000, post); // warm-up: connections, JIT, plans
    const idle = summary(await loadLoop(SENDERS, seconds * 1000, post));

    let purging = true;
    const purge = runPurge({ ...env, ROOST_ADMIN_TOKEN: op.adminToken, ROOST_LOG_LEVEL: 'warn' }).finally(
      () => (purging = false),
    );
    const [purged, duringRaw] = await Promise.all([purge, loadWhile(SENDERS, () => purging, post)]);
    const during = summary(duringRaw);

    const { rows: left } = await pool.query<{ entries: number; envelopes: number }>(
      "SELECT (SELECT count(*) FROM mailbox_entries m JOIN agents a ON a.id = m.mailbox_id WHERE a.handle = '@bench.big')::int AS entries, (SELECT count(*) FROM envelopes e JOIN agents a ON a.id = e.sender_id WHERE a.handle = '@bench.seeder')::int AS envelopes",
    );
    const purgedRows = purged.entries + purged.envelopes;
    return {
      scenario: 'purge',
      rows: purgedRows,
      entries: purged.entries,
      envelopes: purged.envelopes,
      left: left[0],
      seed_seconds: round(seedSeconds, 1),
      purge_seconds: round(purged.seconds, 1),
      purge_rows_per_s: Math.round(purgedRows / purged.seconds),
      senders: SENDERS,
      seconds,
      idle_per_s: idle.per_s,
      idle_p50_ms: idle.p50_ms,
      idle_p99_ms: idle.p99_ms,
      during_per_s: during.per_s,
      during_p50_ms: during.p50_ms,
      during_p99_ms: during.p99_ms,
      during_failed: during.failed,
      ratio: round(during.p99_ms / idle.p99_ms, 2),
      target_ratio: 2,
    };
  } finally {
    await pool.end();
    await op.stop();
    await database.drop();
  }
}
