import type WebSocket from 'ws';
import {
  BoundedSet,
  compareCursors,
  FileCursorStore,
  maxCursor,
  MemoryCursorStore,
  ORIGIN,
  type CursorStore,
} from './cursor';
import { Transport } from './http';
import type { Cursor, CursorExpired, Frame, Header, MailboxPage, MonitorFact } from './types';

// ws loads on the first connect: a program that imports the SDK only for REST (the CLI's hook and
// `send`, `roost mcp`, the operator's domain ids) never pays for the WebSocket library.
let webSocketClass: typeof WebSocket | undefined;
// eslint-disable-next-line @typescript-eslint/no-require-imports -- loaded on first use, see above
const loadWebSocket = (): typeof WebSocket => (webSocketClass ??= require('ws') as typeof WebSocket);

/** Close codes (EXTENSIONS.md §1): the operator's are libs/domain `CLOSE_CODES` (a spec holds them equal). */
export const CLOSE_REVOKED = 4001;
export const CLOSE_SLOW_CONSUMER = 4008;
export const CLOSE_SERVICE_RESTART = 1012;

/** What reached the consumer, and how. */
export type DeliveredFrame = Header | MonitorFact | CursorExpired;
export type FrameSource = 'live' | 'replay' | 'catchup';

export type ListenerEvent =
  | { type: 'connecting'; attempt: number; resume: boolean }
  | { type: 'open' }
  | { type: 'close'; code: number; reason: string }
  | { type: 'rejected'; status: number }
  | { type: 'retry'; delayMs: number; failures: number }
  | { type: 'resume'; supported: boolean; replayed?: number }
  | { type: 'catchup'; pages: number; delivered: number }
  | { type: 'dropped'; reason: string; text: string }
  | { type: 'error'; message: string };

export type ListenerEnd = 'stopped' | 'revoked' | 'unauthorized' | 'gave_up';

export interface ListenerOptions {
  url: string;
  /** The bearer, or a function re-resolving it before every connection attempt. */
  token: string | (() => string | Promise<string>);
  /** Where the cursor lives between runs: a store, a file path (JSON, mode 0600), or memory. */
  cursor?: CursorStore | string;
  /** Ask the operator for server-side resume (EXTENSIONS.md §1). Default true; false = plain ASMTP. */
  resume?: boolean;
  /** REST catch-up when the operator does not resume (ASMTP.md §6.6). Default true. */
  catchUp?: boolean;
  /** Give up after this many consecutive failed attempts (default: never). */
  maxAttempts?: number;
  /** Ids remembered for de-duplication (default 5000). */
  dedupSize?: number;
  /** How long after open a `replay.complete` may take before the operator counts as plain (default 2 s). */
  resumeWaitMs?: number;
  /** No frame and no ping for this long: the socket is presumed dead and reopened (default 75 s). */
  idleTimeoutMs?: number;
  pageSize?: number;
  /** Delay of the confirming second catch-up pass (default 1 s); see `catchUp`. */
  catchUpConfirmMs?: number;
  /** Backoff base and ceiling (default 1 s and 30 s, ASMTP.md §6.6). */
  backoff?: { baseMs?: number; maxMs?: number };
  random?: () => number;
  userAgent?: string;
  onFrame(frame: DeliveredFrame, source: FrameSource): void | Promise<void>;
  onEvent?(event: ListenerEvent): void;
}

/** `min(1000·2^(n-1), 30000)` ms ± 30 % (ASMTP.md §6.6); n ≥ 1 is the count of failures in a row. */
export function backoffDelay(
  failures: number,
  random: () => number = Math.random,
  baseMs = 1000,
  maxMs = 30_000,
): number {
  const base = Math.min(baseMs * 2 ** Math.max(0, failures - 1), maxMs);
  return Math.round(base * (1 + (random() * 2 - 1) * 0.3));
}

const STABLE_MS = 60_000;

export function isHeader(frame: Record<string, unknown>): frame is Header & Record<string, unknown> {
  return (
    frame.op === 'envelope.notify' &&
    typeof frame.id === 'string' &&
    typeof frame.from === 'string' &&
    Array.isArray(frame.to) &&
    typeof frame.type_hint === 'string' &&
    typeof frame.created_at === 'number' &&
    typeof frame.date_ms === 'number'
  );
}

/** Per connection: until the position is settled, live frames must not move the saved cursor. */
interface Connection {
  ws: WebSocket;
  /** The cursor when the socket opened: where catch-up or resume starts. */
  base: Cursor | null;
  /** True once `replay.complete` arrived or REST catch-up reached `next_cursor: null`. */
  settled: boolean;
  /** Waiting for `replay.complete` to learn whether the operator resumes. */
  awaitingReplay: boolean;
  /** The highest live position seen while not settled. */
  pendingLive: Cursor | null;
  openedAt: number;
  timers: NodeJS.Timeout[];
}

/**
 * A reconnecting `/connect` listener that loses and repeats nothing. It asks for server-side resume
 * from its cursor and, when the operator answers without `replay.complete` (a plain ASMTP operator),
 * pages `GET /mailbox` from the cursor until `next_cursor === null` while live frames keep coming.
 * Frames are de-duplicated by envelope id; the cursor only advances over positions known to have
 * no gap behind them, and is saved atomically.
 */
export class Listener {
  private readonly store: CursorStore;
  private readonly seen: BoundedSet;
  private readonly transport: Transport;
  private cursorValue: Cursor | null;
  private recent: Map<string, number>;
  /** null = not yet known; learned from the first connection. */
  private resumeSupported: boolean | null = null;
  private stopped = false;
  /**
   * Set once the final save is done (`stop`, `end`): queued work that comes after it (a catch-up
   * page whose request was in flight, a frame read while the socket closed) is dropped. Delivered,
   * it would not be in the saved state, and a listener started on the same cursor file meanwhile
   * would deliver it again; advancing the cursor for it could skip an envelope for good.
   */
  private finished = false;
  private connection: Connection | undefined;
  private queue: Promise<void> = Promise.resolve();
  private saveTimer: NodeJS.Timeout | undefined;
  private dirty = false;
  private wake: (() => void) | undefined;
  private finish!: (end: ListenerEnd) => void;
  /** Resolves when the listener stops for good, with why. */
  readonly done: Promise<ListenerEnd>;

  constructor(private readonly options: ListenerOptions) {
    this.store =
      typeof options.cursor === 'string'
        ? new FileCursorStore(options.cursor)
        : (options.cursor ?? new MemoryCursorStore());
    const state = this.store.load();
    this.cursorValue = state.cursor;
    this.recent = state.recent;
    this.seen = new BoundedSet(options.dedupSize ?? 5000);
    for (const id of this.recent.keys()) this.seen.add(`env:${id}`);
    this.transport = new Transport(options.url, { userAgent: options.userAgent });
    this.done = new Promise((resolve) => (this.finish = resolve));
  }

  /** The saved position: everything up to it was delivered. */
  get cursor(): Cursor | null {
    return this.cursorValue;
  }

  start(): this {
    void this.run();
    return this;
  }

  /** Close the socket, save the cursor, resolve `done` with `stopped`. */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    this.wake?.();
    const connection = this.connection;
    if (connection) {
      for (const timer of connection.timers) clearTimeout(timer);
      connection.ws.close(1000, 'client stopping');
    }
    await this.queue;
    this.flush();
    this.finished = true;
    this.finish('stopped');
  }

  /** Drop the current socket as a network failure would (tests, or a caller that knows better). */
  dropConnection(): void {
    this.connection?.ws.terminate();
  }

  private end(reason: ListenerEnd): void {
    this.stopped = true;
    this.flush();
    this.finished = true;
    this.finish(reason);
  }

  private event(event: ListenerEvent): void {
    this.options.onEvent?.(event);
  }

  private async run(): Promise<void> {
    let failures = 0;
    let attempt = 0;
    while (!this.stopped) {
      attempt++;
      const outcome = await this.connectOnce(attempt).catch((error: Error) => {
        this.event({ type: 'error', message: error.message });
        return { kind: 'retry' as const, openedFor: 0 };
      });
      if (this.stopped) return;
      if (outcome.kind === 'end') return this.end(outcome.reason);
      if (outcome.openedFor >= STABLE_MS) failures = 0;
      if (outcome.kind === 'now') continue;
      failures++;
      if (this.options.maxAttempts !== undefined && failures >= this.options.maxAttempts) return this.end('gave_up');
      const delayMs = backoffDelay(
        failures,
        this.options.random,
        this.options.backoff?.baseMs,
        this.options.backoff?.maxMs,
      );
      this.event({ type: 'retry', delayMs, failures });
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, delayMs);
        this.wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      this.wake = undefined;
    }
  }

  private wsUrl(resume: boolean): string {
    const url = new URL(`${this.transport.baseUrl}/connect`);
    url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:';
    if (resume) {
      const from = this.cursorValue ?? ORIGIN;
      url.searchParams.set('after_created_at', String(from.created_at));
      url.searchParams.set('after_envelope_id', from.envelope_id);
    }
    return url.toString();
  }

  private async token(): Promise<string> {
    const { token } = this.options;
    return typeof token === 'function' ? await token() : token;
  }

  private async connectOnce(
    attempt: number,
  ): Promise<{ kind: 'end'; reason: ListenerEnd } | { kind: 'now' | 'retry'; openedFor: number }> {
    const resume = this.options.resume !== false && this.resumeSupported !== false;
    this.event({ type: 'connecting', attempt, resume });
    const token = await this.token();
    const ws = new (loadWebSocket())(this.wsUrl(resume), {
      headers: { authorization: `Bearer ${token}`, 'user-agent': this.options.userAgent ?? 'roost-client' },
      handshakeTimeout: 15_000,
    });
    const connection: Connection = {
      ws,
      base: this.cursorValue,
      settled: false,
      awaitingReplay: resume,
      pendingLive: null,
      openedAt: 0,
      timers: [],
    };
    this.connection = connection;
    return new Promise((resolve) => {
      let rejectedStatus = 0;
      let idle: NodeJS.Timeout | undefined;
      const idleMs = this.options.idleTimeoutMs ?? 75_000;
      const touch = () => {
        clearTimeout(idle);
        idle = setTimeout(() => ws.terminate(), idleMs);
        idle.unref?.();
      };
      ws.on('unexpected-response', (_req, res) => {
        rejectedStatus = res.statusCode ?? 0;
        this.event({ type: 'rejected', status: rejectedStatus });
        res.resume();
        ws.terminate();
      });
      ws.on('open', () => {
        connection.openedAt = Date.now();
        this.event({ type: 'open' });
        touch();
        if (connection.awaitingReplay) this.armResumeWait(connection);
        else this.beginCatchUp(connection);
      });
      ws.on('ping', touch);
      ws.on('message', (data: WebSocket.RawData) => {
        touch();
        const text = (data as Buffer).toString(); // binaryType is the default nodebuffer
        void this.enqueue(() => this.onText(connection, text));
      });
      ws.on('error', (error) => this.event({ type: 'error', message: error.message }));
      ws.on('close', (code, reasonBuffer) => {
        clearTimeout(idle);
        for (const timer of connection.timers) clearTimeout(timer);
        if (this.connection === connection) this.connection = undefined;
        const openedFor = connection.openedAt ? Date.now() - connection.openedAt : 0;
        this.event({ type: 'close', code, reason: reasonBuffer.toString() });
        // Frames already received are delivered before deciding what comes next.
        void this.queue.then(() => {
          this.flush();
          if (rejectedStatus === 401) return resolve({ kind: 'end', reason: 'unauthorized' });
          if (code === CLOSE_REVOKED) return resolve({ kind: 'end', reason: 'revoked' });
          if (code === CLOSE_SLOW_CONSUMER || code === CLOSE_SERVICE_RESTART)
            return resolve({ kind: 'now', openedFor });
          resolve({ kind: 'retry', openedFor });
        });
      });
    });
  }

  /** Frames are handled one at a time, in arrival order, catch-up pages included. */
  private enqueue(task: () => void | Promise<void>): Promise<void> {
    const next = this.queue
      .then(() => (this.finished ? undefined : task()))
      .catch((error: Error) => this.event({ type: 'error', message: error.message }));
    this.queue = next;
    return next;
  }

  /** Wait for `replay.complete`; each frame meanwhile extends the wait (a long replay), up to 10×. */
  private armResumeWait(connection: Connection): void {
    const waitMs = this.options.resumeWaitMs ?? 2000;
    const deadline = Date.now() + waitMs * 10;
    const check = () => {
      if (!connection.awaitingReplay || connection.ws.readyState !== connection.ws.OPEN) return;
      const quietFor = Date.now() - lastFrameAt;
      if (quietFor >= waitMs || Date.now() >= deadline) {
        connection.awaitingReplay = false;
        this.resumeSupported = false;
        this.event({ type: 'resume', supported: false });
        this.beginCatchUp(connection);
        return;
      }
      connection.timers.push(setTimeout(check, waitMs - quietFor));
    };
    let lastFrameAt = Date.now();
    connection.ws.on('message', () => (lastFrameAt = Date.now()));
    connection.timers.push(setTimeout(check, waitMs));
  }

  private beginCatchUp(connection: Connection): void {
    if (this.options.catchUp === false) {
      this.settle(connection);
      return;
    }
    void this.catchUp(connection).catch((error: Error) => {
      this.event({ type: 'error', message: `catch-up failed: ${error.message}` });
      // Reconnect and try again from the saved cursor.
      connection.ws.terminate();
    });
  }

  /**
   * ASMTP.md §6.6: page `GET /mailbox` (the `in` feed, ascending) from the cursor until
   * `next_cursor === null`, then once more after `confirmMs`: an operator may take a moment after
   * the upgrade to start pushing to the socket, and an envelope committed in that moment is neither
   * in the first pass nor pushed. Only then may live frames move the cursor.
   */
  private async catchUp(connection: Connection): Promise<void> {
    let after = connection.base;
    let pages = 0;
    let delivered = 0;
    const token = await this.token();
    for (let pass = 0; pass < 2; pass++) {
      if (pass === 1) await new Promise((resolve) => setTimeout(resolve, this.options.catchUpConfirmMs ?? 1000));
      for (;;) {
        if (this.stopped || connection.ws.readyState !== connection.ws.OPEN) return;
        const page = await this.transport.json<MailboxPage>({
          method: 'GET',
          path: '/mailbox',
          token,
          query: {
            order: 'asc',
            limit: this.options.pageSize ?? 1000,
            after_created_at: after?.created_at,
            after_envelope_id: after?.envelope_id,
          },
        });
        pages++;
        await this.enqueue(async () => {
          for (const header of page.envelope_headers) {
            if (await this.deliverHeader(header, 'catchup')) delivered++;
          }
          const last = page.envelope_headers.at(-1);
          if (last) after = maxCursor(after, { created_at: last.created_at, envelope_id: last.id });
          if (page.next_cursor) after = maxCursor(after, page.next_cursor);
          this.advance(after);
        });
        if (page.next_cursor === null) break;
      }
    }
    if (this.stopped || connection.ws.readyState !== connection.ws.OPEN) return;
    await this.enqueue(() => this.settle(connection));
    this.event({ type: 'catchup', pages, delivered });
  }

  /** Everything before the live stream is now delivered: live positions may move the cursor. */
  private settle(connection: Connection): void {
    connection.settled = true;
    connection.awaitingReplay = false;
    this.advance(connection.pendingLive);
    this.flush();
  }

  private async onText(connection: Connection, text: string): Promise<void> {
    let frame: Frame & Record<string, unknown>;
    try {
      frame = JSON.parse(text) as Frame & Record<string, unknown>;
      if (frame === null || typeof frame !== 'object') throw new Error('not an object');
    } catch {
      this.event({ type: 'dropped', reason: 'not JSON', text });
      return;
    }
    switch (frame.op) {
      case 'replay.complete': {
        if (!connection.awaitingReplay && connection.settled) return;
        this.resumeSupported = true;
        this.event({ type: 'resume', supported: true, replayed: frame.replayed });
        this.settle(connection);
        return;
      }
      case 'cursor.expired':
        await this.options.onFrame(frame, 'replay');
        return;
      case 'monitor.fact': {
        const key = `mon:${frame.envelope_id}:${frame.recipient_handle}:${frame.fact}`;
        if (this.seen.has(key)) return;
        this.seen.add(key);
        await this.options.onFrame(frame, 'live');
        return;
      }
      case 'envelope.notify': {
        if (!isHeader(frame)) {
          this.event({ type: 'dropped', reason: 'malformed envelope.notify', text });
          return;
        }
        const position = { created_at: frame.created_at, envelope_id: frame.id };
        // Known resuming operator: frames come in order with no gap, so each one is a safe position.
        const trusted = connection.settled || (connection.awaitingReplay && this.resumeSupported === true);
        const delivered = await this.deliverHeader(frame, connection.awaitingReplay ? 'replay' : 'live');
        if (!delivered && !trusted) return;
        if (trusted) this.advance(position);
        else connection.pendingLive = maxCursor(connection.pendingLive, position);
        return;
      }
      default:
        this.event({ type: 'dropped', reason: `unknown op ${String((frame as { op?: unknown }).op)}`, text });
    }
  }

  /** Hand a header to the consumer unless its id was delivered already. */
  private async deliverHeader(header: Header, source: FrameSource): Promise<boolean> {
    const key = `env:${header.id}`;
    if (this.seen.has(key)) return false;
    this.seen.add(key);
    this.recent.set(header.id, header.created_at);
    if (this.recent.size > 2000) this.recent.delete(this.recent.keys().next().value as string);
    // Saved even when the cursor cannot move yet (a live frame ahead of an unsettled catch-up):
    // otherwise a restart before the cursor moves would deliver this envelope a second time.
    this.markDirty();
    await this.options.onFrame(header, source);
    return true;
  }

  private advance(position: Cursor | null): void {
    if (position === null) return;
    if (this.cursorValue !== null && compareCursors(position, this.cursorValue) <= 0) return;
    this.cursorValue = position;
    this.markDirty();
  }

  /** Save the cursor and the recent ids soon (coalesced). */
  private markDirty(): void {
    this.dirty = true;
    if (!this.saveTimer) {
      this.saveTimer = setTimeout(() => this.flush(), 100);
      this.saveTimer.unref?.();
    }
  }

  /** Save the cursor and the recent ids now if either changed. */
  flush(): void {
    clearTimeout(this.saveTimer);
    this.saveTimer = undefined;
    if (!this.dirty) return;
    this.dirty = false;
    try {
      this.store.save({ cursor: this.cursorValue, recent: this.recent });
    } catch (error) {
      this.event({ type: 'error', message: `cannot save the cursor: ${(error as Error).message}` });
    }
  }
}
