import type { Cursor } from '#domain';
import { connect, type Listener } from '../support/ws';
import { Cluster, mailboxHeaders, sendBurst, type TestAgent } from './cluster';

/**
 * Push across a cluster (DESIGN.md, Fan-out; EXTENSIONS.md §1): 2 api + 2 gateway processes on one
 * Postgres and one Redis. Any api's commit reaches any gateway's sockets; every socket of an agent
 * gets each envelope once; a resuming socket gets the backlog after its cursor from Postgres, then
 * `replay.complete`, then live frames, with no gap and no duplicate at the seam.
 */

// `testTimeout` in a jest project entry is ignored (it is a global option): set it here.
jest.setTimeout(180_000);

let cluster: Cluster;
let senders: TestAgent[];

beforeAll(async () => {
  cluster = await Cluster.start({ api: 2, gateway: 2 });
  senders = await Promise.all(['@pc.s1', '@pc.s2', '@pc.s3', '@pc.s4'].map((handle) => cluster.agent(handle)));
});

afterAll(async () => {
  await cluster?.close();
});

const notifyIds = (listener: Listener): string[] => listener.notifies.map((frame) => frame.id as string);

function countOf(ids: string[]): Map<string, number> {
  const counts = new Map<string, number>();
  for (const id of ids) counts.set(id, (counts.get(id) ?? 0) + 1);
  return counts;
}

/** Frames on one socket follow mailbox order: strictly increasing `(created_at, id)`. */
function inOrder(frames: any[]): boolean {
  for (let i = 1; i < frames.length; i++) {
    const [a, b] = [frames[i - 1], frames[i]];
    if (!(a.created_at < b.created_at || (a.created_at === b.created_at && a.id < b.id))) return false;
  }
  return true;
}

test('an agent on gateway B gets every envelope accepted by api A and by api B, once, in order', async () => {
  const bob = await cluster.agent('@pc.bob');
  const socket = await connect(cluster.gateways[1].url, { token: bob.token });
  try {
    const report = await sendBurst(cluster, senders, bob.handle, 300, 8);
    expect(report.refused.size).toBe(0);
    const byApi = [0, 1].map((api) => report.accepted.filter((a) => a.api === api).length);
    expect(byApi[0]).toBeGreaterThan(0);
    expect(byApi[1]).toBeGreaterThan(0);

    const sent = new Set(report.accepted.map((a) => a.id));
    await socket.until(() => socket.notifies.length >= sent.size, 20_000, `${sent.size} notifies`);
    const seen = countOf(notifyIds(socket));
    expect([...sent].filter((id) => !seen.has(id))).toEqual([]);
    expect([...seen.values()].filter((count) => count > 1)).toEqual([]);
    expect(seen.size).toBe(sent.size);
    expect(inOrder(socket.notifies)).toBe(true);
    console.log(
      `push-cluster fan-out: sent ${sent.size} (api A ${byApi[0]}, api B ${byApi[1]}), gateway B socket saw ${socket.notifies.length}, distinct ${seen.size}`,
    );
  } finally {
    socket.close();
  }
});

test('several sockets of one agent on different gateways each get every envelope exactly once', async () => {
  const carol = await cluster.agent('@pc.carol');
  const sockets = await Promise.all([0, 1, 0, 1].map((g) => connect(cluster.gateways[g].url, { token: carol.token })));
  try {
    const report = await sendBurst(cluster, senders, carol.handle, 300, 8);
    expect(report.refused.size).toBe(0);
    const sent = new Set(report.accepted.map((a) => a.id));
    for (const socket of sockets) {
      await socket.until(() => socket.notifies.length >= sent.size, 20_000, `${sent.size} notifies`);
    }
    // Late duplicates would arrive after the last expected frame: give them a moment.
    await new Promise((resolve) => setTimeout(resolve, 500));
    const counts = sockets.map((socket) => {
      const seen = countOf(notifyIds(socket));
      expect([...sent].filter((id) => !seen.has(id))).toEqual([]);
      expect(socket.notifies.length).toBe(sent.size);
      expect(seen.size).toBe(sent.size);
      expect(inOrder(socket.notifies)).toBe(true);
      return socket.notifies.length;
    });
    console.log(
      `push-cluster multi-socket: sent ${sent.size}, per socket (gw A, gw B, gw A, gw B) ${counts.join(', ')}`,
    );
  } finally {
    for (const socket of sockets) socket.close();
  }
});

test('resume from a cursor in the middle of 2,000 offline envelopes while 500 more arrive live', async () => {
  const dave = await cluster.agent('@pc.dave');
  const started = Date.now();
  const backlog = await sendBurst(cluster, senders, dave.handle, 2_000, 16);
  expect(backlog.refused.size).toBe(0);
  expect(backlog.accepted.length).toBe(2_000);
  const backlogMs = Date.now() - started;

  const first = await cluster.clients[0].get('/mailbox?order=asc&limit=1000', dave.token);
  expect(first.status).toBe(200);
  const cursor = first.body.next_cursor as Cursor;
  expect(cursor.envelope_id).toBe(first.body.envelope_headers[999].id);

  // Live sends start with the connect, so some commit during the replay and some after it.
  const live = sendBurst(cluster, senders, dave.handle, 500, 4);
  const socket = await connect(cluster.gateways[1].url, {
    token: dave.token,
    query: { after_created_at: String(cursor.created_at), after_envelope_id: cursor.envelope_id },
  });
  try {
    const liveReport = await live;
    expect(liveReport.refused.size).toBe(0);
    const expected = await mailboxHeaders(cluster.clients[1], dave.token, cursor);
    expect(expected.length).toBe(1_000 + 500);
    const all = new Set([...backlog.accepted, ...liveReport.accepted].map((a) => a.id));
    expect(expected.every((header) => all.has(header.id))).toBe(true);

    await socket.until(() => socket.notifies.length >= expected.length, 30_000, `${expected.length} notifies`);
    await new Promise((resolve) => setTimeout(resolve, 300));

    // Exactly the mailbox after the cursor, in (created_at, envelope_id) order, each once.
    expect(notifyIds(socket)).toEqual(expected.map((header) => header.id));
    expect(socket.notifies.map((frame) => frame.created_at)).toEqual(expected.map((header) => header.created_at));

    // One replay.complete, after the whole backlog and before the live frames.
    const completes = socket.frames.filter((frame) => frame.op === 'replay.complete');
    expect(completes).toHaveLength(1);
    const seam = socket.frames.indexOf(completes[0]);
    const replayed = socket.frames.slice(0, seam).filter((frame) => frame.op === 'envelope.notify');
    const afterSeam = socket.frames.slice(seam + 1).filter((frame) => frame.op === 'envelope.notify');
    expect(completes[0].replayed).toBe(replayed.length);
    expect(replayed.length).toBeGreaterThanOrEqual(1_000);
    const backlogIds = new Set(backlog.accepted.map((a) => a.id));
    expect(afterSeam.every((frame) => !backlogIds.has(frame.id))).toBe(true);
    const last = replayed[replayed.length - 1];
    expect(completes[0].cursor).toEqual({ created_at: last.created_at, envelope_id: last.id });
    expect(afterSeam.length).toBeGreaterThan(0);

    console.log(
      `push-cluster resume: backlog 2000 sent in ${backlogMs} ms, cursor at #1000, live 500; socket saw ${socket.notifies.length} ` +
        `(replayed ${replayed.length} before replay.complete, ${afterSeam.length} live after), expected ${expected.length}, ` +
        `duplicates ${socket.notifies.length - new Set(notifyIds(socket)).size}`,
    );
  } finally {
    socket.close();
  }
});
