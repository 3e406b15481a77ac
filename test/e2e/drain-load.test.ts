import { Agent, request as httpRequest } from 'node:http';
import pg from 'pg';
import { ulid } from '#domain';
import { TestClient } from '../support/client';
import { createTestDatabase } from '../support/database';
import { setTimeout as sleep } from 'node:timers/promises';
import { operatorEnv, stopAll, TestProcess, type Exit } from '../support/processes';

/**
 * SIGTERM of one of two apis under keep-alive load (a rolling update): twelve senders keep
 * kept-alive connections to both, as a pooled HTTP client behind a load balancer does: a 503 (the
 * drain's refusal) or a refused connect takes that api out of rotation for EJECT_MS (passive
 * health checking) and moves the send to the other api with the same id and body. No request may
 * be reset (`ECONNRESET`/`EPIPE`, fresh or kept-alive connection), no 202 lost or stored twice, and
 * the drained api exits 0.
 *
 * Why the client-side ejection: a client that keeps opening connections to a node whose listener
 * is closing gets some reset by the kernel (connections still in the accept queue when the
 * listening socket closes, seen ~900 ms before exit, at the drain's listener close, on fresh
 * sockets); no server can answer those. Without ejection this test saw 1-3 such resets per run;
 * before the drain's quiesce step (http-adapter.ts) also resets at the exit itself.
 */

/** How long a node that failed a request is left out of rotation (a load balancer's outlier ejection). */
const EJECT_MS = 3_000;

interface Attempt {
  api: number;
  status: number; // 0 = no HTTP answer
  code?: string;
  reused: boolean;
  at: number;
}

interface SendRecord {
  id: string;
  attempts: Attempt[];
  accepted: boolean;
}

function post(
  port: number,
  agent: Agent,
  token: string,
  body: string,
): Promise<{ status: number; code?: string; reused: boolean }> {
  return new Promise((resolve) => {
    const req = httpRequest(
      {
        host: '127.0.0.1',
        port,
        method: 'POST',
        path: '/messages',
        agent,
        timeout: 20_000,
        headers: {
          authorization: `Bearer ${token}`,
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(body),
        },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (text += chunk));
        res.on('end', () => {
          let code: string | undefined;
          if (res.statusCode !== 202) code = (JSON.parse(text) as { error?: { code?: string } }).error?.code;
          resolve({ status: res.statusCode ?? 0, ...(code ? { code } : {}), reused: req.reusedSocket });
        });
        res.on('error', (error: NodeJS.ErrnoException) =>
          resolve({ status: 0, code: error.code ?? error.message, reused: req.reusedSocket }),
        );
      },
    );
    req.on('timeout', () => req.destroy(Object.assign(new Error('timeout'), { code: 'TIMEOUT' })));
    req.on('error', (error: NodeJS.ErrnoException) =>
      resolve({ status: 0, code: error.code ?? error.message, reused: req.reusedSocket }),
    );
    req.end(body);
  });
}

describe('SIGTERM of an api under keep-alive load', () => {
  let database: { url: string; drop: () => Promise<void> };
  let apis: TestProcess[] = [];
  let sql: pg.Client;
  const adminToken = `admin-${ulid()}`;

  beforeAll(async () => {
    database = await createTestDatabase('roost_e2e');
    const env = operatorEnv(database.url, adminToken, { ROOST_ROLE: 'api', ROOST_SHUTDOWN_TIMEOUT_MS: '20000' });
    apis = await Promise.all(
      [0, 1].map((i) => TestProcess.start({ name: `api-${i} (drain load)`, env, startTimeoutMs: 90_000 })),
    );
    sql = new pg.Client({ connectionString: database.url });
    await sql.connect();
  });

  afterAll(async () => {
    await sql?.end();
    await stopAll(apis);
    await database?.drop();
  });

  it('resets no in-flight request, loses no 202, and exits 0', async () => {
    const client = new TestClient(apis[1].url);
    const token = async (handle: string) => {
      const reply = await client.post('/_admin/agents', { handle, policy: 'open' }, adminToken);
      if (reply.status !== 201) throw new Error(`creating ${handle}: ${reply.status} ${reply.text}`);
      return reply.body.token as string;
    };
    const sender = await token('@dl.sender');
    const inboxes = ['@dl.one', '@dl.two'];
    for (const handle of inboxes) await token(handle);
    const ports = apis.map((api) => api.port);
    const agents = ports.map(() => new Agent({ keepAlive: true, maxSockets: 6 }));

    const sends: SendRecord[] = [];
    const ejectedUntil = [0, 0];
    let stop = false;
    let exitedAt = 0;
    const loops = Promise.all(
      Array.from({ length: 12 }, async (_, loop) => {
        for (let n = 0; !stop; n++) {
          const record: SendRecord = { id: ulid(), attempts: [], accepted: false };
          sends.push(record);
          const body = JSON.stringify({
            id: record.id,
            to: [inboxes[n % 2]],
            date_ms: 1_700_000_000_000,
            content_parts: [{ type: 'text', text: record.id }],
          });
          let api = (loop + n) % 2;
          if (Date.now() < ejectedUntil[api]) api = 1 - api;
          for (let attempt = 0; attempt < 8 && !record.accepted; attempt++) {
            const outcome = await post(ports[api], agents[api], sender, body);
            record.attempts.push({ api, ...outcome, at: Date.now() });
            if (outcome.status === 202) record.accepted = true;
            else if (outcome.status >= 400 && outcome.status < 500) break;
            else {
              // A 503, a refusal or a reset: out of rotation for a while (as a load balancer's
              // passive health check does), and the same send on the other api.
              ejectedUntil[api] = Date.now() + EJECT_MS;
              api = 1 - api;
            }
          }
        }
      }),
    );

    const accepted = () => sends.filter((s) => s.accepted).length;
    while (accepted() < 100) await sleep(20);
    const signalledAt = Date.now();
    const exit: Exit = await apis[0].stop(25_000);
    exitedAt = Date.now();
    const acceptedAtExit = accepted();
    while (accepted() < acceptedAtExit + 100) await sleep(20);
    stop = true;
    await loops;
    for (const agent of agents) agent.destroy();

    expect(exit).toEqual({ code: 0, signal: null });
    const drained = sends.flatMap((s) => s.attempts).filter((a) => a.api === 0 && a.at >= signalledAt);
    const errors = drained.filter((a) => a.status === 0);
    const summary = {
      drain_ms: exitedAt - signalledAt,
      errors_ms_before_exit: errors.filter((a) => a.code !== 'ECONNREFUSED').map((a) => exitedAt - a.at),
      to_draining_api: drained.length,
      by_outcome: drained.reduce<Record<string, number>>((acc, a) => {
        const key = a.status === 0 ? `${a.code}${a.reused ? ' (reused socket)' : ' (fresh socket)'}` : `${a.status}`;
        acc[key] = (acc[key] ?? 0) + 1;
        return acc;
      }, {}),
    };
    if (process.env.ROOST_TEST_VERBOSE) console.log(summary);
    // A refused connect is clean (nothing was sent); any other error is a cut request.
    // A fresh connection is never reset. A request written on a kept-alive socket at the moment the
    // server closes it idle can be (the keep-alive race every HTTP/1.1 server has, seen once at high
    // load); the client retries it with the same id, and the checks below prove no 202 was lost.
    expect(errors.filter((a) => a.code !== 'ECONNREFUSED' && !(a.code === 'ECONNRESET' && a.reused))).toEqual([]);

    // Every send got its 202 in the end (retries included); each is stored exactly once.
    expect(sends.filter((s) => !s.accepted).map((s) => s.attempts)).toEqual([]);
    const rows = await sql.query<{ envelope_id: string; n: number }>(
      'SELECT envelope_id, count(*)::int AS n FROM mailbox_entries WHERE envelope_id = ANY($1) GROUP BY envelope_id',
      [sends.map((s) => s.id)],
    );
    expect(rows.rows.length).toBe(sends.length);
    expect(rows.rows.filter((r) => r.n !== 1)).toEqual([]);
  });
});
