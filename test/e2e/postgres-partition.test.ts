import pg from 'pg';
import { ulid } from '#domain';
import { TcpProxy } from '../../chaos/src/proxy';
import { TestClient } from '../support/client';
import { createTestDatabase } from '../support/database';
import { setTimeout as sleep } from 'node:timers/promises';
import { operatorEnv, TestProcess } from '../support/processes';

/**
 * A network partition between an api and Postgres under concurrent sends, through the chaos
 * tool's TCP proxy: a blackhole (bytes stall on open connections, new ones hang: the server's
 * statement_timeout can never answer, so pg's own query_timeout fires) and a cut (every connection
 * reset, new ones refused). Every send answers 202 or 503 with the ASMTP body, never 500 (a
 * 10-minute `npm run chaos` answered 10 sends 500 during partitions: pg's `Query read timeout` was
 * not classified as unavailable); every 202 is stored once, and a 503 left nothing half-written.
 */

interface Outcome {
  id: string;
  to: string;
  status: number; // 0 = no HTTP answer
  code?: string;
}

async function send(url: string, token: string, id: string, to: string): Promise<Outcome> {
  try {
    const response = await fetch(`${url}/messages`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        id,
        to: [to],
        date_ms: 1_700_000_000_000,
        subject: 'partition',
        content_parts: [{ type: 'text', text: `envelope ${id}` }],
      }),
      signal: AbortSignal.timeout(30_000),
    });
    const text = await response.text();
    const code = response.status === 202 ? undefined : (JSON.parse(text) as { error?: { code?: string } }).error?.code;
    return { id, to, status: response.status, ...(code ? { code } : {}) };
  } catch (error) {
    return { id, to, status: 0, code: (error as { cause?: { code?: string } }).cause?.code ?? (error as Error).name };
  }
}

describe('a Postgres partition (blackhole, then cut) under concurrent sends', () => {
  let database: { url: string; drop: () => Promise<void> };
  let proxy: TcpProxy;
  let api: TestProcess | undefined;
  let sql: pg.Client;
  const adminToken = `admin-${ulid()}`;

  beforeAll(async () => {
    database = await createTestDatabase('roost_e2e');
    const direct = new URL(database.url);
    proxy = await TcpProxy.start('postgres', Number(direct.port || 5432), direct.hostname);
    const viaProxy = new URL(database.url);
    viaProxy.hostname = '127.0.0.1';
    viaProxy.port = String(proxy.port);
    api = await TestProcess.start({
      name: 'api (partitioned)',
      // A short statement timeout (query_timeout = it + 1 s) and a small pool: a stalled query
      // and a pool exhausted by stalled clients both happen within the partition.
      env: operatorEnv(viaProxy.toString(), adminToken, {
        ROOST_ROLE: 'api',
        ROOST_DB_STATEMENT_TIMEOUT_MS: '1000',
        ROOST_DB_POOL_SIZE: '4',
      }),
    });
    sql = new pg.Client({ connectionString: database.url });
    await sql.connect();
  });

  afterAll(async () => {
    await sql?.end();
    await api?.stop();
    await proxy?.close();
    await database?.drop();
  });

  it('answers 202 or 503 (never 500), stores every 202 once and nothing half-written', async () => {
    const client = new TestClient(api!.url);
    const token = async (handle: string) => {
      const reply = await client.post('/_admin/agents', { handle, policy: 'open' }, adminToken);
      if (reply.status !== 201) throw new Error(`creating ${handle}: ${reply.status} ${reply.text}`);
      return reply.body.token as string;
    };
    const sender = await token('@pp.sender');
    const inboxes = ['@pp.one', '@pp.two', '@pp.three'];
    for (const handle of inboxes) await token(handle);

    const outcomes: Outcome[] = [];
    let stop = false;
    const loops = Promise.all(
      Array.from({ length: 8 }, async (_, i) => {
        for (let n = 0; !stop; n++)
          outcomes.push(await send(api!.url, sender, ulid(), inboxes[(i + n) % inboxes.length]));
      }),
    );
    const accepted = () => outcomes.filter((o) => o.status === 202).length;
    const flowing = async (more: number) => {
      const target = accepted() + more;
      const deadline = Date.now() + 30_000;
      while (accepted() < target && Date.now() < deadline) await sleep(20);
      expect(accepted()).toBeGreaterThanOrEqual(target);
    };

    await flowing(10);
    proxy.partition(); // blackhole: queries in flight stall, new connections hang
    await sleep(4_000);
    proxy.heal();
    await flowing(10);
    proxy.cut(); // every connection reset, new ones refused
    await sleep(2_000);
    proxy.heal();
    await flowing(10);
    proxy.partition();
    await sleep(2_500);
    proxy.cut(); // a blackhole that turns into a cut: stalled connections are reset
    await sleep(1_000);
    proxy.heal();
    await flowing(10);
    stop = true;
    await loops;

    const byStatus: Record<string, number> = {};
    for (const o of outcomes)
      byStatus[`${o.status}${o.code ? ` ${o.code}` : ''}`] =
        (byStatus[`${o.status}${o.code ? ` ${o.code}` : ''}`] ?? 0) + 1;
    if (process.env.ROOST_TEST_VERBOSE) console.log(byStatus);
    // Only 202 and 503 UNAVAILABLE: no 500, no reset, no timeout.
    // The api's own 'internal error' log lines carry the stack of whatever escaped the mapping.
    expect({
      unexpected: Object.keys(byStatus).filter((key) => key !== '202' && key !== '503 UNAVAILABLE'),
      internalErrors: api!.output.filter((line) => line.includes('internal error')),
    }).toEqual({ unexpected: [], internalErrors: [] });
    expect(byStatus['503 UNAVAILABLE']).toBeGreaterThan(0); // the partitions were felt

    // Every 202 is stored with its one entry; a 503 may have committed (its answer lost with the
    // connection), but then whole; no entry without its envelope.
    const ids = outcomes.map((o) => o.id);
    const rows = await sql.query<{ id: string; entries: number }>(
      'SELECT e.id, (SELECT count(*) FROM mailbox_entries m WHERE m.envelope_id = e.id)::int AS entries FROM envelopes e WHERE e.id = ANY($1)',
      [ids],
    );
    const stored = new Map(rows.rows.map((row) => [row.id, row.entries]));
    for (const o of outcomes.filter((x) => x.status === 202)) expect([o.id, stored.get(o.id)]).toEqual([o.id, 1]);
    for (const [id, entries] of stored) expect([id, entries]).toEqual([id, 1]);
    const orphans = await sql.query(
      'SELECT count(*)::int AS n FROM mailbox_entries m WHERE m.envelope_id = ANY($1) AND NOT EXISTS (SELECT 1 FROM envelopes e WHERE e.id = m.envelope_id)',
      [ids],
    );
    expect(orphans.rows[0].n).toBe(0);

    // A client retrying each 503 with the same id and body gets 202, and the envelope is stored once.
    const refused = outcomes.filter((o) => o.status === 503);
    // One at a time, a few attempts each: a burst of them would only meet the small pool's queue.
    const retried: Outcome[] = [];
    for (const o of refused) {
      let outcome = await send(api!.url, sender, o.id, o.to);
      for (let attempt = 1; outcome.status !== 202 && attempt < 5; attempt++) {
        await sleep(200 * attempt);
        outcome = await send(api!.url, sender, o.id, o.to);
      }
      retried.push(outcome);
    }
    expect(retried.filter((o) => o.status !== 202)).toEqual([]);
    const after = await sql.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM mailbox_entries WHERE envelope_id = ANY($1)',
      [ids],
    );
    expect(after.rows[0].n).toBe(outcomes.length);
  });
});
