import { PassThrough } from 'node:stream';
import { Injectable, Logger, type OnApplicationShutdown } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { FrameBus, type FrameSubscriber, type HeaderFrame } from '#bus';
import { MailboxRepository } from '#db';
import type { Agent } from '#domain';
import { onDrain } from '#http';

/** Headers read from Postgres per query when filling a gap (frames lost, bus resynchronised). */
const BACKFILL_BATCH = 500;
/** A client this far behind (bytes not yet taken by the socket) is cut; it reconnects and reloads. */
const MAX_BUFFERED_BYTES = 1024 * 1024;

/** One open live feed: an SSE response following one agent's mailbox. */
interface Feed {
  mailboxId: number;
  stream: PassThrough;
  /** `seq` of the last header written; frames at or below it are already sent. */
  lastSeq: number;
  /** Frames and resyncs are handled one at a time, in arrival order. */
  chain: Promise<void>;
  closed: boolean;
  close(): void;
}

/**
 * `GET /_admin/agents/{handle}/events` (docs/console-api.md): each new mailbox entry of the agent
 * as an SSE `header` event carrying the header frame exactly as `/connect` pushes it. Fed by the
 * frame bus like the MCP mail watch (Redis Streams, or in process when embedded), so any api node
 * serves it. A gap in `seq` (a lost frame, a bus resync) is filled from Postgres as a gateway does,
 * so the feed neither skips nor repeats an entry. Ends when the client goes, on drain and at
 * shutdown.
 */
@Injectable()
export class EventsService implements FrameSubscriber, OnApplicationShutdown {
  private readonly logger = new Logger('admin-events');
  private readonly feeds = new Map<number, Set<Feed>>();
  private subscribed = false;
  /** A comment line this often keeps proxies and the client from timing out an idle feed. */
  keepaliveMs = 15_000;

  constructor(
    private readonly bus: FrameBus,
    private readonly mailbox: MailboxRepository,
  ) {}

  /** Open the feed on `reply` (answers 200 at once; the stream stays open). */
  async open(agent: Agent, request: FastifyRequest, reply: FastifyReply): Promise<void> {
    if (!this.subscribed) {
      this.subscribed = true; // lazily: an api node that never serves a feed reads no stream
      this.bus.subscribe(this);
    }
    const stream = new PassThrough();
    let keepalive: NodeJS.Timeout | undefined;
    let stopDrain: (() => void) | undefined;
    const feed: Feed = {
      mailboxId: agent.id,
      stream,
      lastSeq: Number.MAX_SAFE_INTEGER, // nothing is sent before the starting seq is known
      chain: Promise.resolve(),
      closed: false,
      close: () => {
        if (feed.closed) return;
        feed.closed = true;
        clearInterval(keepalive);
        stopDrain?.();
        const set = this.feeds.get(agent.id);
        set?.delete(feed);
        if (set?.size === 0) this.feeds.delete(agent.id);
        this.bus.release(agent.id);
        stream.end();
      },
    };
    let set = this.feeds.get(agent.id);
    if (!set) this.feeds.set(agent.id, (set = new Set()));
    set.add(feed);
    // Hold first, then read the starting seq: a commit lands either at or below it or as a frame.
    feed.chain = this.bus
      .hold(agent.id)
      .then(() => this.mailbox.lastSeqs([agent.id]))
      .then((seqs) => {
        feed.lastSeq = seqs.get(agent.id) ?? 0;
      });
    try {
      await feed.chain;
    } catch (error) {
      feed.close();
      throw error;
    }
    request.raw.once('close', () => feed.close());
    reply.raw.once('close', () => feed.close());
    stopDrain = onDrain(request.server, () => feed.close());
    keepalive = setInterval(() => stream.write(': keepalive\n\n'), this.keepaliveMs);
    keepalive.unref();
    // The first bytes flush the response head, so the client's fetch() resolves at once.
    stream.write(': keepalive\n\n');
    void reply
      .code(200)
      .header('content-type', 'text/event-stream; charset=utf-8')
      .header('cache-control', 'no-store')
      .header('x-accel-buffering', 'no')
      .send(stream);
  }

  /** Open feeds right now. */
  get openFeeds(): number {
    let count = 0;
    for (const set of this.feeds.values()) count += set.size;
    return count;
  }

  onFrame(frame: HeaderFrame): void {
    for (const feed of this.feeds.get(frame.mailbox_id) ?? []) this.enqueue(feed, () => this.deliver(feed, frame));
  }

  onMonitor(): void {}

  onControl(): void {}

  /** Frames may have been lost: every feed reads what follows its last seq from Postgres. */
  onResync(): void {
    for (const set of this.feeds.values()) for (const feed of set) this.enqueue(feed, () => this.backfill(feed, null));
  }

  onApplicationShutdown(): void {
    for (const set of [...this.feeds.values()]) for (const feed of [...set]) feed.close();
  }

  private enqueue(feed: Feed, step: () => Promise<void>): void {
    feed.chain = feed.chain
      .then(() => (feed.closed ? undefined : step()))
      .catch((error: unknown) => {
        // Postgres unreachable while filling a gap: the client reconnects and reloads the listing.
        this.logger.warn(`live feed closed: ${error instanceof Error ? error.message : String(error)}`);
        feed.close();
      });
  }

  private async deliver(feed: Feed, frame: HeaderFrame): Promise<void> {
    if (frame.seq <= feed.lastSeq) return;
    if (frame.seq > feed.lastSeq + 1) await this.backfill(feed, frame.seq - 1);
    if (feed.closed || frame.seq <= feed.lastSeq) return;
    this.write(feed, frame.seq, frame.header);
  }

  /** Entries after the feed's last seq, through `throughSeq` (null: all there are). */
  private async backfill(feed: Feed, throughSeq: number | null): Promise<void> {
    for (;;) {
      const rows = await this.mailbox.entriesBySeq(feed.mailboxId, feed.lastSeq, throughSeq, BACKFILL_BATCH);
      for (const row of rows) if (!feed.closed) this.write(feed, row.seq, row.header);
      if (rows.length < BACKFILL_BATCH || feed.closed) return;
    }
  }

  private write(feed: Feed, seq: number, header: string): void {
    feed.lastSeq = seq;
    feed.stream.write(`event: header\ndata: ${header}\n\n`);
    if (feed.stream.writableLength > MAX_BUFFERED_BYTES) feed.close();
  }
}
