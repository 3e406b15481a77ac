import type { Logger } from '@nestjs/common';
import { CLOSE_CODES, type CloseCode } from '#domain';
import type { Metrics } from '#metrics';
import type { Duplex } from 'node:stream';
import type { WebSocket } from 'ws';
import type { Connection } from './connection';

/** How long a replay or backfill waits for a reader that makes no progress. */
export const PACED_WAIT_MS = 30_000;
const OPEN = 1;
const TEXT_FRAME = { binary: false } as const;
/** Frame texts kept encoded (a few envelopes' headers; see `SocketSender.frames`). */
const FRAME_CACHE_SIZE = 64;

/**
 * `text` as one unmasked, unfragmented WebSocket text frame (RFC 6455 §5.2), byte for byte what
 * `ws` writes for `send(text)` on a server socket without permessage-deflate.
 */
export function textFrame(text: string): Buffer {
  const length = Buffer.byteLength(text);
  const head = length < 126 ? 2 : length < 65_536 ? 4 : 10;
  const frame = Buffer.allocUnsafe(head + length);
  frame[0] = 0x81; // FIN, opcode 1 (text)
  if (head === 2) frame[1] = length;
  else if (head === 4) {
    frame[1] = 126;
    frame.writeUInt16BE(length, 2);
  } else {
    frame[1] = 127;
    frame.writeUInt32BE(0, 2);
    frame.writeUInt32BE(length, 6);
  }
  frame.write(text, head, 'utf8');
  return frame;
}

/**
 * Write a complete frame: straight onto the socket's TCP stream (one write, no per-send framing,
 * cork or writev) when `ws` adds nothing to it: no extension negotiated (the gateway turns
 * permessage-deflate off), so `ws`'s sender never holds frames back and writes each one to that
 * same stream in order. Otherwise (and for the specs' stand-in socket) through `ws.send`.
 * `ws.bufferedAmount` counts the bytes either way: it is the stream's buffered length.
 */
function writeFrame(ws: WebSocket, frame: Buffer): void {
  const stream = rawStream(ws);
  if (stream) stream.write(frame);
  else ws.send(payloadOf(frame), TEXT_FRAME);
}

/** Several complete frames in order: one write on the raw stream, else one `ws.send` each. */
function writeFrames(ws: WebSocket, frames: readonly Buffer[]): void {
  const stream = rawStream(ws);
  if (stream) stream.write(frames.length === 1 ? frames[0] : Buffer.concat(frames));
  else for (const frame of frames) ws.send(payloadOf(frame), TEXT_FRAME);
}

/** The socket's TCP stream when `ws` adds nothing to a frame (see `writeFrame`). */
function rawStream(ws: WebSocket): Duplex | undefined {
  const stream = (ws as unknown as { _socket?: Duplex })._socket;
  return stream && ws.extensions === '' ? stream : undefined;
}

/** The payload of a frame made by `textFrame`. */
function payloadOf(frame: Buffer): Buffer {
  return frame.subarray(frame[1] === 126 ? 4 : frame[1] === 127 ? 10 : 2);
}

/**
 * Frames onto sockets, and sockets closed: the send-buffer bound (4008 slow consumer), pings, and
 * the metrics of both. Where a frame goes and in what order is the caller's business.
 */
export class SocketSender {
  /**
   * Recently sent frame texts, each as one complete WebSocket text frame. An envelope's header frame
   * is the same text for every recipient, so a fan-out encodes and frames it once and writes the
   * same bytes to every socket. Several texts, not only the last: one bus read interleaves the
   * envelopes of its partitions (A, B, A, B …), and the bus hands every frame of an envelope the same
   * string, so a hit is mostly a pointer comparison. Cleared when full; a miss only costs a framing.
   */
  private readonly frames = new Map<string, Buffer>();

  constructor(
    private readonly metrics: Metrics,
    private readonly logger: Pick<Logger, 'debug'>,
    private readonly maxBufferedBytes: number,
    private readonly now: () => number = Date.now,
  ) {}

  /** Send a live frame; a socket whose buffer is past its bound is closed as a slow consumer. */
  send(connection: Connection, text: string, kind: string): void {
    if (connection.closed || connection.ws.readyState !== OPEN) return;
    let frame = this.frames.get(text);
    if (frame === undefined) {
      if (this.frames.size >= FRAME_CACHE_SIZE) this.frames.clear();
      this.frames.set(text, (frame = textFrame(text)));
    }
    writeFrame(connection.ws, frame);
    this.metrics.framesSent.inc({ kind });
    if (connection.ws.bufferedAmount > this.maxBufferedBytes) {
      this.close(connection, CLOSE_CODES.slowConsumer, 'slow consumer, resume from cursor', 'slow_consumer');
    }
  }

  /**
   * Send a frame read from Postgres (replay, backfill): wait while the socket's buffer is above a
   * quarter of its bound instead of closing it as a slow consumer. Only a reader that makes no
   * progress for PACED_WAIT_MS is closed (4008). False when the socket is gone.
   */
  async sendPaced(connection: Connection, text: string, kind: string): Promise<boolean> {
    if (!(await this.room(connection))) return false;
    connection.ws.send(text);
    this.metrics.framesSent.inc({ kind });
    return true;
  }

  /**
   * `sendPaced` for several frames (a backfill page): once the buffer is down to a quarter of its
   * bound, the frames from `texts[from]` on that fit in the room left (at least one) go out in one
   * socket write, so the buffer never exceeds that quarter by more than one frame, as with one
   * `sendPaced` per frame. Returns how many were sent; 0 when the socket is gone.
   */
  async sendPacedSome(connection: Connection, texts: readonly string[], from: number, kind: string): Promise<number> {
    if (from >= texts.length || !(await this.room(connection))) return 0;
    const room = this.maxBufferedBytes / 4 - connection.ws.bufferedAmount;
    const frames: Buffer[] = [];
    let bytes = 0;
    do {
      const frame = textFrame(texts[from + frames.length]);
      frames.push(frame);
      bytes += frame.length;
    } while (from + frames.length < texts.length && bytes < room);
    writeFrames(connection.ws, frames);
    this.metrics.framesSent.inc({ kind }, frames.length);
    return frames.length;
  }

  /**
   * Wait while the socket's buffer is above a quarter of its bound; a reader that makes no progress
   * for PACED_WAIT_MS is closed (4008). False when the socket is gone.
   */
  private async room(connection: Connection): Promise<boolean> {
    const low = this.maxBufferedBytes / 4;
    const deadline = this.now() + PACED_WAIT_MS;
    while (!connection.closed && connection.ws.bufferedAmount > low) {
      if (this.now() > deadline) {
        this.close(connection, CLOSE_CODES.slowConsumer, 'slow consumer, resume from cursor', 'slow_consumer');
        return false;
      }
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    return !connection.closed && connection.ws.readyState === OPEN;
  }

  /** Ping every socket; one that missed two pongs in a row is cut off. */
  ping(connections: Iterable<Connection>): void {
    for (const connection of connections) {
      if (connection.missedPongs >= 2) {
        this.metrics.wsClosed.inc({ reason: 'ping_timeout' });
        connection.ws.terminate();
        continue;
      }
      connection.missedPongs++;
      if (connection.ws.readyState === OPEN) connection.ws.ping();
    }
  }

  /** Close once (later calls do nothing), counted under `metric`. */
  close(connection: Connection, code: CloseCode, reason: string, metric: string): void {
    if (connection.closed) return;
    connection.closed = true;
    this.metrics.wsClosed.inc({ reason: metric });
    if (code === CLOSE_CODES.slowConsumer) {
      this.metrics.slowConsumerCloses.inc();
      this.logger.debug(
        `socket closed 4008 (slow consumer): ${connection.ws.bufferedAmount} bytes unsent, bound ${this.maxBufferedBytes}`,
      );
    }
    try {
      connection.ws.close(code, reason);
    } catch {
      connection.ws.terminate();
    }
    // A peer that never answers the close handshake is cut off.
    setTimeout(() => connection.ws.terminate(), 2_000).unref();
  }
}
