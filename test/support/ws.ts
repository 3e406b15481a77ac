import WebSocket from 'ws';
import { responseViolations } from '#schemas';

export interface Refusal {
  status: number;
  body: any;
  headers: Record<string, string | string[] | undefined>;
}

export interface ConnectOptions {
  /** Sent as `Authorization: Bearer …` unless `header: false`. */
  token?: string;
  /** Put the token in `?token=` instead of the header. */
  tokenInQuery?: boolean;
  query?: Record<string, string>;
  path?: string;
  headers?: Record<string, string>;
  /** `false`: never answer server pings (a dead peer). */
  autoPong?: boolean;
}

/**
 * A `/connect` client for tests that records every frame (parsed) and the close. Header frames are
 * checked against the `header` wire schema and monitor facts against `monitor-fact`.
 */
export class Listener {
  readonly frames: any[] = [];
  readonly raw: string[] = [];
  /** Frames that broke their wire schema; `until` fails once there is one. */
  readonly violations: string[] = [];
  /** Status of the upgrade response (101 when accepted). */
  upgradeStatus: number | undefined;
  closeCode: number | undefined;
  closeReason = '';
  /** `Date.now()` when the close was observed. */
  closedAt: number | undefined;
  private waiters: Array<() => void> = [];

  constructor(readonly ws: WebSocket) {
    ws.on('message', (data, isBinary) => {
      const text = (data as Buffer).toString();
      // Every frame the gateway sends is JSON text (a frame sent from a shared Buffer, too).
      if (isBinary) this.violations.push(`binary frame, not text: ${text}`);
      const frame = JSON.parse(text);
      const schema =
        frame.op === 'envelope.notify' ? 'header' : frame.op === 'monitor.fact' ? 'monitor-fact' : undefined;
      if (schema) {
        const violations = responseViolations(schema, frame);
        // Thrown from a socket event this would crash the run; recorded, it fails the next `until`.
        if (violations.length > 0) this.violations.push(`frame violates ${schema}: ${violations.join('; ')}\n${text}`);
      }
      this.raw.push(text);
      this.frames.push(frame);
      this.notify();
    });
    ws.on('close', (code, reason) => {
      this.closeCode = code;
      this.closeReason = reason.toString();
      this.closedAt = Date.now();
      this.notify();
    });
    ws.on('upgrade', (response) => (this.upgradeStatus = response.statusCode));
    ws.on('error', () => undefined);
  }

  private notify(): void {
    const waiters = this.waiters;
    this.waiters = [];
    for (const waiter of waiters) waiter();
  }

  /** Frames with `op: envelope.notify`. */
  get notifies(): any[] {
    return this.frames.filter((frame) => frame.op === 'envelope.notify');
  }

  /** Ids of the `envelope.notify` frames, in arrival order. */
  get ids(): string[] {
    return this.notifies.map((frame) => frame.id as string);
  }

  /** Wait until `predicate()` holds (re-checked on every frame and on close). */
  async until(predicate: () => boolean, timeoutMs = 5_000, what = 'condition'): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      if (this.violations.length > 0) throw new Error(this.violations.join('\n'));
      if (predicate()) return;
      const left = deadline - Date.now();
      if (left <= 0)
        throw new Error(
          `timed out after ${timeoutMs} ms waiting for ${what}; ${this.frames.length} frames, close ${this.closeCode}`,
        );
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, Math.min(left, 250));
        this.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }

  untilClosed(timeoutMs = 5_000): Promise<void> {
    return this.until(() => this.closeCode !== undefined, timeoutMs, 'close');
  }

  close(): void {
    this.ws.terminate();
  }
}

function target(baseUrl: string, options: ConnectOptions): string {
  const url = new URL(options.path ?? '/connect', baseUrl.replace(/^http/, 'ws'));
  for (const [key, value] of Object.entries(options.query ?? {})) url.searchParams.set(key, value);
  if (options.tokenInQuery && options.token !== undefined) url.searchParams.set('token', options.token);
  return url.toString();
}

function headersOf(options: ConnectOptions): Record<string, string> {
  const headers = { ...options.headers };
  if (!options.tokenInQuery && options.token !== undefined) headers.authorization = `Bearer ${options.token}`;
  return headers;
}

/** Open a socket; rejects with a `Refusal` when the upgrade is refused. */
export function connect(baseUrl: string, options: ConnectOptions = {}): Promise<Listener> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(target(baseUrl, options), {
      headers: headersOf(options),
      autoPong: options.autoPong ?? true,
    });
    const listener = new Listener(ws);
    ws.once('open', () => resolve(listener));
    ws.once('unexpected-response', (_request, response) => {
      let text = '';
      response.on('data', (chunk: Buffer) => (text += chunk.toString()));
      response.on('end', () => {
        let body: unknown = text;
        try {
          body = JSON.parse(text);
        } catch {
          // not JSON
        }
        reject(
          Object.assign<Error, object>(new Error(`upgrade refused: ${response.statusCode}`), {
            status: response.statusCode ?? 0,
            body,
            headers: response.headers,
          }),
        );
      });
    });
    ws.once('error', (error) => reject(error));
  });
}

/** The refusal of an upgrade that must fail. */
export async function refusal(baseUrl: string, options: ConnectOptions = {}): Promise<Refusal> {
  try {
    const listener = await connect(baseUrl, options);
    listener.close();
  } catch (error) {
    if ((error as Partial<Refusal>).status !== undefined) return error as Refusal;
    throw error;
  }
  throw new Error('the upgrade was accepted');
}
