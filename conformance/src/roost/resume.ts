import { caps } from '../caps';
import { eq, Failure, ok } from '../assert';
import type { Agent, T } from '../runner';
import { compareKeys } from '../util';
import { refusal, type Socket } from '../ws';
import { envelope, ORIGIN } from '../wire';
import { roost } from './quirks';

/** EXTENSIONS.md §1: server-side resume on the WebSocket. */

const resumeQuery = (cursor: { created_at: number; envelope_id: string }) => ({
  after_created_at: String(cursor.created_at),
  after_envelope_id: cursor.envelope_id,
});

/** Frames strictly increasing by (created_at, id), each envelope once. */
function expectInOrder(frames: any[], what: string): void {
  const seen = new Set<string>();
  for (let i = 0; i < frames.length; i++) {
    if (seen.has(frames[i].id)) throw new Failure(`${what}: ${frames[i].id} arrived twice`);
    seen.add(frames[i].id);
    if (i > 0 && compareKeys(frames[i - 1], frames[i]) >= 0)
      throw new Failure(`${what}: frame ${i} (${frames[i].id}) is not after frame ${i - 1}`);
  }
}

const resumeTest = (id: string, title: string, run: (t: T) => Promise<void>, options: { exclusive?: boolean } = {}) =>
  roost(
    id,
    title,
    async (t) => {
      await t.need(caps.resume(t.run));
      await run(t);
    },
    options,
  );

async function sendN(t: T, from: Agent, to: Agent, n: number) {
  const out = [];
  for (let i = 0; i < n; i++) out.push(await t.sent(from, envelope(to.handle, { subject: `r${i}` })));
  return out;
}

const completes = (socket: Socket) => socket.frames.filter((f) => f.op === 'replay.complete');

resumeTest(
  'resume.replay',
  '/connect with a cursor replays the in feed after it in order, then replay.complete {cursor, replayed}, then live frames',
  async (t) => {
    const { alice, bob } = await t.agents('alice', 'bob');
    const sent = await sendN(t, alice, bob, 5);
    const rows = (await t.http.get('/mailbox', bob.token)).body.envelope_headers as any[];
    const cursor = { created_at: rows[1].created_at, envelope_id: rows[1].id };
    const socket = await t.connect(bob, { query: resumeQuery(cursor) });
    await socket.until(() => completes(socket).length > 0, t.options.frameTimeoutMs, 'replay.complete');
    const beforeComplete = socket.frames.slice(
      0,
      socket.frames.findIndex((f) => f.op === 'replay.complete'),
    );
    eq(
      beforeComplete.map((f) => f.id),
      rows.slice(2).map((r) => r.id),
      'the replayed headers',
    );
    eq(beforeComplete, rows.slice(2), 'replayed frames equal the listing rows');
    const last = rows[rows.length - 1];
    eq(
      completes(socket)[0],
      { op: 'replay.complete', cursor: { created_at: last.created_at, envelope_id: last.id }, replayed: 3 },
      'replay.complete',
    );
    const live = await t.sent(alice, envelope(bob.handle));
    await socket.notifyOf(live.id, t.options.frameTimeoutMs);
    await t.quiet();
    eq(
      socket.notifies.map((f) => f.id),
      [...sent.slice(2).map((s) => s.id), live.id],
      'every frame once',
    );
    eq(completes(socket).length, 1, 'replay.complete frames');
  },
);

resumeTest(
  'resume.up-to-date',
  'a cursor at the newest entry replays nothing: replay.complete {cursor:null, replayed:0}',
  async (t) => {
    const { alice, bob } = await t.agents('alice', 'bob');
    const [newest] = (await sendN(t, alice, bob, 2)).slice(-1);
    const socket = await t.connect(bob, {
      query: resumeQuery({ created_at: newest.created_at, envelope_id: newest.id }),
    });
    await socket.until(() => completes(socket).length > 0, t.options.frameTimeoutMs, 'replay.complete');
    eq(socket.frames[0], { op: 'replay.complete', cursor: null, replayed: 0 }, 'the first frame');
  },
);

resumeTest(
  'resume.seam',
  'envelopes accepted while a resume is replaying arrive exactly once, in order: no gap and no duplicate at the seam',
  async (t) => {
    const { alice, carol, bob } = await t.agents('alice', 'carol', 'bob');
    const before = await Promise.all(
      Array.from({ length: 40 }, (_, i) => t.sent(i % 2 ? alice : carol, envelope(bob.handle))),
    );
    const connecting = t.connect(bob, { query: resumeQuery(ORIGIN) });
    const during = await Promise.all(
      Array.from({ length: 20 }, (_, i) => t.sent(i % 2 ? alice : carol, envelope(bob.handle))),
    );
    const socket = await connecting;
    const after = await Promise.all(Array.from({ length: 5 }, () => t.sent(alice, envelope(bob.handle))));
    const all = [...before, ...during, ...after];
    await socket.until(
      () => all.every((a) => socket.notifiesFor(a.id).length > 0),
      t.options.frameTimeoutMs * 2,
      `all ${all.length} envelopes`,
    );
    await t.quiet();
    expectInOrder(socket.notifies, 'the resumed socket');
    eq(socket.notifies.length, all.length, 'frames');
    eq(completes(socket).length, 1, 'replay.complete frames');
  },
);

resumeTest(
  'resume.validation',
  'the resume pair is validated like GET /mailbox: one without the other → 400 INVALID_QUERY, a bad id → 400 INVALID_ENVELOPE_ID, before the upgrade',
  async (t) => {
    const bob = await t.agent('bob');
    const one = await refusal(
      t.options.url,
      { token: bob.token, query: { after_created_at: '0' } },
      'after_created_at alone',
    );
    eq([one.status, one.body?.error?.code], [400, 'INVALID_QUERY'], 'after_created_at alone');
    const other = await refusal(
      t.options.url,
      { token: bob.token, query: { after_envelope_id: ORIGIN.envelope_id } },
      'after_envelope_id alone',
    );
    eq([other.status, other.body?.error?.code], [400, 'INVALID_QUERY'], 'after_envelope_id alone');
    const bad = await refusal(
      t.options.url,
      { token: bob.token, query: { after_created_at: '0', after_envelope_id: 'nope' } },
      'a bad id',
    );
    eq([bad.status, bad.body?.error?.code], [400, 'INVALID_ENVELOPE_ID'], 'a bad id');
    const unauth = await refusal(t.options.url, { query: resumeQuery(ORIGIN) }, 'no bearer');
    eq(unauth.status, 401, 'no bearer, with a cursor');
  },
);

resumeTest(
  'resume.slow-consumer',
  'a consumer that stops reading is disconnected (4008, or cut off) and loses nothing when it resumes from its cursor',
  async (t) => {
    const { alice, bob } = await t.agents('alice', 'bob');
    const socket = await t.listen(bob, { query: resumeQuery(ORIGIN) });
    await socket.until(() => completes(socket).length > 0, t.options.frameTimeoutMs, 'replay.complete');
    const tcp = (socket.ws as unknown as { _socket: { pause(): void; resume(): void } })._socket;
    tcp.pause();
    // Header frames carry the subject: ~900 KB each. 60 of them (54 MB), past any socket and proxy
    // buffering: with 30 (27 MB), the kernel's autotuned buffers of a client behind a proxy (two
    // loopback connections, up to ~6 MB received and ~4 MB sent on each socket) once absorbed them
    // all, and the server never saw a slow consumer (a CI run of test/e2e/conformance.test.ts).
    const subject = 'x'.repeat(900_000);
    const ids: string[] = [];
    const createdAt = new Map<string, number>();
    for (let i = 0; i < 60; i++) {
      const sent = await t.sent(alice, envelope(bob.handle, { subject }));
      ids.push(sent.id);
      createdAt.set(sent.id, sent.created_at);
    }
    const cursorOf = (id: string) => ({ created_at: createdAt.get(id)!, envelope_id: id });
    await t.quiet(2_000);
    tcp.resume();
    await socket.until(() => socket.closeCode !== undefined, 20_000, 'the server to disconnect the slow consumer');
    ok(
      socket.closeCode === 4008 || socket.closeCode === 1006,
      `close code ${socket.closeCode} (${socket.closeReason}), expected 4008 (or 1006 when cut off)`,
    );
    const got = socket.notifies.filter((f) => ids.includes(f.id));
    ok(got.length < ids.length, 'the slow consumer got everything: nothing was exercised');
    // Resume from the last frame seen, as a client does, until a replay completes.
    const seen = got.map((f) => f.id as string);
    const cutOff: Array<number | undefined> = [];
    for (let attempt = 0; ; attempt++) {
      if (attempt >= 10)
        throw new Failure(`10 resumes did not complete a replay (${seen.length} of ${ids.length} envelopes seen)`);
      const position = seen.length > 0 ? cursorOf(seen[seen.length - 1]) : ORIGIN;
      const again = await t.connect(bob, { query: resumeQuery(position) }, `resumed #${attempt + 1}`);
      await again.until(
        () => completes(again).length > 0 || again.closeCode !== undefined,
        t.options.frameTimeoutMs * 2,
        'replay.complete or a close after resuming',
      );
      seen.push(...again.notifies.map((f) => f.id as string));
      if (completes(again).length > 0) {
        if (attempt > 0)
          t.note(
            `resuming a backlog of large headers was itself cut off (closes ${cutOff.join(', ')}): ${attempt + 1} resumes to complete it`,
          );
        break;
      }
      cutOff.push(again.closeCode);
    }
    eq(seen, ids, 'what the consumer saw across its sockets');
  },
  { exclusive: true },
);

roost('resume.cursor-expired', 'a cursor older than what retention kept gets cursor.expired first', async (t) => {
  t.skip(
    'not observable black-box within a run: needs entries purged by retention (days old); covered by test/medium/retention.test.ts',
  );
});

roost('ws.drain-and-ping', 'gateways ping every 25 s and close with 1012 on drain (SIGTERM)', async (t) => {
  t.skip('not observable black-box: needs 50 s of silence or a SIGTERM to the gateway; covered by test/e2e');
});
