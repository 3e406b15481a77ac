import { createHash, randomBytes } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { connect, type Socket } from 'node:net';

const ACCEPT_GUID = '258EAFA5-E914-47DA-95CA-C5AB0DC85B11';
const OP_CONTINUATION = 0x0;
const OP_TEXT = 0x1;
const OP_BINARY = 0x2;
const OP_CLOSE = 0x8;
const OP_PING = 0x9;
const OP_PONG = 0xa;

/** RFC 6455 §4.2.2: the `Sec-WebSocket-Accept` a server must answer to `key`. */
export function acceptFor(key: string): string {
  return createHash('sha1')
    .update(key + ACCEPT_GUID)
    .digest('base64');
}

/** A masked client frame (RFC 6455 §5.3): every frame a client sends is masked. */
export function clientFrame(opcode: number, payload: Buffer): Buffer {
  const length = payload.length;
  const head = length < 126 ? 2 : length < 65_536 ? 4 : 10;
  const frame = Buffer.allocUnsafe(head + 4 + length);
  frame[0] = 0x80 | opcode;
  if (head === 2) frame[1] = 0x80 | length;
  else if (head === 4) {
    frame[1] = 0x80 | 126;
    frame.writeUInt16BE(length, 2);
  } else {
    frame[1] = 0x80 | 127;
    frame.writeBigUInt64BE(BigInt(length), 2);
  }
  const mask = randomBytes(4);
  mask.copy(frame, head);
  for (let i = 0; i < length; i++) frame[head + 4 + i] = payload[i] ^ mask[i & 3];
  return frame;
}

/**
 * A light WebSocket client (RFC 6455) over a plain `net.Socket`, for bench listeners: the `ws`
 * client's per-message work on the same cores as the gateways capped the measured fan-out. It reads
 * unmasked server frames (7/16/64-bit lengths, fragmented messages, control frames between
 * fragments), answers pings with masked pongs, and completes the close handshake. No extensions,
 * no UTF-8 validation (the bench reads ids at fixed offsets). Events: `message` (Buffer), `ping`
 * (Buffer), `close` (code, reason).
 */
export class RawWebSocket extends EventEmitter {
  private pending: Buffer | undefined;
  private fragments: Buffer[] = [];
  private closeSent = false;
  private closed = false;

  constructor(private readonly socket: Socket) {
    super();
    socket.on('data', (chunk: Buffer) => this.read(chunk));
    socket.on('close', () => this.finish(1006, ''));
    socket.on('error', () => undefined);
  }

  /** Start the close handshake; the socket ends once the server answers. */
  close(code = 1000, reason = ''): void {
    if (this.closeSent || this.closed) return;
    this.closeSent = true;
    const payload = Buffer.alloc(2 + Buffer.byteLength(reason));
    payload.writeUInt16BE(code, 0);
    payload.write(reason, 2);
    this.socket.write(clientFrame(OP_CLOSE, payload));
  }

  /** Send a text message (masked). */
  send(text: string): void {
    if (!this.closed) this.socket.write(clientFrame(OP_TEXT, Buffer.from(text)));
  }

  terminate(): void {
    this.socket.destroy();
  }

  /** Bytes received (the handshake's leftover included). */
  read(chunk: Buffer): void {
    const data = this.pending ? Buffer.concat([this.pending, chunk]) : chunk;
    this.pending = undefined;
    let offset = 0;
    while (!this.closed) {
      const available = data.length - offset;
      if (available < 2) break;
      const b0 = data[offset];
      const b1 = data[offset + 1];
      if (b1 & 0x80) return this.fail(1002, 'masked server frame');
      let length = b1 & 0x7f;
      let head = 2;
      if (length === 126) {
        if (available < 4) break;
        length = data.readUInt16BE(offset + 2);
        head = 4;
      } else if (length === 127) {
        if (available < 10) break;
        const big = data.readBigUInt64BE(offset + 2);
        if (big > BigInt(Number.MAX_SAFE_INTEGER)) return this.fail(1009, 'frame too large');
        length = Number(big);
        head = 10;
      }
      if (available < head + length) break;
      const payload = data.subarray(offset + head, offset + head + length);
      offset += head + length;
      this.frame((b0 & 0x80) !== 0, b0 & 0x0f, payload);
    }
    if (offset < data.length && !this.closed) this.pending = data.subarray(offset);
  }

  private frame(fin: boolean, opcode: number, payload: Buffer): void {
    switch (opcode) {
      case OP_TEXT:
      case OP_BINARY:
        if (this.fragments.length > 0) return this.fail(1002, 'new message inside a fragmented one');
        if (fin) this.emit('message', payload);
        else this.fragments.push(payload);
        return;
      case OP_CONTINUATION:
        if (this.fragments.length === 0) return this.fail(1002, 'continuation without a message');
        this.fragments.push(payload);
        if (fin) {
          const message = Buffer.concat(this.fragments);
          this.fragments = [];
          this.emit('message', message);
        }
        return;
      case OP_PING:
        if (!this.closeSent) this.socket.write(clientFrame(OP_PONG, payload));
        this.emit('ping', payload);
        return;
      case OP_PONG:
        return;
      case OP_CLOSE: {
        const code = payload.length >= 2 ? payload.readUInt16BE(0) : 1005;
        const reason = payload.length > 2 ? payload.toString('utf8', 2) : '';
        // Echo the code (RFC 6455 §5.5.1) unless this side started the handshake; then end.
        if (!this.closeSent) {
          this.closeSent = true;
          this.socket.write(clientFrame(OP_CLOSE, payload.length >= 2 ? payload.subarray(0, 2) : Buffer.alloc(0)));
        }
        this.socket.end();
        this.finish(code, reason);
        return;
      }
      default:
        this.fail(1002, `unknown opcode ${opcode}`);
    }
  }

  private fail(code: number, reason: string): void {
    this.close(code, reason);
    this.socket.end();
    this.finish(code, reason);
  }

  private finish(code: number, reason: string): void {
    if (this.closed) return;
    this.closed = true;
    this.emit('close', code, reason);
  }
}

/**
 * Open a raw client WebSocket to `url` (`ws://host:port/path`) with `headers`: resolves once the
 * server answered 101 with the right `Sec-WebSocket-Accept`; rejects with `/connect refused: <status>`
 * on any other answer. `setup` adds listeners before the first frame is read.
 */
export function openRawWebSocket(
  url: string,
  headers: Record<string, string> = {},
  setup?: (ws: RawWebSocket) => void,
): Promise<RawWebSocket> {
  const target = new URL(url);
  if (target.protocol !== 'ws:') throw new Error(`only ws:// URLs: ${url}`);
  const key = randomBytes(16).toString('base64');
  return new Promise((resolve, reject) => {
    const socket = connect({ host: target.hostname, port: Number(target.port || 80) });
    socket.setNoDelay(true);
    let head = Buffer.alloc(0);
    const failed = (error: Error) => {
      socket.destroy();
      reject(error);
    };
    const onData = (chunk: Buffer) => {
      head = Buffer.concat([head, chunk]);
      const end = head.indexOf('\r\n\r\n');
      if (end < 0) {
        if (head.length > 16_384) failed(new Error('upgrade response headers too long'));
        return;
      }
      socket.removeListener('data', onData);
      socket.removeListener('error', failed);
      const lines = head.toString('latin1', 0, end).split('\r\n');
      const status = Number(lines[0].split(' ')[1]);
      if (status !== 101) return failed(new Error(`/connect refused: ${status}`));
      const fields = new Map<string, string>();
      for (const line of lines.slice(1)) {
        const colon = line.indexOf(':');
        if (colon > 0) fields.set(line.slice(0, colon).trim().toLowerCase(), line.slice(colon + 1).trim());
      }
      if (fields.get('upgrade')?.toLowerCase() !== 'websocket')
        return failed(new Error('upgrade response without Upgrade: websocket'));
      if (fields.get('sec-websocket-accept') !== acceptFor(key))
        return failed(new Error('upgrade response with a wrong Sec-WebSocket-Accept'));
      const ws = new RawWebSocket(socket);
      // Listeners first: frames the server sent right behind the 101 may be in this same chunk.
      setup?.(ws);
      if (end + 4 < head.length) ws.read(head.subarray(end + 4));
      resolve(ws);
    };
    socket.on('data', onData);
    socket.once('error', failed);
    socket.once('connect', () => {
      const extra = Object.entries(headers)
        .map(([name, value]) => `${name}: ${value}\r\n`)
        .join('');
      socket.write(
        `GET ${target.pathname}${target.search} HTTP/1.1\r\nHost: ${target.host}\r\nUpgrade: websocket\r\n` +
          `Connection: Upgrade\r\nSec-WebSocket-Key: ${key}\r\nSec-WebSocket-Version: 13\r\n${extra}\r\n`,
      );
    });
  });
}
