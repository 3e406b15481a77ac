import { mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ulid } from '#domain';
import { TestClient } from '../support/client';
import { TestProcess } from '../support/processes';

/**
 * A burst on one open keep-alive connection plus many new ones (a client's first burst after its
 * set-up requests) shares commits on the embedded operator. Node accepts one new connection per
 * event-loop turn and PGlite runs each query on the loop: the open connection's request started
 * a lookup at once, and every later turn accepted one connection and ran the previous request's
 * query, so each batch held one envelope (99–100 batches, as many WAL syncs, for 100 POSTs).
 */
jest.setTimeout(180_000);

const BURST = 100;

function metric(text: string, name: string): number {
  const line = text.split('\n').find((l) => l.startsWith(`${name} `));
  return line === undefined ? 0 : Number(line.split(' ')[1]);
}

/** A request through `agent`: a keep-alive agent reuses an idle connection, else opens one. */
function request(
  url: string,
  agent: http.Agent,
  path: string,
  token: string,
  body: unknown,
): Promise<{ status: number; text: string }> {
  const data = JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const outgoing = http.request(
      `${url}${path}`,
      {
        method: 'POST',
        agent,
        headers: {
          authorization: `Bearer ${token}`,
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(data),
        },
      },
      (response) => {
        let text = '';
        response.on('data', (chunk: Buffer) => (text += chunk.toString()));
        response.on('end', () => resolve({ status: response.statusCode ?? 0, text }));
      },
    );
    outgoing.on('error', reject);
    outgoing.end(data);
  });
}

describe('embedded operator, first burst', () => {
  let operator: TestProcess;
  let dataDir: string;
  const adminToken = `burst-admin-${ulid()}`;

  beforeAll(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'roost-burst-pglite-'));
    operator = await TestProcess.start({
      name: 'embedded',
      env: { ROOST_DATA_DIR: dataDir, ROOST_ADMIN_TOKEN: adminToken, ROOST_LOG_LEVEL: 'warn' },
      startTimeoutMs: 120_000,
    });
  });
  afterAll(async () => {
    await operator?.stop();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  });

  it(`commits ${BURST} concurrent POSTs, most on new connections, in a few batches`, async () => {
    let before = '';
    const client = new TestClient(operator.url);
    // Like an agent's own client: set-up requests leave one idle keep-alive connection, and the
    // burst goes out on it plus as many new ones.
    const connections = new http.Agent({ keepAlive: true });
    try {
      const agent = async (handle: string) => {
        const reply = await request(operator.url, connections, '/_admin/agents', adminToken, {
          handle,
          policy: 'open',
        });
        if (reply.status !== 201) throw new Error(`creating ${handle}: ${reply.status} ${reply.text}`);
        return (JSON.parse(reply.text) as { token: string }).token;
      };
      const sender = await agent('@burst.sender');
      await agent('@burst.inbox');
      before = (await client.get('/metrics')).text;
      const replies = await Promise.all(
        Array.from({ length: BURST }, (_, i) =>
          request(operator.url, connections, '/messages', sender, {
            id: ulid(),
            to: ['@burst.inbox'],
            date_ms: Date.now(),
            content_parts: [{ type: 'text', text: `burst ${i}` }],
          }),
        ),
      );
      expect(replies.map((reply) => reply.status)).toEqual(replies.map(() => 202));
    } finally {
      connections.destroy();
    }

    const after = (await client.get('/metrics')).text;
    const delta = (name: string) => metric(after, name) - metric(before, name);
    const batches = delta('roost_accept_batch_envelopes_count');
    const walSyncs = delta('roost_db_syncs_total{kind="wal"}');
    console.log(`embedded first burst: ${BURST} envelopes in ${batches} batches, ${walSyncs} WAL syncs`);
    expect(delta('roost_accept_batch_envelopes_sum')).toBe(BURST);
    // Was 99–100 (one commit per envelope); a warm process takes 2–3, a fresh one ~10–30 with
    // the gathering capped at 50 ms. Half is far from both, so machine load does not flip it.
    expect(batches).toBeLessThanOrEqual(BURST / 2);
    expect(walSyncs).toBeLessThanOrEqual(BURST / 2);
  });
});
