import { createHash, randomBytes } from 'node:crypto';
import { AgentsRepository, openPostgres } from '#db';
import { ulid } from '#domain';
import {
  createAgent,
  HttpConnection,
  loadLoop,
  round,
  scratchDatabase,
  startOperatorProcess,
  summary,
} from './support';

const SENDERS = 32;
const TEXT = 'x'.repeat(900) + ' the quick brown fox jumps over the lazy dog';

/**
 * What turning named prepared statements off costs on direct Postgres (ROOST_DB_PREPARED_STATEMENTS,
 * which ROOST_DB_POOLER=transaction turns off): two operator processes on one database, one with
 * named statements and one without, loaded in alternating windows (A B, B A, …) so that a shared,
 * drifting machine weighs on both alike. The `accept` scenario's load: 32 senders, ~1 KB envelopes,
 * one recipient per process. Then the statement alone: the accept path's sender-and-recipient
 * lookup run back to back on one connection, named and unnamed in alternating blocks (the
 * parse-and-plan cost per execution, without the commit that dominates an accept). Options:
 * ROOST_BENCH_WINDOW_SECONDS (default 3), ROOST_BENCH_ROUNDS (default 6).
 */
export async function preparedScenario(): Promise<Record<string, unknown>> {
  const windowMs = Number(process.env.ROOST_BENCH_WINDOW_SECONDS ?? 3) * 1000;
  const rounds = Number(process.env.ROOST_BENCH_ROUNDS ?? 6);
  const database = await scratchDatabase('roost_bench');
  const named = await startOperatorProcess({ DATABASE_URL: database.url, ROOST_DB_PREPARED_STATEMENTS: 'on' });
  const unnamed = await startOperatorProcess({
    DATABASE_URL: database.url,
    ROOST_DB_PREPARED_STATEMENTS: 'off',
    ROOST_ADMIN_TOKEN: named.adminToken,
  });
  const modes = [
    {
      label: 'named',
      op: named,
      inbox: '@bench.named',
      connections: [] as HttpConnection[],
      latencies: [] as number[],
      elapsedMs: 0,
      failures: 0,
    },
    {
      label: 'unnamed',
      op: unnamed,
      inbox: '@bench.unnamed',
      connections: [] as HttpConnection[],
      latencies: [] as number[],
      elapsedMs: 0,
      failures: 0,
    },
  ];
  try {
    await Promise.all(modes.map((mode) => createAgent(named, mode.inbox)));
    const tokens = await Promise.all(
      Array.from({ length: SENDERS }, (_, i) => createAgent(named, `@bench.sender${i}`)),
    );
    for (const mode of modes) mode.connections = Array.from({ length: SENDERS }, () => new HttpConnection(mode.op.url));
    const body = (to: string) =>
      JSON.stringify({
        id: ulid(),
        to: [to],
        date_ms: Date.now(),
        subject: `bench ${randomBytes(3).toString('hex')}`,
        content_parts: [{ type: 'text', text: TEXT }],
      });
    const sender = (mode: (typeof modes)[number]) => async (w: number) =>
      (await mode.connections[w].request('POST', '/messages', tokens[w], body(mode.inbox))).status === 202;
    for (const mode of modes) await loadLoop(SENDERS, 2000, sender(mode)); // warm-up: connections, JIT, plans
    for (let r = 0; r < rounds; r++) {
      for (const mode of r % 2 === 0 ? modes : [...modes].reverse()) {
        const result = await loadLoop(SENDERS, windowMs, sender(mode));
        mode.latencies.push(...result.latencies);
        mode.elapsedMs += result.elapsedMs;
        mode.failures += result.failures;
      }
    }
    const [on, off] = modes.map((mode) =>
      summary({ latencies: mode.latencies.sort((a, b) => a - b), elapsedMs: mode.elapsedMs, failures: mode.failures }),
    );
    const lookup = await statementCost(database.url, tokens.slice(0, 1), [modes[0].inbox, modes[1].inbox]);
    return {
      scenario: 'prepared',
      senders: SENDERS,
      window_s: windowMs / 1000,
      rounds,
      named: on,
      unnamed: off,
      unnamed_vs_named_throughput: round(off.per_s / on.per_s, 3),
      unnamed_vs_named_p50: round(off.p50_ms / on.p50_ms, 3),
      lookup_us_named: lookup.named,
      lookup_us_unnamed: lookup.unnamed,
    };
  } finally {
    for (const mode of modes) mode.connections.forEach((connection) => connection.close());
    await Promise.all([named.stop(), unnamed.stop()]);
    await database.drop();
  }
}

/** Mean µs per execution of the sender-and-recipient lookup, named vs unnamed, alternating blocks. */
async function statementCost(
  url: string,
  tokens: string[],
  handles: string[],
): Promise<{ named: number; unnamed: number }> {
  const hashes = tokens.map((token) => createHash('sha256').update(token, 'utf8').digest('hex'));
  const sides = [true, false].map((preparedStatements) => {
    const database = openPostgres({ url, poolSize: 1, statementTimeoutMs: 15_000, preparedStatements });
    return { database, repository: new AgentsRepository(database), totalMs: 0, runs: 0 };
  });
  try {
    const BLOCK = 250;
    for (let block = 0; block < 16; block++) {
      const side = sides[block % 2];
      if (block < 2) for (let i = 0; i < 20; i++) await side.repository.findSendersAndRecipients(hashes, handles); // warm-up
      const start = performance.now();
      for (let i = 0; i < BLOCK; i++) await side.repository.findSendersAndRecipients(hashes, handles);
      side.totalMs += performance.now() - start;
      side.runs += BLOCK;
    }
    return {
      named: round((sides[0].totalMs / sides[0].runs) * 1000, 0),
      unnamed: round((sides[1].totalMs / sides[1].runs) * 1000, 0),
    };
  } finally {
    await Promise.all(sides.map((side) => side.database.close()));
  }
}
