import WebSocket from 'ws';
import { responseViolations } from '#schemas';
import { Failure, show } from './assert';

export interface ConnectOptions {
  /** Sent as `Authorization: Bearer …` unless `tokenInQuery`. */
  token?: string;
  tokenInQuery?: boolean;
  query?: Record<string, string>;
  path?: string;
  headers?: Record<string, string>;
}

/** An upgrade the server refused with a plain HTTP response (ASMTP.md §6.1). */
export interface Refusal {
  status: number;
  body: any;
  text: string;
  headers: Record<string, string | string[] | undefined>;
}

const CONTROL_OPS = new Set(['replay.complete', 'cursor.expired']);

/**
 * One `/connect` socket that records every frame. Frames are checked as they arrive: header frames
 * against the `header` wire schema, monitor facts against `monitor-fact`; Roost control frames
 * (`replay.complete`, `cursor.expired`) are legal only on a socket that asked to resume. A problem
 * is recorded (never thrown from the event handler) and fails the test when it ends.
 */
export class Socket {
  readonly frames: any[] = [];
  readonly raw: string[] = [];
  readonly violations: string[] = [];
  closeCode: number | undefined;
  closeReason = '';
  closedAt: number | undefined;
  private waiters: Array<() => void> = [];

  constructor(
    readonly ws: WebSocket,
    readonly label: string,
    private readonly resuming: boolean,
  ) {
    ws.on('message', (data, isBinary) => {
      const text = (data as Buffer).toString(); // binaryType is the default nodebuffer
      if (isBinary) this.violations.push(`${label}: binary frame from the server`);
      let frame: any;
      try {
        frame = JSON.parse(text);
      } catch {
        this.violations.push(`${label}: a frame that is not JSON: ${show(text, 120)}`);
        return;
      }
      this.validate(frame, text);
      this.raw.push(text);
      this.frames.push(frame);
      this.wake();
    });
    ws.on('close', (code, reason) => {
      this.closeCode = code;
      this.closeReason = reason.toString();
      this.closedAt = Date.now();
      this.wake();
    });
    ws.on('error', () => undefined);
  }

  private validate(frame: any, text: string): void {
    if (frame === null || typeof frame !== 'object' || Array.isArray(frame)) {
      this.violations.push(`${this.label}: a frame that is not a JSON object: ${show(text, 120)}`);
      return;
    }
    const schema = frame.op === 'envelope.notify' ? 'header' : frame.op === 'monitor.fact' ? 'monitor-fact' : undefined;
    if (schema) {
      const violations = responseViolations(schema, frame);
      if (violations.length > 0)
        this.violations.push(
          `${this.label}: ${frame.op} frame violates ${schema}: ${violations.slice(0, 2).join('; ')} — ${show(text, 200)}`,
        );
      return;
    }
    if (CONTROL_OPS.has(frame.op)) {
      if (!this.resuming)
        this.violations.push(
          `${this.label}: ${frame.op} on a socket that did not ask to resume (extensions must be opt-in)`,
        );
      return;
    }
    this.violations.push(`${this.label}: unknown frame op ${show(frame.op)}: ${show(text, 120)}`);
  }

  private wake(): void {
    const waiters = this.waiters;
    this.waiters = [];
    for (const waiter of waiters) waiter();
  }

  get open(): boolean {
    return this.ws.readyState === WebSocket.OPEN;
  }

  /** `envelope.notify` frames. */
  get notifies(): any[] {
    return this.frames.filter((frame) => frame.op === 'envelope.notify');
  }

  get facts(): any[] {
    return this.frames.filter((frame) => frame.op === 'monitor.fact');
  }

  notifiesFor(id: string): any[] {
    return this.notifies.filter((frame) => frame.id === id);
  }

  /** Wait until `predicate()` holds (re-checked on every frame and on close); Failure on timeout. */
  async until(predicate: () => boolean, timeoutMs: number, what: string): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!predicate()) {
      const left = deadline - Date.now();
      if (left <= 0) {
        throw new Failure(
          `${this.label}: timed out after ${timeoutMs} ms waiting for ${what} (${this.frames.length} frames${this.closeCode !== undefined ? `, closed ${this.closeCode}` : ''})`,
        );
      }
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, Math.min(left, 200));
        this.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }

  /** Wait for one `envelope.notify` of `id`. */
  async notifyOf(id: string, timeoutMs: number): Promise<any> {
    await this.until(() => this.notifiesFor(id).length > 0, timeoutMs, `the envelope.notify of ${id}`);
    return this.notifiesFor(id)[0];
  }

  send(data: string | Buffer): void {
    this.ws.send(data);
  }

  /** Close without a handshake (a vanished client). */
  terminate(): void {
    this.ws.terminate();
  }
}

function target(baseUrl: string, options: ConnectOptions): string {
  const url = new URL(baseUrl.replace(/^http/, 'ws') + (options.path ?? '/connect'));
  for (const [key, value] of Object.entries(options.query ?? {})) url.searchParams.set(key, value);
  if (options.tokenInQuery && options.token !== undefined) url.searchParams.set('token', options.token);
  return url.toString();
}

/** Open a socket; rejects with a `Refusal` (plain HTTP answer) or a transport error. */
export function connect(baseUrl: string, options: ConnectOptions = {}, label = 'socket'): Promise<Socket> {
  const headers: Record<string, string> = { ...options.headers };
  if (!options.tokenInQuery && options.token !== undefined) headers.authorization = `Bearer ${options.token}`;
  const resuming = options.query?.after_created_at !== undefined || options.query?.after_envelope_id !== undefined;
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(target(baseUrl, options), { headers, perMessageDeflate: false, handshakeTimeout: 15_000 });
    const socket = new Socket(ws, label, resuming);
    ws.once('open', () => resolve(socket));
    ws.once('unexpected-response', (request, response) => {
      const chunks: Buffer[] = [];
      // A refusal whose body never ends is reported with what arrived.
      const timer = setTimeout(() => {
        request.destroy();
        response.emit('end');
      }, 10_000);
      response.on('error', () => undefined);
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.once('end', () => {
        clearTimeout(timer);
        const text = Buffer.concat(chunks).toString('utf8');
        let body: unknown = text;
        try {
          body = JSON.parse(text);
        } catch {
          // not JSON
        }
        reject(
          Object.assign(new Error(`upgrade refused: ${response.statusCode}`), {
            status: response.statusCode ?? 0,
            body,
            text,
            headers: response.headers,
          }),
        );
      });
    });
    ws.once('error', (error) => reject(error));
  });
}

/** The refusal of an upgrade that must fail; Failure if it was accepted. */
export async function refusal(baseUrl: string, options: ConnectOptions, what: string): Promise<Refusal> {
  try {
    const socket = await connect(baseUrl, options);
    socket.terminate();
  } catch (error) {
    if ((error as Partial<Refusal>).status !== undefined) return error as Refusal;
    throw new Failure(`${what}: the upgrade failed without an HTTP answer (${(error as Error).message})`);
  }
  throw new Failure(`${what}: the upgrade was accepted (101), expected a refusal`);
}
