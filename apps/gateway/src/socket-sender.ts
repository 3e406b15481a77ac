import type { Logger } from '@nestjs/common';
import { CLOSE_CODES, type CloseCode } from '#domain';
import type { Metrics } from '#metrics';
import type { Connection } from './connection';

/** How long a replay or backfill waits for a reader that makes no progress. */
export const PACED_WAIT_MS = 30_000;
const OPEN = 1;
const TEXT_FRAME = { binary: false } as const;

/**
 * Frames onto sockets, and sockets closed: the send-buffer bound (4008 slow consumer), pings, and
 * the metrics of both. Where a frame goes and in what order is the caller's business.
 */
export class SocketSender {
  /**
   * The bytes of the last frame text sent. An envelope's header frame is the same text for every
   * recipient (the bus delivers one string per stream entry), so a fan-out encodes it once and
   * hands the same Buffer to every socket (`ws` never writes into a server frame's payload) instead
   * of each send measuring and encoding the string again.
   */
  private lastText: string | undefined;
  private lastBytes: Buffer = Buffer.alloc(0);

  constructor(
    private readonly metrics: Metrics,
    private readonly logger: Pick<Logger, 'debug'>,
    private readonly maxBufferedBytes: number,
    private readonly now: () => number = Date.now,
  ) {}

  /** Send a live frame; a socket whose buffer is past its bound is closed as a slow consumer. */
  send(connection: Connection, text: string, kind: string): void {
    if (connection.closed || connection.ws.readyState !== OPEN) return;
    if (text !== this.lastText) {
      this.lastText = text;
      this.lastBytes = Buffer.from(text);
    }
    // Binary would be the default for a Buffer: the frame stays a text frame.
    connection.ws.send(this.lastBytes, TEXT_FRAME);
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
    const low = this.maxBufferedBytes / 4;
    const deadline = this.now() + PACED_WAIT_MS;
    while (!connection.closed && connection.ws.bufferedAmount > low) {
      if (this.now() > deadline) {
        this.close(connection, CLOSE_CODES.slowConsumer, 'slow consumer, resume from cursor', 'slow_consumer');
        return false;
      }
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    if (connection.closed || connection.ws.readyState !== OPEN) return false;
    connection.ws.send(text);
    this.metrics.framesSent.inc({ kind });
    return true;
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
