import { EventEmitter } from 'node:events';
import type { WebSocket } from 'ws';

/** A `ws` WebSocket stand-in for small gateway specs: records what was sent and how it closed. */
export class FakeSocket extends EventEmitter {
  readyState = 1;
  bufferedAmount = 0;
  /** Each frame's text (a Buffer sent as a text frame is recorded decoded). */
  readonly sent: string[] = [];
  /** Each frame's payload exactly as handed to `send`. */
  readonly payloads: Array<string | Buffer> = [];
  /** Frames sent as binary frames (`ws` sends a Buffer as binary unless told `binary: false`). */
  binaryFrames = 0;
  readonly closes: Array<[number, string]> = [];
  pings = 0;
  terminated = 0;

  send(data: string | Buffer, options?: { binary?: boolean }): void {
    this.payloads.push(data);
    this.sent.push(typeof data === 'string' ? data : data.toString('utf8'));
    if (options?.binary ?? typeof data !== 'string') this.binaryFrames++;
  }

  close(code: number, reason: string): void {
    this.closes.push([code, reason]);
    this.readyState = 2;
  }

  terminate(): void {
    this.terminated++;
    this.readyState = 3;
  }

  ping(): void {
    this.pings++;
  }

  get ws(): WebSocket {
    return this as unknown as WebSocket;
  }
}
