import { createServer, type Server, type Socket } from 'node:net';
import { acceptFor, openRawWebSocket, type RawWebSocket } from '../../bench/raw-socket';
import { envelope, startOperator, type TestAgent, type TestOperator } from '../support/operator';
import { until } from '../support/until';

/** The fan-out bench's light listener (ROOST_BENCH_LISTENER=raw) against a real gateway. */
describe('bench raw WebSocket listener', () => {
  let operator: TestOperator;
  let agents: Record<'sender' | 'reader', TestAgent>;
  let url: string;

  beforeAll(async () => {
    // Pings every 100 ms: a client that did not answer them would be cut off after two.
    operator = await startOperator({ env: { ROOST_WS_PING_INTERVAL_MS: '100' } });
    agents = await operator.agents('rawws', 'sender', 'reader');
    url = `${operator.url.replace('http:', 'ws:')}/connect`;
  });
  afterAll(() => operator.close());

  function record(ws: RawWebSocket) {
    const seen = { messages: [] as Buffer[], pings: 0, close: undefined as [number, string] | undefined };
    ws.on('message', (data: Buffer) => seen.messages.push(data));
    ws.on('ping', () => seen.pings++);
    ws.on('close', (code: number, reason: string) => (seen.close = [code, reason]));
    return seen;
  }

  const open = async (token: string) => {
    let seen: ReturnType<typeof record> | undefined;
    const ws = await openRawWebSocket(url, { authorization: `Bearer ${token}` }, (w) => (seen = record(w)));
    return { ws, seen: seen! };
  };

  it('parses the gateway frames: small, 16-bit and 64-bit lengths, in order; answers pings; closes cleanly', async () => {
    const { ws, seen } = await open(agents.reader.token);
    const subjects = ['small', 's'.repeat(1_000), 'l'.repeat(70_000)];
    const ids: string[] = [];
    for (const subject of subjects) {
      const body = envelope(agents.reader.handle, { subject });
      const reply = await operator.client.post('/messages', body, agents.sender.token);
      expect(reply.status).toBe(202);
      ids.push(body.id as string);
    }
    await until(() => seen.messages.length >= 3, 5_000, 'three notify frames');
    const frames = seen.messages.map((data) => JSON.parse(data.toString()));
    expect(frames.map((f) => f.op)).toEqual(['envelope.notify', 'envelope.notify', 'envelope.notify']);
    expect(frames.map((f) => f.id)).toEqual(ids);
    expect(frames.map((f) => f.subject)).toEqual(subjects);
    expect(seen.messages[2].length).toBeGreaterThan(65_535);

    // Several pings answered (masked pongs): the gateway closes a socket after two unanswered ones.
    await until(() => seen.pings >= 4, 5_000, 'four pings');
    expect(seen.close).toBeUndefined();

    ws.close(1000, 'done');
    await until(() => seen.close !== undefined, 5_000, 'the close handshake');
    expect(seen.close![0]).toBe(1000);
  });

  it('a refused upgrade rejects with its status', async () => {
    await expect(openRawWebSocket(url, { authorization: 'Bearer nope' })).rejects.toThrow('/connect refused: 401');
  });
});

/** What a hand-made server sends that the gateway never does: fragments, pings between them. */
describe('bench raw WebSocket listener, frame by frame', () => {
  let server: Server;
  let peer: Socket;
  let received: Buffer = Buffer.alloc(0);
  let port = 0;

  beforeAll(async () => {
    server = createServer((socket) => {
      socket.once('data', (request) => {
        const key = /sec-websocket-key: (\S+)/i.exec(request.toString())![1];
        socket.write(
          `HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
            `Sec-WebSocket-Accept: ${acceptFor(key)}\r\n\r\n`,
        );
        socket.on('data', (chunk) => (received = Buffer.concat([received, chunk])));
        peer = socket;
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as { port: number }).port;
  });
  afterAll(() => new Promise((resolve) => server.close(resolve)));

  /** An unmasked server frame. */
  function frame(fin: boolean, opcode: number, payload: Buffer, lengthBytes: 0 | 2 | 8 = 0): Buffer {
    const head = Buffer.alloc(2 + lengthBytes);
    head[0] = (fin ? 0x80 : 0) | opcode;
    if (lengthBytes === 0) head[1] = payload.length;
    else if (lengthBytes === 2) {
      head[1] = 126;
      head.writeUInt16BE(payload.length, 2);
    } else {
      head[1] = 127;
      head.writeBigUInt64BE(BigInt(payload.length), 2);
    }
    return Buffer.concat([head, payload]);
  }

  /** The client frames received so far, unmasked. */
  function clientFrames(): Array<{ opcode: number; masked: boolean; payload: Buffer }> {
    const out = [];
    let offset = 0;
    while (offset + 6 <= received.length) {
      const opcode = received[offset] & 0x0f;
      const masked = (received[offset + 1] & 0x80) !== 0;
      const length = received[offset + 1] & 0x7f; // control frames: < 126
      const mask = received.subarray(offset + 2, offset + 6);
      const payload = Buffer.from(received.subarray(offset + 6, offset + 6 + length));
      for (let i = 0; i < payload.length; i++) payload[i] ^= mask[i & 3];
      out.push({ opcode, masked, payload });
      offset += 6 + length;
    }
    return out;
  }

  it('joins fragments around a ping, reads a 64-bit length split over writes, pongs masked, echoes the close', async () => {
    const messages: string[] = [];
    let closed: [number, string] | undefined;
    await openRawWebSocket(`ws://127.0.0.1:${port}/connect`, {}, (ws) => {
      ws.on('message', (data: Buffer) => messages.push(data.toString()));
      ws.on('close', (code: number, reason: string) => (closed = [code, reason]));
    });
    await until(() => peer !== undefined, 5_000, 'the server side');
    // A fragmented text message with a ping between its fragments.
    peer.write(
      Buffer.concat([
        frame(false, 0x1, Buffer.from('hel')),
        frame(false, 0x0, Buffer.from('lo ')),
        frame(true, 0x9, Buffer.from('p1')),
        frame(true, 0x0, Buffer.from('world')),
      ]),
    );
    // A 64-bit length frame, written in three pieces (header split too).
    const big = frame(true, 0x1, Buffer.alloc(70_000, 'x'), 8);
    peer.write(big.subarray(0, 5));
    await new Promise((resolve) => setTimeout(resolve, 20));
    peer.write(big.subarray(5, 40_000));
    await new Promise((resolve) => setTimeout(resolve, 20));
    peer.write(big.subarray(40_000));
    // A 16-bit length frame.
    peer.write(frame(true, 0x1, Buffer.alloc(300, 'y'), 2));
    await until(() => messages.length === 3, 5_000, 'three messages');
    expect(messages[0]).toBe('hello world');
    expect(messages[1]).toBe('x'.repeat(70_000));
    expect(messages[2]).toBe('y'.repeat(300));
    await until(() => clientFrames().length >= 1, 5_000, 'the pong');
    expect(clientFrames()[0]).toEqual({ opcode: 0xa, masked: true, payload: Buffer.from('p1') });

    const code = Buffer.alloc(2);
    code.writeUInt16BE(4001);
    peer.write(frame(true, 0x8, Buffer.concat([code, Buffer.from('bye')])));
    await until(() => closed !== undefined && clientFrames().length >= 2, 5_000, 'the close handshake');
    expect(closed).toEqual([4001, 'bye']);
    expect(clientFrames()[1]).toEqual({ opcode: 0x8, masked: true, payload: code });
  });
});
