import { Failure, show } from '../assert';
import type { Http } from '../http';
import { compareKeys } from '../util';
import { connect, type Socket } from '../ws';
import { checkHeaders, checkNextCursor, CliHttp, USER_AGENT, cliAcceptsHeader } from './cli';

/** The CLI's watermark file (ASMTP.md §6.6). */
export interface Watermark {
  last_seen_created_at: number;
  last_seen_envelope_id: string;
  dedup_ids: Record<string, number>;
}

const PRUNE_MS = 30_000;
const RECENT_KEYS = 5_000;
const MAX_PAGES = 50;

/**
 * `robotnet listen`, replayed from ASMTP.md §6.6: per connection attempt it opens `/connect` with
 * the Authorization header, and on `open` runs the REST catch-up concurrently with live frames:
 * `GET /mailbox?order=asc&limit=1000[&after_created_at&after_envelope_id]` from the watermark,
 * printing headers not in the dedup map, advancing and saving the watermark, until
 * `next_cursor === null`. Live `envelope.notify` frames not in the dedup map advance the watermark
 * and are printed raw; `monitor.fact` frames are printed without touching it. A recent-keys window
 * (5,000 keys) drops repeats across reconnects.
 */
export class CliListener {
  /** The watermark file's content (null = fresh install). */
  saved: Watermark | null = null;
  /** stdout: one JSON object per line. */
  readonly stdout: string[] = [];
  /** stderr: diagnostics (dropped frames, …). */
  readonly stderr: string[] = [];
  /** Every catch-up request path, per connection. */
  readonly catchUps: string[][] = [];
  socket: Socket | undefined;
  private watermark: Watermark | null = null;
  private readonly recent: string[] = [];
  private readonly recentSet = new Set<string>();
  private catchUp: Promise<void> = Promise.resolve();
  private failure: Failure | undefined;

  constructor(
    private readonly baseUrl: string,
    private readonly http: Http,
    private readonly token: string,
  ) {}

  /** One connection attempt; resolves once the socket is open and the catch-up loop has finished. */
  async connect(label: string): Promise<Socket> {
    this.watermark = this.saved === null ? null : structuredClone(this.saved);
    let socket: Socket;
    try {
      socket = await connect(
        this.baseUrl,
        { headers: { authorization: `Bearer ${this.token}`, 'user-agent': USER_AGENT } },
        label,
      );
    } catch (error) {
      throw new Failure(
        `listen could not connect: ${(error as { status?: number }).status ?? (error as Error).message}`,
      );
    }
    this.socket = socket;
    socket.ws.on('message', (data) => this.onFrame((data as Buffer).toString()));
    this.catchUp = this.runCatchUp().catch((error: unknown) => {
      this.failure ??= error instanceof Failure ? error : new Failure(`listen catch-up: ${(error as Error).message}`);
    });
    await this.catchUp;
    this.check();
    return socket;
  }

  /** Throw what went wrong in the background (catch-up or frame handling), if anything. */
  check(): void {
    if (this.failure) throw this.failure;
  }

  /** Drop the connection (a network failure; the CLI would reconnect). */
  disconnect(): void {
    this.socket?.terminate();
    this.socket = undefined;
  }

  /** Ids of the printed `envelope.notify` lines, in print order. */
  get printedIds(): string[] {
    return this.stdout
      .map((line) => JSON.parse(line))
      .filter((o) => o.op === 'envelope.notify' || o.op === undefined)
      .map((o) => o.id as string);
  }

  get printed(): any[] {
    return this.stdout.map((line) => JSON.parse(line));
  }

  private async runCatchUp(): Promise<void> {
    const cli = new CliHttp(this.http, this.token);
    const paths: string[] = [];
    this.catchUps.push(paths);
    for (let pages = 0; ; pages++) {
      if (pages >= MAX_PAGES)
        throw new Failure(
          `listen catch-up did not end after ${MAX_PAGES} pages (requests ${paths.slice(-2).join(' ')})`,
        );
      const cursor = this.watermark;
      const after = cursor
        ? `&after_created_at=${cursor.last_seen_created_at}&after_envelope_id=${cursor.last_seen_envelope_id}`
        : '';
      const path = `/mailbox?order=asc&limit=1000${after}`;
      paths.push(path);
      const reply = await cli.call('GET', path);
      if (reply.status < 200 || reply.status > 299)
        throw new Failure(`listen catch-up: GET ${path} → ${reply.status} ${show(reply.text, 200)}`);
      checkNextCursor(reply, `listen catch-up GET ${path}`);
      checkHeaders(reply.body.envelope_headers, `listen catch-up GET ${path}`);
      let fresh = 0;
      for (const header of reply.body.envelope_headers) {
        if (this.watermark?.dedup_ids[header.id] !== undefined) continue;
        if (!this.remember(`env:${header.id}`)) continue;
        this.advance(header.created_at, header.id);
        this.stdout.push(JSON.stringify(header));
        fresh++;
      }
      if (fresh > 0) this.save();
      if (reply.body.next_cursor === null) return;
      if (
        fresh === 0 &&
        cursor !== null &&
        this.watermark !== null &&
        this.watermark.last_seen_envelope_id === cursor.last_seen_envelope_id &&
        this.watermark.last_seen_created_at === cursor.last_seen_created_at
      ) {
        throw new Failure(
          `listen catch-up: GET ${path} returned a next_cursor but nothing after the watermark — the loop would spin`,
        );
      }
    }
  }

  private onFrame(text: string): void {
    let frame: any;
    try {
      frame = JSON.parse(text);
    } catch {
      this.stderr.push(`unparsable frame ${text.slice(0, 80)}`);
      return;
    }
    if (frame.op === 'monitor.fact') {
      if (!this.remember(`mon:${frame.envelope_id}:${frame.recipient_handle}:${frame.fact}`)) return;
      this.stdout.push(text);
      return;
    }
    if (frame.op !== 'envelope.notify') {
      this.stderr.push(`ignored frame op ${frame.op}`);
      return;
    }
    const problem = cliAcceptsHeader(frame);
    if (problem) {
      this.stderr.push(`dropped frame: ${problem}`);
      this.failure ??= new Failure(`listen drops a live frame (${problem}): ${show(text, 200)}`);
      return;
    }
    if (this.watermark?.dedup_ids[frame.id] !== undefined) return;
    if (!this.remember(`env:${frame.id}`)) return;
    this.advance(frame.created_at, frame.id);
    this.save();
    this.stdout.push(text);
  }

  /** False when the key was seen among the recent ones (the reconnecting listener's dedup). */
  private remember(key: string): boolean {
    if (this.recentSet.has(key)) return false;
    this.recent.push(key);
    this.recentSet.add(key);
    if (this.recent.length > RECENT_KEYS) this.recentSet.delete(this.recent.shift()!);
    return true;
  }

  /** The advance rule: max (created_at, id) over the old cursor and the item; prune old dedup entries. */
  private advance(createdAt: number, id: string): void {
    const watermark: Watermark = this.watermark ?? {
      last_seen_created_at: createdAt,
      last_seen_envelope_id: id,
      dedup_ids: {},
    };
    watermark.dedup_ids[id] = createdAt;
    if (
      compareKeys(
        { created_at: createdAt, id },
        { created_at: watermark.last_seen_created_at, id: watermark.last_seen_envelope_id },
      ) > 0
    ) {
      watermark.last_seen_created_at = createdAt;
      watermark.last_seen_envelope_id = id;
    }
    for (const [key, at] of Object.entries(watermark.dedup_ids)) {
      if (at < watermark.last_seen_created_at - PRUNE_MS) delete watermark.dedup_ids[key];
    }
    this.watermark = watermark;
  }

  /** Written atomically as JSON (temp + rename): here, a deep copy through JSON. */
  private save(): void {
    this.saved = JSON.parse(JSON.stringify(this.watermark));
  }
}
