import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { ulid } from '#domain';
import { createAgent, HttpConnection, loadLoop, round, scratchDatabase, startOperatorProcess, summary } from './support';

const SENDERS = 32;
const TEXT = 'x'.repeat(900) + ' the quick brown fox jumps over the lazy dog';

/**
 * The raw ceiling: transactions that each insert one ~1 KB envelope row and one mailbox row
 * through `pg`, at the same concurrency, on the same Postgres.
 */
async function ceiling(url: string, durationMs: number) {
  const pool = new pg.Pool({ connectionString: url, max: SENDERS });
  pool.on('error', () => undefined);
  await pool.query('CREATE TABLE bench_envelopes (id text PRIMARY KEY, body text NOT NULL)');
  await pool.query('CREATE TABLE bench_mailbox (mailbox bigint NOT NULL, seq bigserial, envelope_id text NOT NULL, PRIMARY KEY (mailbox, seq))');
  const body = JSON.stringify({ content_parts: [{ type: 'text', text: TEXT }] });
  const result = await loadLoop(SENDERS, durationMs, async () => {
    const client = await pool.connect();
    try {
      const id = ulid();
      await client.query('BEGIN');
      await client.query('INSERT INTO bench_envelopes (id, body) VALUES ($1, $2)', [id, body]);
      await client.query('INSERT INTO bench_mailbox (mailbox, envelope_id) VALUES (1, $1)', [id]);
      await client.query('COMMIT');
      return true;
    } finally {
      client.release();
    }
  });
  await pool.end();
  return summary(result);
}

/**
 * Options: ROOST_BENCH_SECONDS (default 20); ROOST_BENCH_APIS (default 1): operator processes
 * sharing the database, sender i posting to process i mod N (stateless api nodes on one host).
 */
export async function acceptScenario(extraEnv: Record<string, string> = {}, label = 'accept'): Promise<Record<string, unknown>> {
  const seconds = Number(process.env.ROOST_BENCH_SECONDS ?? 20);
  const apis = Math.max(1, Number(process.env.ROOST_BENCH_APIS ?? 1));
  const database = await scratchDatabase('roost_bench');
  const op = await startOperatorProcess({ DATABASE_URL: database.url, ...extraEnv });
  const nodes = [op, ...(await Promise.all(Array.from({ length: apis - 1 }, () => startOperatorProcess({ DATABASE_URL: database.url, ROOST_ADMIN_TOKEN: op.adminToken, ...extraEnv }))))];
  // one keep-alive connection per sender, sender i on process i mod N
  const connections = Array.from({ length: SENDERS }, (_, i) => new HttpConnection(nodes[i % nodes.length].url));
  try {
    await createAgent(op, '@bench.inbox');
    const tokens = await Promise.all(Array.from({ length: SENDERS }, (_, i) => createAgent(op, `@bench.sender${i}`)));
    const envelopeBody = (id: string) =>
      JSON.stringify({ id, to: ['@bench.inbox'], date_ms: Date.now(), subject: `bench ${randomBytes(3).toString('hex')}`, content_parts: [{ type: 'text', text: TEXT }] });
    const send = async (w: number) => (await connections[w].request('POST', '/messages', tokens[w], envelopeBody(ulid()))).status === 202;
    await loadLoop(SENDERS, 2000, send); // warm-up: connections, JIT, plans
    const roost = summary(await loadLoop(SENDERS, seconds * 1000, send));
    await Promise.all(nodes.map((n) => n.stop()));
    const raw = await ceiling(database.url, seconds * 1000);
    return {
      scenario: label,
      api_processes: nodes.length,
      senders: SENDERS,
      seconds,
      envelope_bytes: envelopeBody(ulid()).length,
      envelopes_per_s: roost.per_s,
      p50_ms: roost.p50_ms,
      p99_ms: roost.p99_ms,
      failed: roost.failed,
      ceiling_per_s: raw.per_s,
      ceiling_p50_ms: raw.p50_ms,
      ceiling_p99_ms: raw.p99_ms,
      ratio: round(roost.per_s / raw.per_s, 3),
    };
  } finally {
    connections.forEach((connection) => connection.close());
    await Promise.all(nodes.map((n) => n.stop()));
    await database.drop();
  }
}
