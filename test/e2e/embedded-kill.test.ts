import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ulid } from '#domain';
import { TestClient } from '../support/client';
import { TestProcess } from '../support/processes';

/**
 * The embedded operator killed with SIGKILL while senders are mid-flight: after a restart on the
 * same ROOST_DATA_DIR every envelope that got a `202` is in the mailbox exactly once. (An OS crash
 * cannot be simulated here; that each commit is fsynced before it returns is in
 * test/medium/pglite-durability.test.ts.)
 */
jest.setTimeout(180_000);

const SENDERS = 8;

describe('embedded operator, kill -9 under load', () => {
  let operator: TestProcess;
  let dataDir: string;
  const adminToken = `kill-admin-${ulid()}`;

  beforeAll(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'roost-kill-pglite-'));
    operator = await TestProcess.start({
      name: 'embedded',
      env: {
        ROOST_DATA_DIR: dataDir,
        ROOST_ADMIN_TOKEN: adminToken,
        ROOST_RATE_LIMIT_PER_S: '0',
        ROOST_AUTH_FAIL_LIMIT_PER_S: '0',
        ROOST_LOG_LEVEL: 'warn',
      },
      startTimeoutMs: 120_000,
    });
  });
  afterAll(async () => {
    await operator?.stop();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  });

  it('keeps every 202 across a SIGKILL and a restart', async () => {
    const client = new TestClient(operator.url);
    const agent = async (handle: string) => {
      const reply = await client.post('/_admin/agents', { handle, policy: 'open' }, adminToken);
      if (reply.status !== 201) throw new Error(`creating ${handle}: ${reply.status} ${reply.text}`);
      return reply.body.token as string;
    };
    const inbox = await agent('@kill.inbox');
    const senders = await Promise.all(Array.from({ length: SENDERS }, (_, i) => agent(`@kill.s${i}`)));

    const accepted: string[] = [];
    let stop = false;
    const loops = senders.map(async (token) => {
      while (!stop) {
        const id = ulid();
        const body = {
          id,
          to: ['@kill.inbox'],
          date_ms: Date.now(),
          content_parts: [{ type: 'text', text: 'x'.repeat(512) }],
        };
        try {
          const reply = await client.post('/messages', body, token);
          if (reply.status === 202) accepted.push(id);
        } catch {
          return; // the connection died with the process
        }
      }
    });
    // Kill once a few batches are through, with requests still in flight.
    while (accepted.length < 200) await new Promise((done) => setTimeout(done, 20));
    const exit = await operator.kill('SIGKILL');
    stop = true;
    await Promise.all(loops);
    expect(exit.signal).toBe('SIGKILL');

    await operator.start();
    const ids: string[] = [];
    let after = '';
    for (;;) {
      const page = await client.get(`/mailbox?order=asc&limit=500${after}`, inbox);
      expect(page.status).toBe(200);
      const headers = page.body.envelope_headers as Array<{ id: string }>;
      ids.push(...headers.map((h) => h.id));
      const cursor = page.body.next_cursor as { created_at: number; envelope_id: string } | null;
      if (cursor === null) break;
      after = `&after_created_at=${cursor.created_at}&after_envelope_id=${cursor.envelope_id}`;
    }
    expect(new Set(ids).size).toBe(ids.length);
    const stored = new Set(ids);
    expect(accepted.filter((id) => !stored.has(id))).toEqual([]);
  });
});
