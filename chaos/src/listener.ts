import WebSocket from 'ws';
import type { Cursor } from '#domain';
import { responseViolations } from '#schemas';
import { ORIGIN } from '../../test/e2e/cluster';
import { type Random, sleep } from './util';

const before = (a: Cursor, b: Cursor) =>
  a.created_at < b.created_at || (a.created_at === b.created_at && a.envelope_id < b.envelope_id);

/**
 * One recipient's resuming listener: always connects with its last `(created_at, envelope_id)`
 * (EXTENSIONS.md §1) to a random gateway and, whenever its socket closes for any reason, reconnects
 * (to a random gateway again) after a short pause. It never gives up until stopped, and records
 * every `envelope.notify` id it receives.
 */
export class ChaosListener {
  readonly counts = new Map<string, number>();
  cursor: Cursor = ORIGIN;
  connections = 0;
  failedConnects = 0;
  replayCompletes = 0;
  cursorExpired = 0;
  /** Frames at or before the cursor when they arrived. */
  outOfOrder = 0;
  /** Frames that broke their wire schema (first few kept). */
  readonly violations: string[] = [];
  violationCount = 0;
  readonly closeCodes = new Map<number, number>();
  private ws: WebSocket | undefined;
  private stopped = false;
  private loop: Promise<void> | undefined;
  private wake: (() => void) | undefined;

  constructor(
    readonly handle: string,
    private readonly token: string,
    private readonly gateways: () => string[],
    private readonly random: Random,
  ) {}

  get duplicates(): number {
    let extra = 0;
    for (const count of this.counts.values()) extra += count - 1;
    return extra;
  }

  get connected(): boolean {
    return this.ws?.readyState === WebSocket.OPEN;
  }

  start(): void {
    this.loop = this.run();
  }

  /** Close the current socket (the loop reconnects with the cursor, like after any fault). */
  reconnect(): void {
    this.ws?.terminate();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.ws?.terminate();
    this.wake?.();
    await this.loop;
  }

  private async run(): Promise<void> {
    while (!this.stopped) {
      const url = this.random.pick(this.gateways());
      try {
        await this.session(url);
      } catch {
        this.failedConnects++;
      }
      if (!this.stopped) await sleep(this.random.between(50, 400));
    }
  }

  /** One socket, from connect to close. Rejects when the upgrade fails. */
  private session(base: string): Promise<void> {
    const url = new URL('/connect', base.replace(/^http/, 'ws'));
    url.searchParams.set('after_created_at', String(this.cursor.created_at));
    url.searchParams.set('after_envelope_id', this.cursor.envelope_id);
    return new Promise((resolve, reject) => {
      const ws = new WebSocket(url, {
        headers: { authorization: `Bearer ${this.token}` },
        handshakeTimeout: 10_000,
        perMessageDeflate: false,
      });
      this.ws = ws;
      let opened = false;
      this.wake = () => resolve();
      ws.on('open', () => {
        opened = true;
        this.connections++;
      });
      ws.on('message', (data) => this.onFrame((data as Buffer).toString()));
      ws.on('error', () => undefined);
      ws.on('unexpected-response', (_request, response) => {
        response.resume();
        ws.terminate();
      });
      ws.on('close', (code) => {
        if (opened) {
          this.closeCodes.set(code, (this.closeCodes.get(code) ?? 0) + 1);
          resolve();
        } else reject(new Error(`connect failed (${code})`));
      });
    });
  }

  private onFrame(text: string): void {
    let frame: any;
    try {
      frame = JSON.parse(text);
    } catch {
      this.violation(`not JSON: ${text.slice(0, 200)}`);
      return;
    }
    if (frame.op === 'replay.complete') this.replayCompletes++;
    if (frame.op === 'cursor.expired') this.cursorExpired++;
    if (frame.op !== 'envelope.notify') return;
    const problems = responseViolations('header', frame);
    if (problems.length > 0) this.violation(`header frame: ${problems.join('; ')}`);
    const position = { created_at: frame.created_at as number, envelope_id: frame.id as string };
    if (before(this.cursor, position)) this.cursor = position;
    else this.outOfOrder++;
    this.counts.set(frame.id, (this.counts.get(frame.id) ?? 0) + 1);
  }

  private violation(message: string): void {
    this.violationCount++;
    if (this.violations.length < 5) this.violations.push(message);
  }
}
