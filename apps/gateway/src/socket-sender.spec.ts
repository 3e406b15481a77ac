import WebSocket from 'ws';
import { CLOSE_CODES } from '#domain';
import { Metrics } from '#metrics';
import { FakeSocket } from '../../../test/support/fake-socket';
import { Connection } from './connection';
import { PACED_WAIT_MS, SocketSender, textFrame } from './socket-sender';

/** `ws`'s own framing of a server text frame (no mask, no compression). */
const wsFrame = (text: string) =>
  Buffer.concat(
    (WebSocket as unknown as { Sender: { frame(data: Buffer, options: object): Buffer[] } }).Sender.frame(
      Buffer.from(text),
      { fin: true, opcode: 1, mask: false, readOnly: true, rsv1: false },
    ),
  );

const counter = async (
  metric: { get(): Promise<{ values: Array<{ value: number; labels: Record<string, unknown> }> }> },
  labels: Record<string, string> = {},
) => (await metric.get()).values.find((v) => Object.entries(labels).every(([k, l]) => v.labels[k] === l))?.value ?? 0;

function setup(maxBufferedBytes = 1_000) {
  const socket = new FakeSocket();
  const connection = new Connection(socket.ws, 1, 'hash');
  const metrics = new Metrics();
  const debug = jest.fn();
  let clock = 0;
  const sender = new SocketSender(metrics, { debug }, maxBufferedBytes, () => clock);
  return { socket, connection, metrics, debug, sender, advance: (ms: number) => (clock += ms) };
}

describe('SocketSender', () => {
  it('sends live frames and counts them by kind', async () => {
    const { socket, connection, metrics, sender } = setup();
    sender.send(connection, 'a', 'notify');
    sender.send(connection, 'b', 'monitor');
    expect(socket.sent).toEqual(['a', 'b']);
    expect(await counter(metrics.framesSent, { kind: 'notify' })).toBe(1);
  });

  it("encodes an envelope's frame once: every recipient's socket gets the same bytes, as a text frame", () => {
    const { socket, connection, sender } = setup();
    const other = new FakeSocket();
    const header = JSON.stringify({ op: 'envelope.notify', subject: 'héllo' });
    sender.send(connection, header, 'notify');
    sender.send(new Connection(other.ws, 2, 'hash'), `${header}`, 'notify');
    sender.send(connection, 'next', 'notify');
    expect(socket.sent).toEqual([header, 'next']);
    expect(other.sent).toEqual([header]);
    const [mine, theirs] = [socket.payloads[0] as Buffer, other.payloads[0] as Buffer];
    expect(Buffer.isBuffer(mine)).toBe(true);
    // The very same bytes in memory, not an equal copy.
    expect([theirs.buffer, theirs.byteOffset, theirs.length]).toEqual([mine.buffer, mine.byteOffset, mine.length]);
    expect([socket.binaryFrames, other.binaryFrames]).toEqual([0, 0]);
  });

  it("frames each of several interleaved envelopes' headers once (one bus read mixes its partitions' entries)", () => {
    const { socket, connection, sender } = setup();
    const other = new FakeSocket();
    const second = new Connection(other.ws, 2, 'hash');
    const framing = jest.spyOn(Buffer, 'allocUnsafe');
    for (const text of ['A', 'B', 'A', 'B']) {
      sender.send(connection, text, 'notify');
      sender.send(second, text, 'notify');
    }
    expect(framing).toHaveBeenCalledTimes(2);
    framing.mockRestore();
    expect(socket.sent).toEqual(['A', 'B', 'A', 'B']);
    expect(other.sent).toEqual(['A', 'B', 'A', 'B']);
  });

  it('frames text exactly as ws does, at every length encoding', () => {
    for (const length of [0, 1, 125, 126, 127, 65_535, 65_536, 70_000]) {
      const text = 'x'.repeat(length);
      expect(textFrame(text).equals(wsFrame(text))).toBe(true);
    }
    const utf8 = `{"subject":"${'é'.repeat(63)}"}`; // 140 bytes in 77 characters
    expect(textFrame(utf8).equals(wsFrame(utf8))).toBe(true);
  });

  it('closes a socket whose buffer passed the bound as a slow consumer (4008), once', async () => {
    const { socket, connection, metrics, debug, sender } = setup(1_000);
    socket.bufferedAmount = 1_001;
    sender.send(connection, 'a', 'notify');
    sender.send(connection, 'b', 'notify'); // closed: not sent
    expect(socket.sent).toEqual(['a']);
    expect(socket.closes).toEqual([[CLOSE_CODES.slowConsumer, 'slow consumer, resume from cursor']]);
    expect(connection.closed).toBe(true);
    expect(await counter(metrics.slowConsumerCloses)).toBe(1);
    expect(await counter(metrics.wsClosed, { reason: 'slow_consumer' })).toBe(1);
    expect(debug).toHaveBeenCalledWith(expect.stringContaining('1001 bytes unsent, bound 1000'));
  });

  it('a paced send waits while the buffer is above a quarter of the bound, then sends', async () => {
    const { socket, connection, sender } = setup(1_000);
    socket.bufferedAmount = 251;
    const sent = sender.sendPaced(connection, 'r', 'replay');
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(socket.sent).toEqual([]);
    socket.bufferedAmount = 250;
    await expect(sent).resolves.toBe(true);
    expect(socket.sent).toEqual(['r']);
  });

  it('paced frames go out in one write on the raw stream, as many as fit in a quarter of the bound', async () => {
    const { socket, connection, sender, metrics } = setup(1_000);
    const writes: Buffer[] = [];
    Object.assign(socket, { extensions: '', _socket: { write: (chunk: Buffer) => writes.push(chunk) } });
    const texts = ['a'.repeat(30), 'b'.repeat(30), 'c'.repeat(30), 'd'.repeat(30)];
    await expect(sender.sendPacedSome(connection, texts, 0, 'notify')).resolves.toBe(4);
    expect(writes).toEqual([Buffer.concat(texts.map(wsFrame))]);
    expect(socket.sent).toEqual([]);
    expect(await counter(metrics.framesSent, { kind: 'notify' })).toBe(4);
    // 50 bytes of room under the quarter (250): two 32-byte frames, the second crossing it.
    socket.bufferedAmount = 200;
    await expect(sender.sendPacedSome(connection, texts, 1, 'notify')).resolves.toBe(2);
    expect(writes[1]).toEqual(Buffer.concat([wsFrame(texts[1]), wsFrame(texts[2])]));
    connection.closed = true;
    await expect(sender.sendPacedSome(connection, texts, 3, 'notify')).resolves.toBe(0);
    expect(writes).toHaveLength(2);
  });

  it('a paced send closes a reader that made no progress for PACED_WAIT_MS (4008)', async () => {
    const { socket, connection, sender, advance } = setup(1_000);
    socket.bufferedAmount = 900;
    const sent = sender.sendPaced(connection, 'r', 'replay');
    advance(PACED_WAIT_MS + 1);
    await expect(sent).resolves.toBe(false);
    expect(socket.closes).toEqual([[CLOSE_CODES.slowConsumer, 'slow consumer, resume from cursor']]);
    expect(socket.sent).toEqual([]);
  });

  it('sends nothing to a closed socket', async () => {
    const { socket, connection, sender } = setup();
    sender.close(connection, CLOSE_CODES.revoked, 'token revoked', 'revoked');
    sender.send(connection, 'a', 'notify');
    await expect(sender.sendPaced(connection, 'b', 'replay')).resolves.toBe(false);
    expect(socket.sent).toEqual([]);
    expect(socket.closes).toEqual([[4001, 'token revoked']]);
  });

  it('cuts off a socket that missed two pongs, pings the others', async () => {
    const { socket, connection, metrics, sender } = setup();
    const quiet = new FakeSocket();
    const silent = new Connection(quiet.ws, 2, 'hash');
    silent.missedPongs = 2;
    sender.ping([connection, silent]);
    expect([socket.pings, socket.terminated, connection.missedPongs]).toEqual([1, 0, 1]);
    expect([quiet.pings, quiet.terminated]).toEqual([0, 1]);
    expect(await counter(metrics.wsClosed, { reason: 'ping_timeout' })).toBe(1);
  });
});
