import { Metrics } from '#metrics';
import { FakeSocket } from '../../../test/support/fake-socket';
import { Connection } from './connection';
import { PAGE, Replayer } from './replay';
import { SocketSender, textFrame } from './socket-sender';

interface Row {
  seq: number;
  created_at: number;
  envelope_id: string;
  header: string;
}

/** A mailbox whose entries are `seqs` (gaps are entries retention removed). */
function mailboxOf(seqs: number[], purged?: { created_at: number; envelope_id: string }) {
  const rows: Row[] = seqs.map((seq) => ({
    seq,
    created_at: 1_000 + seq,
    envelope_id: `01E${String(seq).padStart(4, '0')}`,
    header: `h${seq}`,
  }));
  const reads: Array<[number, number | null]> = [];
  const mailbox = {
    entriesBySeq: async (_id: number, after: number, through: number | null, limit: number) => {
      reads.push([after, through]);
      return rows.filter((r) => r.seq > after && (through === null || r.seq <= through)).slice(0, limit);
    },
    lastSeqs: async () => new Map([[1, rows.at(-1)?.seq ?? 0]]),
    seqAtOrBefore: async (_id: number, cursor: { created_at: number }) =>
      rows.filter((r) => r.created_at <= cursor.created_at).at(-1)?.seq ?? 0,
  };
  const retention = {
    mark: async () => purged,
    oldestEntry: async () =>
      rows[0] ? { created_at: rows[0].created_at, envelope_id: rows[0].envelope_id } : undefined,
  };
  return { mailbox, retention, reads };
}

function setup(seqs: number[], purged?: { created_at: number; envelope_id: string }, framesPerSecond = 0) {
  const socket = new FakeSocket();
  const connection = new Connection(socket.ws, 1, 'hash');
  const metrics = new Metrics();
  const sender = new SocketSender(metrics, { debug: () => undefined }, 1_000_000);
  const { mailbox, retention, reads } = mailboxOf(seqs, purged);
  const replayer = new Replayer(mailbox, retention, sender, metrics, framesPerSecond);
  const frames = () => socket.sent.map((text) => (text.startsWith('{') ? JSON.parse(text) : text));
  return { socket, connection, metrics, replayer, reads, frames };
}

describe('Replayer.replay (EXTENSIONS.md §1)', () => {
  it('sends every entry after the cursor in seq order, then replay.complete with the last cursor and count', async () => {
    const { connection, replayer, frames, metrics } = setup([1, 2, 3, 5]);
    await replayer.replay(connection, { created_at: 1_002, envelope_id: '01E0002' });
    expect(frames()).toEqual([
      'h3',
      'h5',
      { op: 'replay.complete', cursor: { created_at: 1_005, envelope_id: '01E0005' }, replayed: 2 },
    ]);
    expect(connection.lastSeq).toBe(5);
    expect((await metrics.replayedFrames.get()).values[0].value).toBe(2);
  });

  it('a cursor after everything replays nothing: replay.complete with cursor null', async () => {
    const { connection, replayer, frames } = setup([1, 2]);
    await replayer.replay(connection, { created_at: 9_999, envelope_id: '01Z' });
    expect(frames()).toEqual([{ op: 'replay.complete', cursor: null, replayed: 0 }]);
    expect(connection.lastSeq).toBe(2);
  });

  it('a cursor older than what retention kept first gets cursor.expired with the oldest entry', async () => {
    const { connection, replayer, frames } = setup([4, 5], { created_at: 1_003, envelope_id: '01E0003' });
    await replayer.replay(connection, { created_at: 1_001, envelope_id: '01E0001' });
    expect(frames()[0]).toEqual({ op: 'cursor.expired', oldest: { created_at: 1_004, envelope_id: '01E0004' } });
    expect(frames().slice(1, 3)).toEqual(['h4', 'h5']);
  });

  it('a cursor at the purge mark is not expired', async () => {
    const { connection, replayer, frames } = setup([4], { created_at: 1_003, envelope_id: '01E0003' });
    await replayer.replay(connection, { created_at: 1_003, envelope_id: '01E0003' });
    expect(frames()[0]).toBe('h4');
  });

  it('stops at a socket closed mid-replay, without replay.complete', async () => {
    const { socket, connection, replayer } = setup([1, 2, 3]);
    const send = socket.send.bind(socket);
    socket.send = (text: string) => {
      send(text);
      connection.closed = true;
    };
    await replayer.replay(connection, { created_at: 0, envelope_id: '0' });
    expect(socket.sent).toEqual(['h1']);
  });
});

describe('Replayer.backfill', () => {
  it('fills a gap page by page through the given seq and skips numbers with no entry left', async () => {
    const seqs = Array.from({ length: PAGE + 10 }, (_, i) => i + 1).filter((seq) => seq !== 7);
    const { connection, replayer, socket, reads, metrics } = setup(seqs);
    connection.lastSeq = 2;
    await replayer.backfill(connection, PAGE + 5, 'gap');
    expect(socket.sent[0]).toBe('h3');
    expect(socket.sent).not.toContain('h7');
    expect(socket.sent.at(-1)).toBe(`h${PAGE + 5}`);
    expect(socket.sent).toHaveLength(PAGE + 2);
    expect(reads).toEqual([
      [2, PAGE + 5],
      [PAGE + 3, PAGE + 5],
    ]);
    expect(connection.lastSeq).toBe(PAGE + 5);
    expect((await metrics.backfills.get()).values.find((v) => v.labels.cause === 'gap')?.value).toBe(1);
  });

  it("writes a page's frames to the socket's stream in one write", async () => {
    const { connection, replayer, socket } = setup([1, 2, 3, 4]);
    const writes: Buffer[] = [];
    Object.assign(socket, { extensions: '', _socket: { write: (chunk: Buffer) => writes.push(chunk) } });
    connection.lastSeq = 1;
    await replayer.backfill(connection, 4, 'sweep');
    expect(writes).toEqual([Buffer.concat(['h2', 'h3', 'h4'].map(textFrame))]);
    expect(connection.lastSeq).toBe(4);
  });

  it('entries purged by retention are skipped for good', async () => {
    const { connection, replayer, socket } = setup([10]);
    connection.lastSeq = 2;
    await replayer.backfill(connection, 8, 'sweep');
    expect(socket.sent).toEqual([]);
    expect(connection.lastSeq).toBe(8);
  });
});
