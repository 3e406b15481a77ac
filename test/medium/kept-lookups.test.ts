import pg from 'pg';
import { startOperator, twoNodes, envelope, type TestOperator } from '../support/operator';

/**
 * Kept sender lookups (ROOST_ACCEPT_KEEP_LOOKUPS_MS, migration 0009): a send reuses the sender and
 * recipients its token's last send to the same recipients read, and its commit checks the policy
 * epoch that lookup carries. Every change a lookup reads (a block, a policy or allowlist edit, a
 * token rotation, a deletion) must apply to the very next send committed after it, on any node,
 * exactly as when every send read them afresh.
 */
describe('kept sender lookups on Postgres', () => {
  let a: TestOperator;
  let b: TestOperator;
  let db: pg.Client;

  beforeAll(async () => {
    [a, b] = await twoNodes({});
    db = new pg.Client({ connectionString: a.config.databaseUrl! });
    await db.connect();
  });

  afterAll(async () => {
    await db?.end();
    await b?.close();
    await a?.close();
  });

  const counter = async (op: TestOperator, name: string): Promise<number> => {
    const text = (await op.client.get('/metrics')).text;
    return Number(new RegExp(`^${name} (\\d+)`, 'm').exec(text)?.[1] ?? 0);
  };
  const epoch = async () => Number((await db.query('select epoch from policy_epoch')).rows[0].epoch);
  const send = (op: TestOperator, token: string, to: string) => op.client.post('/messages', envelope(to), token);
  const admin = (handle: string) => `/_admin/agents/${encodeURIComponent(handle)}`;

  it('sends again to the same recipients without a lookup, under the epoch of the last one', async () => {
    const alice = await a.agent('@k1.alice');
    await a.agent('@k1.bob');
    expect((await send(a, alice, '@k1.bob')).status).toBe(202);
    const kept = await counter(a, 'roost_auth_kept_lookups_total');
    for (let i = 0; i < 3; i++) expect((await send(a, alice, '@k1.bob')).status).toBe(202);
    expect(await counter(a, 'roost_auth_kept_lookups_total')).toBe(kept + 3);
  });

  it('a block made through another node refuses the next send (404), and lifting it admits the next', async () => {
    const alice = await a.agent('@k2.alice');
    const bob = await a.agent('@k2.bob');
    expect((await send(a, alice, '@k2.bob')).status).toBe(202);
    expect((await send(a, alice, '@k2.bob')).status).toBe(202); // kept
    const stale = await counter(a, 'roost_accept_policy_stale_total');
    expect((await b.client.post('/agents/me/blocks', { handle: '@k2.alice' }, bob)).status).toBe(201);
    const refused = await send(a, alice, '@k2.bob');
    expect(refused.status).toBe(404);
    expect(refused.body.error.code).toBe('NOT_FOUND');
    expect(await counter(a, 'roost_accept_policy_stale_total')).toBe(stale + 1);
    expect((await send(a, alice, '@k2.bob')).status).toBe(404); // looked up afresh, kept as blocked
    expect((await b.client.delete('/agents/me/blocks/%40k2.alice', bob)).status).toBe(200);
    expect((await send(a, alice, '@k2.bob')).status).toBe(202); // the kept refusal is checked afresh
    const stored = await db.query(
      `select count(*)::int as n from mailbox_entries e join agents g on g.id = e.mailbox_id where g.handle = '@k2.bob'`,
    );
    expect(stored.rows[0].n).toBe(3);
  });

  it('a policy turned to allowlist refuses the next send; an allowlist entry admits it again', async () => {
    const alice = await a.agent('@k3.alice');
    const bob = await a.agent('@k3.bob');
    expect((await send(a, alice, '@k3.bob')).status).toBe(202);
    expect((await send(a, alice, '@k3.bob')).status).toBe(202);
    expect((await b.client.patch(admin('@k3.bob'), { policy: 'allowlist' }, a.adminToken)).status).toBe(200);
    expect((await send(a, alice, '@k3.bob')).status).toBe(404);
    expect((await b.client.post('/agents/me/allowlist', { entries: ['@k3.alice'] }, bob)).status).toBe(200);
    expect((await send(a, alice, '@k3.bob')).status).toBe(202);
  });

  it("a rotated token is refused (401) on the next send, the kept lookup's node included", async () => {
    const alice = await a.agent('@k4.alice');
    await a.agent('@k4.bob');
    expect((await send(a, alice, '@k4.bob')).status).toBe(202);
    expect((await send(a, alice, '@k4.bob')).status).toBe(202);
    const rotated = await b.client.post(`${admin('@k4.alice')}/rotate-token`, {}, a.adminToken);
    expect(rotated.status).toBe(200);
    expect((await send(a, alice, '@k4.bob')).status).toBe(401);
    expect((await send(a, rotated.body.token as string, '@k4.bob')).status).toBe(202);
  });

  it('a recipient deleted since is refused (404) and nothing is stored for it', async () => {
    const alice = await a.agent('@k5.alice');
    await a.agent('@k5.bob');
    expect((await send(a, alice, '@k5.bob')).status).toBe(202);
    expect((await send(a, alice, '@k5.bob')).status).toBe(202);
    expect((await b.client.delete(admin('@k5.bob'), a.adminToken)).status).toBeLessThan(300);
    const refused = envelope('@k5.bob');
    expect((await a.client.post('/messages', refused, alice)).status).toBe(404);
    expect((await db.query('select 1 from envelopes where id = $1', [refused.id])).rows).toEqual([]);
  });

  it('the epoch moves with what a lookup reads, not with profiles, no-ops, new agents or sends', async () => {
    const alice = await a.agent('@k6.alice');
    const before = await epoch();
    const bob = await a.agent('@k6.bob');
    expect((await send(a, alice, '@k6.bob')).status).toBe(202);
    await a.client.patch(admin('@k6.alice'), { display_name: 'Alice' }, a.adminToken);
    expect((await a.client.delete('/agents/me/blocks/%40k6.nobody', bob)).status).toBe(404);
    expect(await epoch()).toBe(before);
    await a.client.post('/agents/me/blocks', { handle: '@k6.alice' }, bob);
    expect(await epoch()).toBeGreaterThan(before);
    const blocked = await epoch();
    await a.client.patch(admin('@k6.alice'), { policy: 'allowlist' }, a.adminToken);
    expect(await epoch()).toBeGreaterThan(blocked);
  });

  it('a revoked token with a kept lookup answers 401 whatever its body, as a fresh lookup would', async () => {
    const alice = await a.agent('@k8.alice');
    await a.agent('@k8.bob');
    expect((await send(a, alice, '@k8.bob')).status).toBe(202);
    expect((await b.client.post(`${admin('@k8.alice')}/rotate-token`, {}, a.adminToken)).status).toBe(200);
    const bad = { ...envelope('@k8.bob'), content_parts: 'not a list' };
    expect((await a.client.post('/messages', bad, alice)).status).toBe(401);
  });

  it('two nodes with kept lookups taking turns on one mailbox land every send once, gapless', async () => {
    const alice = await a.agent('@k7.alice');
    await a.agent('@k7.bob');
    const sent: string[] = [];
    for (let i = 0; i < 12; i++) {
      const body = envelope('@k7.bob');
      expect((await (i % 2 === 0 ? a : b).client.post('/messages', body, alice)).status).toBe(202);
      sent.push(body.id as string);
    }
    await Promise.all(
      Array.from({ length: 40 }, async (_, i) => {
        const body = envelope('@k7.bob');
        expect((await (i % 2 === 0 ? a : b).client.post('/messages', body, alice)).status).toBe(202);
        sent.push(body.id as string);
      }),
    );
    const { rows } = await db.query<{ seq: number; envelope_id: string }>(
      `select e.seq::int as seq, e.envelope_id from mailbox_entries e join agents g on g.id = e.mailbox_id
       where g.handle = '@k7.bob' order by e.seq`,
    );
    rows.forEach((row, i) => expect(row.seq).toBe(i + 1));
    expect(rows.map((row) => row.envelope_id).sort()).toEqual([...sent].sort());
    expect(rows.slice(0, 12).map((row) => row.envelope_id)).toEqual(sent.slice(0, 12));
  });
});

describe('kept sender lookups and the rate limit', () => {
  let op: TestOperator;
  beforeAll(async () => {
    op = await startOperator({
      backend: 'postgres',
      env: { ROOST_RATE_LIMIT_PER_S: '1', ROOST_RATE_LIMIT_BURST: '1' },
    });
  });
  afterAll(async () => {
    await op?.close();
  });

  it('a token revoked since its lookup was kept answers 401, not 429, once its bucket is empty', async () => {
    const alice = await op.agent('@kr.alice');
    await op.agent('@kr.bob');
    expect((await op.client.post('/messages', envelope('@kr.bob'), alice)).status).toBe(202); // kept; bucket empty
    expect((await op.client.post('/messages', envelope('@kr.bob'), alice)).status).toBe(429); // within the second
    const handle = encodeURIComponent('@kr.alice');
    expect((await op.client.post(`/_admin/agents/${handle}/rotate-token`, {}, op.adminToken)).status).toBe(200);
    expect((await op.client.post('/messages', envelope('@kr.bob'), alice)).status).toBe(401);
  });
});
