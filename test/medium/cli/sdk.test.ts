import { existsSync, mkdtempSync, readFileSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  Listener,
  RoostAdminClient,
  RoostClient,
  RoostError,
  ulid,
  type DeliveredFrame,
  type ListenerEnd,
} from '#client';
import { startOperator, type TestOperator } from '../../support/operator';

/** The SDK against a running embedded operator: every route, and the listener under forced disconnects. */

let op: TestOperator;
let admin: RoostAdminClient;

beforeAll(async () => {
  op = await startOperator();
  admin = new RoostAdminClient({ url: op.url, adminToken: op.adminToken });
});
afterAll(() => op.close());

async function agent(handle: string): Promise<RoostClient> {
  const created = await admin.createAgent(handle, { policy: 'open' });
  return new RoostClient({ url: op.url, token: created.token });
}

async function until(check: () => boolean, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(25);
  }
}

describe('SDK routes', () => {
  it('sends, lists, fetches, marks read, and pages with next_cursor until null', async () => {
    const alice = await agent('@sdk.alice');
    const bob = await agent('@sdk.bob');
    const sent = [];
    for (let i = 0; i < 5; i++)
      sent.push(
        await alice.send({ to: ['@sdk.bob'], subject: `s${i}`, content_parts: [{ type: 'text', text: `m${i}` }] }),
      );
    expect(sent[0].recipients).toEqual([{ handle: '@sdk.bob' }]);
    const paged = [];
    for await (const header of bob.headers({ limit: 2 })) paged.push(header.id);
    expect(paged).toEqual(sent.map((s) => s.id));
    expect((await bob.mailbox({ unread: true })).envelope_headers).toHaveLength(5);
    expect((await bob.message(sent[0].id)).content_parts).toEqual([{ type: 'text', text: 'm0' }]);
    expect((await bob.messages([sent[2].id, sent[1].id])).map((e) => e.id)).toEqual([sent[2].id, sent[1].id]);
    expect(await bob.markRead([sent[3].id, sent[4].id])).toEqual([sent[3].id, sent[4].id]);
    expect((await bob.mailbox({ unread: true })).envelope_headers).toHaveLength(0);
    // Idempotent retry with the same id: the original 202.
    const draft = {
      id: ulid(),
      to: ['@sdk.bob'],
      date_ms: 1,
      content_parts: [{ type: 'text' as const, text: 'once' }],
    };
    const first = await alice.send(draft);
    expect(await alice.send(draft)).toEqual(first);
  });

  it('covers receipts, status, schedules, self, allowlist, blocks, discovery, search and files', async () => {
    const carol = await agent('@sdk.carol');
    const dave = await agent('@sdk.dave');
    const { id } = await carol.send({
      to: ['@sdk.dave'],
      subject: 'deploy plan',
      content_parts: [{ type: 'text', text: 'please deploy' }],
    });
    const receipt = await dave.postReceipt(id, { status: 'accepted', note: 'on it' });
    expect(receipt).toMatchObject({ envelope_id: id, from: '@sdk.dave', status: 'accepted', note: 'on it' });
    expect((await carol.receipts(id)).map((r) => r.status)).toEqual(['accepted']);
    expect((await carol.status(id)).recipients).toEqual([
      expect.objectContaining({ handle: '@sdk.dave', read: false, status: 'accepted' }),
    ]);

    const schedule = await carol.createSchedule({
      envelope: { to: ['@sdk.dave'], content_parts: [{ type: 'text', text: 'later' }] },
      start_at: Date.now() + 3_600_000,
    });
    expect(schedule.status).toBe('active');
    expect((await carol.schedules()).map((s) => s.id)).toEqual([schedule.id]);
    expect((await carol.setScheduleStatus(schedule.id, 'paused')).status).toBe('paused');
    expect((await carol.schedule(schedule.id)).status).toBe('paused');
    expect((await carol.cancelSchedule(schedule.id)).status).toBe('cancelled');

    expect((await carol.me()).canonical_handle).toBe('@sdk.carol');
    expect((await carol.updateMe({ display_name: 'Carol', description: 'tests' })).display_name).toBe('Carol');
    expect(await carol.allow(['@sdk.*'])).toEqual(['@sdk.*']);
    expect(await carol.allowlist()).toEqual(['@sdk.*']);
    expect(await carol.disallow('@sdk.*')).toEqual([]);
    expect((await carol.block('@sdk.zed')).blocked_handle).toBe('@sdk.zed');
    expect((await carol.blocks()).blocks.map((b) => b.blocked_handle)).toEqual(['@sdk.zed']);
    expect(await carol.unblock('@sdk.zed')).toEqual({ unblocked: true });
    await admin.updateAgent('@sdk.carol', { visibility: 'public', card_body: '# Carol' });
    expect((await dave.agent('@sdk.carol')).agent.canonical_handle).toBe('@sdk.carol');
    expect(await dave.card('@sdk.carol')).toBe('# Carol');
    expect((await dave.searchAgents('carol')).agents.map((a) => a.canonical_handle)).toContain('@sdk.carol');
    expect((await dave.search('carol')).agents.length).toBeGreaterThan(0);
    expect((await dave.searchMessages('deploy')).map((m) => m.envelope_id)).toContain(id);

    const file = await carol.uploadFile(Buffer.from('hello file'), 'note.txt', 'text/plain');
    expect(file).toMatchObject({ status: 'ready', filename: 'note.txt', size_bytes: 10 });
    const withFile = await carol.send({
      to: ['@sdk.dave'],
      content_parts: [{ type: 'file', file_id: file.id, name: 'note.txt' }],
    });
    const stored = await dave.message(withFile.id);
    const url = (stored.content_parts[0] as { url: string }).url;
    expect((await dave.downloadFile(url)).bytes.toString()).toBe('hello file');
    expect((await carol.health()).ok).toBe(true);
  });

  it('administers organizations and agents, and reports errors by ASMTP code', async () => {
    const org = await admin.createOrg('sdkorg', { retention_days: 30 });
    expect(org.admin_token).toEqual(expect.any(String));
    expect((await admin.orgs()).map((o) => o.name)).toContain('sdkorg');
    expect((await admin.updateOrg('sdkorg', { content_guard: 'block' })).content_guard).toBe('block');
    expect((await admin.org('sdkorg')).retention_days).toBe(30);
    expect((await admin.rotateOrgToken('sdkorg')).admin_token).not.toBe(org.admin_token);
    const scoped = new RoostAdminClient({
      url: op.url,
      adminToken: (await admin.rotateOrgToken('sdkorg')).admin_token,
    });
    expect((await scoped.createAgent('@sdkorg.one')).token).toEqual(expect.any(String));
    await expect(scoped.createAgent('@other.one')).rejects.toMatchObject({ status: 404 });
    expect((await admin.agent('@sdkorg.one')).handle).toBe('@sdkorg.one');
    expect((await admin.agents()).map((a) => a.handle)).toContain('@sdkorg.one');
    const rotated = await admin.rotateAgentToken('@sdkorg.one');
    expect(rotated.token).toEqual(expect.any(String));
    await admin.deleteAgent('@sdkorg.one');
    await admin.deleteOrg('sdkorg');
    await expect(admin.org('sdkorg')).rejects.toMatchObject({ kind: 'api', status: 404, code: 'NOT_FOUND' });
    const stranger = new RoostClient({ url: op.url, token: 'nope' });
    const error = await stranger.me().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RoostError);
    expect(error).toMatchObject({ status: 401, code: 'UNAUTHORIZED' });
    const down = new RoostClient({ url: 'http://127.0.0.1:1', token: 'x' });
    await expect(down.me()).rejects.toMatchObject({ kind: 'unreachable' });
  });
});

describe('Listener', () => {
  /**
   * Sends `total` envelopes while the socket is dropped every few frames and the listener is
   * restarted once from its cursor file; every envelope must arrive exactly once.
   */
  async function chaos(resume: boolean, suffix: string) {
    const sender = await agent(`@sdk.sender-${suffix}`);
    const token = (await admin.createAgent(`@sdk.listener-${suffix}`, { policy: 'open' })).token;
    const cursorFile = join(mkdtempSync(join(tmpdir(), 'roost-listener-')), 'cursor.json');
    const delivered: string[] = [];
    const sources = new Set<string>();
    const make = () =>
      new Listener({
        url: op.url,
        token,
        cursor: cursorFile,
        resume,
        // Roost answers replay.complete at once; a loaded CI machine may take more than a moment.
        resumeWaitMs: resume ? 5_000 : 300,
        catchUpConfirmMs: 200,
        backoff: { baseMs: 20, maxMs: 100 },
        onFrame(frame: DeliveredFrame, source) {
          if (frame.op === 'envelope.notify') delivered.push(frame.id);
          sources.add(source);
        },
      }).start();
    // Mail waiting before the first connection: replayed (resume) or caught up (plain).
    const sent: string[] = [];
    for (let i = 0; i < 20; i++)
      sent.push(
        (await sender.send({ to: [`@sdk.listener-${suffix}`], content_parts: [{ type: 'text', text: `early ${i}` }] }))
          .id,
      );
    let listener = make();
    const total = 200;
    for (let i = 0; i < total; i++) {
      sent.push(
        (await sender.send({ to: [`@sdk.listener-${suffix}`], content_parts: [{ type: 'text', text: `n${i}` }] })).id,
      );
      if (i % 15 === 7) listener.dropConnection();
      if (i === total / 2) {
        await listener.stop();
        listener = make();
      }
    }
    await until(
      () => new Set(delivered).size >= sent.length,
      30_000,
      `${sent.length} envelopes (have ${new Set(delivered).size})`,
    );
    await sleep(300);
    await listener.stop();
    expect(delivered).toHaveLength(new Set(delivered).size);
    expect(new Set(delivered)).toEqual(new Set(sent));
    expect(statSync(cursorFile).mode & 0o777).toBe(0o600);
    return { sources, cursor: listener.cursor };
  }

  it('loses and repeats nothing across forced disconnects and a restart, with server-side resume', async () => {
    const { sources, cursor } = await chaos(true, 'resume');
    expect(sources.has('replay')).toBe(true);
    expect(sources.has('catchup')).toBe(false);
    expect(cursor).not.toBeNull();
  });

  it('loses and repeats nothing against plain ASMTP (no resume: REST catch-up)', async () => {
    const { sources } = await chaos(false, 'plain');
    expect(sources.has('catchup')).toBe(true);
    expect(sources.has('replay')).toBe(false);
  });

  it('delivers and saves nothing once stop() has resolved, with a catch-up page in flight', async () => {
    // The restart above failed 1 in ~6 runs under load: a catch-up page requested before stop()
    // came back after it and was delivered (and the cursor moved) by the stopped listener, after
    // its final save, so the next listener on the same cursor file delivered those envelopes again.
    const sender = await agent('@sdk.sender-stopping');
    const token = (await admin.createAgent('@sdk.listener-stopping', { policy: 'open' })).token;
    const sent: string[] = [];
    for (let i = 0; i < 3; i++)
      sent.push(
        (await sender.send({ to: ['@sdk.listener-stopping'], content_parts: [{ type: 'text', text: `m${i}` }] })).id,
      );
    const cursorFile = join(mkdtempSync(join(tmpdir(), 'roost-listener-')), 'cursor.json');
    const delivered: string[] = [];
    const saved = () => (existsSync(cursorFile) ? readFileSync(cursorFile, 'utf8') : null);
    const make = (onOpen?: (listener: Listener) => void): Listener => {
      const listener: Listener = new Listener({
        url: op.url,
        token,
        cursor: cursorFile,
        resume: false,
        catchUpConfirmMs: 50,
        onFrame(frame: DeliveredFrame) {
          if (frame.op === 'envelope.notify') delivered.push(frame.id);
        },
        // The socket is open and the catch-up's first page is being requested: stop right after.
        onEvent: (event) => event.type === 'open' && onOpen?.(listener),
      });
      return listener.start();
    };
    let stopping: Promise<void> | undefined;
    make((listener) =>
      setImmediate(() => {
        stopping ??= listener.stop();
      }),
    );
    await until(() => stopping !== undefined, 10_000, 'the first socket to open');
    await stopping;
    const deliveredAtStop = [...delivered];
    const savedAtStop = saved();
    await sleep(500); // the page's response, and any save it would have caused
    expect(delivered).toEqual(deliveredAtStop);
    expect(saved()).toEqual(savedAtStop);
    // The next listener on the same file delivers what the first did not, each envelope once.
    const next = make();
    await until(() => new Set(delivered).size >= sent.length, 10_000, `${sent.length} envelopes`);
    await sleep(300);
    await next.stop();
    expect(delivered).toHaveLength(new Set(delivered).size);
    expect(new Set(delivered)).toEqual(new Set(sent));
  });

  it('does not deliver again after a restart an envelope it delivered before its cursor could move', async () => {
    // Plain ASMTP (no resume) with a long catch-up confirmation: a live frame arrives while the
    // position is unsettled, so the cursor stays put; the delivered id must still be remembered.
    const sender = await agent('@sdk.sender-unsettled');
    const token = (await admin.createAgent('@sdk.listener-unsettled', { policy: 'open' })).token;
    const cursorFile = join(mkdtempSync(join(tmpdir(), 'roost-listener-')), 'cursor.json');
    const delivered: string[] = [];
    const make = () =>
      new Listener({
        url: op.url,
        token,
        cursor: cursorFile,
        resume: false,
        catchUpConfirmMs: 60_000,
        onFrame(frame: DeliveredFrame) {
          if (frame.op === 'envelope.notify') delivered.push(frame.id);
        },
      }).start();
    const events: string[] = [];
    let listener = make();
    await sleep(200);
    const { id } = await sender.send({
      to: ['@sdk.listener-unsettled'],
      content_parts: [{ type: 'text', text: 'once' }],
    });
    await until(() => delivered.includes(id), 10_000, 'the live frame');
    expect(listener.cursor).toBeNull();
    await listener.stop();
    listener = new Listener({
      url: op.url,
      token,
      cursor: cursorFile,
      resume: false,
      catchUpConfirmMs: 50,
      onFrame(frame: DeliveredFrame) {
        if (frame.op === 'envelope.notify') delivered.push(frame.id);
      },
      onEvent: (event) => events.push(event.type),
    }).start();
    await until(() => listener.cursor !== null, 10_000, 'the catch-up to settle');
    await listener.stop();
    expect(delivered).toEqual([id]);
  });

  it('stops for good when the token is revoked (4001) or refused at the handshake (401)', async () => {
    const token = (await admin.createAgent('@sdk.revoked', { policy: 'open' })).token;
    const events: string[] = [];
    const listener = new Listener({
      url: op.url,
      token,
      onFrame: () => undefined,
      onEvent: (e) => events.push(e.type),
    }).start();
    await until(() => events.includes('open'), 5000, 'open');
    await admin.rotateAgentToken('@sdk.revoked');
    const end: ListenerEnd = await listener.done;
    expect(end).toBe('revoked');
    const refused = new Listener({ url: op.url, token, onFrame: () => undefined }).start();
    expect(await refused.done).toBe('unauthorized');
  });

  it('gives up after maxAttempts when the operator is unreachable', async () => {
    const listener = new Listener({
      url: 'http://127.0.0.1:1',
      token: 'x',
      maxAttempts: 3,
      backoff: { baseMs: 5, maxMs: 10 },
      onFrame: () => undefined,
    }).start();
    expect(await listener.done).toBe('gave_up');
  });
});
