import { sql } from 'kysely';
import { DATABASE, type Database } from '#db';
import { ulid } from '#domain';
import { RetentionProcessor } from '../../../apps/worker/src/retention.processor';
import { SchedulesProcessor } from '../../../apps/worker/src/schedules.processor';
import type { Reply } from '../../support/client';
import { envelope, startOperator, type TestOperator } from '../../support/operator';
import { connect } from '../../support/ws';

/**
 * Deleting an agent or an organization keeps what it delivered (EXTENSIONS.md §5, issue 15): one
 * tenant's admin cannot erase mail another tenant received. Runs on Postgres and on PGlite.
 */
const DAY = 24 * 60 * 60 * 1000;
const FIRST_ID = '01000000000000000000000000';

interface TestAgent {
  handle: string;
  token: string;
}

describe('deletion keeps what was delivered (EXTENSIONS.md §5)', () => {
  let op: TestOperator;
  let database: Database;

  beforeAll(async () => {
    op = await startOperator({ env: { ROOST_RETENTION_INTERVAL_MS: '86400000', ROOST_SCHEDULE_TICK_MS: '3600000' } });
    database = op.app.get<Database>(DATABASE);
  });
  afterAll(async () => op?.close());

  const path = (handle: string) => `/_admin/agents/${encodeURIComponent(handle)}`;
  const expectError = (reply: Reply, status: number, code: string, what = '') => {
    expect({ what, status: reply.status, code: reply.body?.error?.code }).toEqual({ what, status, code });
  };
  const createOrg = async (name: string, fields: Record<string, unknown> = {}): Promise<string> => {
    const reply = await op.client.post('/_admin/orgs', { name, ...fields }, op.adminToken);
    expect(reply.status).toBe(201);
    return reply.body.admin_token as string;
  };
  const agent = async (handle: string, adminToken = op.adminToken): Promise<TestAgent> => {
    const reply = await op.client.post('/_admin/agents', { handle, policy: 'open' }, adminToken);
    expect(reply.status).toBe(201);
    return { handle, token: reply.body.token as string };
  };
  const send = async (
    from: TestAgent,
    to: string | string[],
    fields: Record<string, unknown> = {},
  ): Promise<string> => {
    const body = envelope(to, fields);
    const reply = await op.client.post('/messages', body, from.token);
    expect(reply.status).toBe(202);
    return body.id as string;
  };
  const inbox = async (who: TestAgent, direction = 'in'): Promise<any[]> => {
    const reply = await op.client.get(`/mailbox?direction=${direction}&limit=100`, who.token);
    expect(reply.status).toBe(200);
    return reply.body.envelope_headers;
  };
  const processor = () => op.app.get(RetentionProcessor);
  const PNG = Buffer.from(
    'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==',
    'base64',
  );
  const upload = async (who: TestAgent): Promise<any> => {
    const boundary = `roost-${ulid()}`;
    const body = Buffer.concat([
      Buffer.from(
        `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="x.png"\r\nContent-Type: image/png\r\n\r\n`,
      ),
      PNG,
      Buffer.from(`\r\n--${boundary}--\r\n`),
    ]);
    const reply = await op.client.request('POST', '/files', {
      token: who.token,
      body,
      headers: { 'content-type': `multipart/form-data; boundary=${boundary}` },
    });
    expect(reply.status).toBe(201);
    return reply.body;
  };
  const rows = async <R>(query: ReturnType<typeof sql<R>>): Promise<R[]> => (await query.execute(database.db)).rows;
  /** The mailbox's entry seqs, ascending, and its last allocated seq. */
  const seqs = async (handle: string): Promise<{ seqs: number[]; last: number }> => {
    const entries = await rows<{ seq: number }>(sql`
      select m.seq from mailbox_entries m join agents a on a.id = m.mailbox_id where a.handle = ${handle} order by m.seq`);
    const [mailbox] = await rows<{ last_seq: number }>(sql`
      select b.last_seq from mailboxes b join agents a on a.id = b.agent_id where a.handle = ${handle}`);
    return { seqs: entries.map((row) => Number(row.seq)), last: Number(mailbox.last_seq) };
  };
  const replayIds = async (who: TestAgent): Promise<string[]> => {
    const socket = await connect(op.url, {
      token: who.token,
      query: { after_created_at: '0', after_envelope_id: FIRST_ID },
    });
    try {
      await socket.until(() => socket.frames.some((frame) => frame.op === 'replay.complete'), 5_000, 'replay.complete');
      return socket.ids;
    } finally {
      socket.close();
    }
  };

  it('an org admin deleting its agent leaves the envelopes another org received readable, `from` unchanged, seq gapless', async () => {
    const aToken = await createOrg('dela');
    await createOrg('delb');
    const x = await agent('@dela.x', aToken);
    const y = await agent('@delb.y');
    const z = await agent('@delb.z');

    // y's mailbox interleaves x's three envelopes with z's, so a removed entry would leave a seq gap.
    const fromX: string[] = [];
    const fromZ: string[] = [];
    for (let i = 0; i < 3; i++) {
      fromX.push(await send(x, y.handle, { subject: `quarterly report ${i}` }));
      fromZ.push(await send(z, y.handle));
    }
    // Deleted agent as a recipient of a multi-recipient envelope: its entry goes, y's stays.
    const toBoth = await send(z, [y.handle, x.handle], { subject: 'to both' });
    // Only x holds this one: nobody can read it once x is gone.
    const selfOnly = await send(x, x.handle, { subject: 'note to self' });
    // A receipt y left before the deletion, and a socket x holds.
    expect((await op.client.post(`/messages/${fromX[0]}/receipts`, { status: 'accepted' }, y.token)).status).toBe(201);
    // And one x left on z's envelope: a receipt is an envelope x delivered to z, so it stays too.
    expect((await op.client.post(`/messages/${toBoth}/receipts`, { status: 'deferred' }, x.token)).status).toBe(201);
    const socket = await connect(op.url, { token: x.token });

    const before = await inbox(y);
    expect(before).toHaveLength(7);
    const beforeSeqs = await seqs(y.handle);
    const replayedBefore = await replayIds(y);
    expect(replayedBefore).toHaveLength(7);

    expect((await op.client.delete(path(x.handle), aToken)).status).toBe(204);
    await socket.untilClosed(5_000);
    expect(socket.closeCode).toBe(4001);

    // y still has every envelope, in the same order, with the same headers (from: @dela.x).
    const after = await inbox(y);
    expect(after).toEqual(before);
    expect(
      after
        .filter((h) => h.from === x.handle)
        .map((h) => h.id)
        .sort(),
    ).toEqual([...fromX].sort());
    for (const id of fromX) {
      const read = await op.client.get(`/messages/${id}`, y.token);
      expect(read.status).toBe(200);
      expect(read.body.from).toBe(x.handle);
    }
    // No seq gap in y's mailbox, and a full replay gives every entry once, in order.
    const afterSeqs = await seqs(y.handle);
    expect(afterSeqs).toEqual(beforeSeqs);
    expect(afterSeqs.seqs).toEqual(Array.from({ length: afterSeqs.last }, (_, i) => i + 1));
    expect(await replayIds(y)).toEqual(replayedBefore);
    // Search and receipts/status keep working for the recipient.
    const found = await op.client.get('/search/messages?q=quarterly', y.token);
    expect(found.status).toBe(200);
    expect(found.body.envelopes.map((e: any) => [e.envelope_id, e.sender_handle]).sort()).toEqual(
      fromX.map((id) => [id, x.handle]).sort(),
    );
    const status = await op.client.get(`/messages/${fromX[0]}/status`, y.token);
    expect(status.status).toBe(200);
    expect(status.body.recipients).toEqual([
      expect.objectContaining({ handle: y.handle, read: true, status: 'accepted' }),
    ]);
    const receipts = await op.client.get(`/messages/${fromX[0]}/receipts`, y.token);
    expect(receipts.body.receipts).toEqual([expect.objectContaining({ from: y.handle, status: 'accepted' })]);
    // A new receipt has nobody to go to: the sender is unknown now, like any deleted recipient.
    expectError(
      await op.client.post(`/messages/${fromX[1]}/receipts`, { status: 'applied' }, y.token),
      404,
      'NOT_FOUND',
      'receipt to deleted',
    );

    // The multi-recipient envelope: y keeps it, x's entry is gone; z's status lists y alone.
    expect(after.some((h) => h.id === toBoth)).toBe(true);
    const zStatus = await op.client.get(`/messages/${toBoth}/status`, z.token);
    expect(zStatus.body.recipients.map((r: any) => r.handle)).toEqual([y.handle]);
    const zReceipts = await op.client.get(`/messages/${toBoth}/receipts`, z.token);
    expect(zReceipts.body.receipts).toEqual([expect.objectContaining({ from: x.handle, status: 'deferred' })]);
    expect((await inbox(z)).filter((h) => h.from === x.handle)).toHaveLength(1);
    // What only x held is gone with it; x's own mailbox holds nothing.
    expect(await rows(sql`select id from envelopes where id = ${selfOnly}`)).toEqual([]);
    expect(
      await rows(
        sql`select 1 from mailbox_entries m join agents a on a.id = m.mailbox_id where a.handle = ${x.handle}`,
      ),
    ).toEqual([]);
    // The database itself refuses to drop a sender whose envelopes are stored.
    await expect(sql`delete from agents where handle = ${x.handle}`.execute(database.db)).rejects.toMatchObject({
      code: '23503',
    });
    expect(await rows(sql`select handle from agents where handle = ${x.handle}`)).toEqual([{ handle: x.handle }]);
  });

  it('the deleted agent is gone for its token, admins and senders; its handle answers 409 until retention purges what it delivered', async () => {
    const cToken = await createOrg('delc', { retention_days: 1 });
    await createOrg('deld', { retention_days: 1 });
    await createOrg('dele');
    const x = await agent('@delc.x', cToken);
    const r = await agent('@deld.r');
    const s = await agent('@dele.s');
    const attached = (await upload(x)).id as string;
    const pending = (await upload(x)).id as string;
    const toR = [
      await send(x, r.handle),
      await send(x, r.handle, {
        content_parts: [{ type: 'file', name: 'x.png', file_id: attached, mime_type: 'image/png', size: 1 }],
      }),
    ];
    const toS = await send(x, s.handle);

    expect((await op.client.delete(path(x.handle), op.adminToken)).status).toBe(204);

    expectError(await op.client.get('/agents/me', x.token), 401, 'UNAUTHORIZED', 'own token');
    expectError(await op.client.get('/mailbox', x.token), 401, 'UNAUTHORIZED', 'own mailbox');
    expectError(await op.client.get(path(x.handle), op.adminToken), 404, 'NOT_FOUND', 'operator GET');
    expectError(await op.client.get(path(x.handle), cToken), 404, 'NOT_FOUND', 'org admin GET');
    expectError(await op.client.get(`${path(x.handle)}/mailbox`, cToken), 404, 'NOT_FOUND', 'admin mailbox read');
    expectError(await op.client.delete(path(x.handle), cToken), 404, 'NOT_FOUND', 'repeated DELETE');
    expect((await op.client.get('/_admin/agents', cToken)).body.agents).toEqual([]);
    expectError(await op.client.get('/agents/delc/x', r.token), 404, 'NOT_FOUND', 'discovery');
    expectError(await op.client.post('/messages', envelope(x.handle), r.token), 404, 'NOT_FOUND', 'send to deleted');
    // r can still fetch the file of an envelope it received; the pending upload is gone.
    expect(
      (await fetch(`${op.url}/files/${attached}`, { headers: { authorization: `Bearer ${r.token}` } })).status,
    ).toBe(200);
    expect(await rows(sql`select id from files where id = ${pending}`)).toEqual([]);

    // A schedule that slipped in beside the deletion (created by a request authenticated just before
    // it) is failed at its first due tick instead of coming due forever.
    const [tomb] = await rows<{ id: number }>(
      sql`select id from agents where handle = ${x.handle} and deleted_at is not null`,
    );
    await sql`insert into schedules (id, owner_id, status, envelope, next_run_at, created_at, updated_at)
              values ('sch_race', ${tomb.id}, 'active', ${JSON.stringify({ to: [r.handle], content_parts: [{ type: 'text', text: 'x' }] })},
                      ${Date.now() - 1}, ${Date.now()}, ${Date.now()})`.execute(database.db);
    await op.app.get(SchedulesProcessor).tick();
    expect(await rows(sql`select status, last_error from schedules where id = 'sch_race'`)).toEqual([
      { status: 'failed', last_error: 'NOT_FOUND: the owner was deleted' },
    ]);
    await sql`delete from schedules where id = 'sch_race'`.execute(database.db);

    const recreate = async (token = op.adminToken) => op.client.post('/_admin/agents', { handle: x.handle }, token);
    expectError(await recreate(), 409, 'AGENT_EXISTS', 'operator re-create');
    expectError(await recreate(cToken), 409, 'AGENT_EXISTS', 'org re-create');
    // Nothing is old enough yet: retention keeps it all, and the handle stays taken.
    expect(await processor().purge()).toEqual({ entries: 0, envelopes: 0, handles: 0 });
    expectError(await recreate(), 409, 'AGENT_EXISTS', 'after a purge that kept everything');

    // Two days on, r's (1-day) mailbox lets go of both; s (keeps forever) still holds one, so the
    // handle stays taken. The deleted sender's org retention plays no part: it is gone with it.
    const later = await processor().purge(Date.now() + 2 * DAY);
    expect(later).toEqual({ entries: 2, envelopes: 2, handles: 0 });
    for (const id of toR) expectError(await op.client.get(`/messages/${id}`, r.token), 404, 'NOT_FOUND', 'purged');
    expect((await op.client.get(`/messages/${toS}`, s.token)).body.from).toBe(x.handle);
    expect(await rows(sql`select id from files where id = ${attached}`)).toEqual([]);
    expectError(await recreate(), 409, 'AGENT_EXISTS', 'while s holds one');

    // Once s's org keeps a day too, the last envelope goes and the handle is free again.
    expect((await op.client.patch('/_admin/orgs/dele', { retention_days: 1 }, op.adminToken)).status).toBe(200);
    expect(await processor().purge(Date.now() + 2 * DAY)).toEqual({ entries: 1, envelopes: 1, handles: 1 });
    const again = await recreate(cToken);
    expect(again.status).toBe(201);
    const fresh = { handle: x.handle, token: again.body.token as string };
    expect(await inbox(fresh, 'both')).toEqual([]);
    expect(await inbox(s)).toEqual([]);
  });

  it('deleting an organization deletes its agents and settings; what they delivered to other organizations stays', async () => {
    const fToken = await createOrg('delf', { retention_days: 3, content_guard: 'block' });
    await createOrg('delg');
    const p = await agent('@delf.p', fToken);
    const q = await agent('@delf.q', fToken);
    const r = await agent('@delg.r');
    const toR = [await send(p, r.handle), await send(p, r.handle), await send(p, [r.handle, q.handle])];
    await send(q, p.handle);
    const socket = await connect(op.url, { token: q.token });
    const before = await inbox(r);

    expect((await op.client.delete('/_admin/orgs/delf', op.adminToken)).status).toBe(204);
    await socket.untilClosed(5_000);
    expect(socket.closeCode).toBe(4001);

    expect(await inbox(r)).toEqual(before);
    for (const id of toR) expect((await op.client.get(`/messages/${id}`, r.token)).body.from).toBe(p.handle);
    for (const who of [p, q])
      expectError(await op.client.get('/agents/me', who.token), 401, 'UNAUTHORIZED', who.handle);
    expectError(await op.client.get('/_admin/agents', fToken), 401, 'UNAUTHORIZED', 'org admin token');
    expectError(await op.client.get('/_admin/orgs/delf', op.adminToken), 404, 'NOT_FOUND', 'org');

    // The name is free, with default settings; p's handle is held by what r keeps, q's is not
    // (q's only envelope sat in p's mailbox, which went with p).
    const again = await op.client.post('/_admin/orgs', { name: 'delf' }, op.adminToken);
    expect(again.status).toBe(201);
    expect(again.body).toMatchObject({ retention_days: null, content_guard: 'warn' });
    const token = again.body.admin_token as string;
    expectError(await op.client.post('/_admin/agents', { handle: p.handle }, token), 409, 'AGENT_EXISTS', 'p');
    expect((await op.client.post('/_admin/agents', { handle: q.handle }, token)).status).toBe(201);
    expect((await op.client.get('/_admin/agents', token)).body.agents.map((a: any) => a.handle)).toEqual([q.handle]);
  });

  it('sends in flight while their sender is deleted either fail cleanly or are kept: every 202 stays readable, no seq gap', async () => {
    await createOrg('delh');
    await createOrg('deli');
    const s = await agent('@delh.s');
    const t = await agent('@deli.t');
    // Four senders in a loop until refused; the deletion starts once ten sends were accepted, so
    // sends are in flight on every side of it.
    const sent: Array<{ id: string; status: number }> = [];
    let startDeletion: () => void = () => undefined;
    const tenAccepted = new Promise<void>((resolve) => (startDeletion = resolve));
    const sender = async (worker: number) => {
      for (let i = 0; ; i++) {
        const body = envelope((worker + i) % 4 === 0 ? [t.handle, s.handle] : t.handle);
        const reply = await op.client.post('/messages', body, s.token);
        sent.push({ id: body.id as string, status: reply.status });
        if (sent.filter((r) => r.status === 202).length >= 10) startDeletion();
        if (reply.status !== 202 || i > 500) return;
      }
    };
    const sending = [0, 1, 2, 3].map(sender);
    const deleting = tenAccepted.then(() => op.client.delete(path(s.handle), op.adminToken));
    await Promise.all(sending);
    expect((await deleting).status).toBe(204);
    expect(sent.filter((r) => r.status !== 202)).toHaveLength(4);
    expect(sent.filter((r) => ![202, 401, 404].includes(r.status))).toEqual([]);
    const accepted = sent
      .filter((r) => r.status === 202)
      .map((r) => r.id)
      .sort();
    expect((await inbox(t)).map((h) => h.id).sort()).toEqual(accepted);
    for (const id of accepted) expect((await op.client.get(`/messages/${id}`, t.token)).status).toBe(200);
    const { seqs: tSeqs, last } = await seqs(t.handle);
    expect(tSeqs).toEqual(Array.from({ length: last }, (_, i) => i + 1));
    // The handle is free exactly when nothing it sent is stored.
    const recreated = await op.client.post('/_admin/agents', { handle: s.handle }, op.adminToken);
    expect(recreated.status).toBe(accepted.length === 0 ? 201 : 409);
  });
});
