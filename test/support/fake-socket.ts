import { EventEmitter } from 'node:events';
import type { WebSocket } from 'ws';

/** A `ws` WebSocket stand-in for small gateway specs: records what was sent and how it closed. */
export class FakeSocket extends EventEmitter {
  readyState = 1;
  bufferedAmount = 0;
  readonly sent: string[] = [];
  readonly closes: Array<[number, string]> = [];
  pings = 0;
  terminated = 0;

  send(text: string): void {
    this.sent.push(text);
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
