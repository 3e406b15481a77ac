import { setTimeout as sleep } from 'node:timers/promises';
import { Logger } from '@nestjs/common';
import Redis from 'ioredis';
import {
  FrameBus,
  type AgentControl,
  type Delivery,
  type FrameSubscriber,
  type HeaderFrame,
  type StreamStats,
} from './bus';

export interface RedisBusOptions {
  url: string;
  prefix: string;
  /** Fixed number of partition streams; a mailbox lives in `mailbox_id % partitions`. */
  partitions: number;
  /** Approximate MAXLEN of each partition stream. */
  maxLen: number;
  /** Reports the age of each frame read (stream read lag), in ms. */
  onReadLag?: (lagMs: number) => void;
  /** Counts failed Redis commands by component (publish, read, control). */
  onError?: (component: string) => void;
}

/** The pipeline's `ADD_TO_PARTITIONS` command: key count, keys, then its ARGV. */
interface AddToPartitions {
  roostAddToPartitions(keyCount: number, ...args: string[]): void;
}

type StreamReply = Array<[string, Array<[string, string[]]>]> | null;

/** Deliveries published in one tick: one pipeline, each caller answered by its own commands. */
interface PublishBatch {
  pipeline: ReturnType<Redis['pipeline']>;
  commands: number;
  waiters: Array<{ first: number; end: number; resolve: () => void; reject: (error: unknown) => void }>;
}

/**
 * Entries of a stream after an id, counted on the server (only the count travels), up to a cap so
 * a far-behind reader costs Redis a bounded scan.
 */
const COUNT_AFTER = `return #redis.call('XRANGE', KEYS[1], '(' .. ARGV[1], '+', 'COUNT', tonumber(ARGV[2]))`;
const LAG_COUNT_CAP = 10_000;

/**
 * The entries of one delivery in several partitions, added by Redis itself: the header, envelope and
 * times travel once, each partition's entry is written exactly as a plain XADD would write it.
 * KEYS: the partition streams; ARGV: MAXLEN, envelope id, created_at, committed_at, header, then the
 * `mailbox:seq` list of each key in KEYS order.
 */
const ADD_TO_PARTITIONS = `for i, key in ipairs(KEYS) do
  redis.call('XADD', key, 'MAXLEN', '~', ARGV[1], '*', 'r', ARGV[5 + i], 'e', ARGV[2], 't', ARGV[3], 'c', ARGV[4], 'h', ARGV[5])
end
return #KEYS`;

const READ_BLOCK_MS = 250;
const READ_COUNT = 1000;

/**
 * Fan-out over Redis Streams (DESIGN.md): api nodes XADD one header frame per recipient mailbox to
 * the partition stream of that mailbox, trimmed with an approximate MAXLEN; each gateway XREADs only
 * the partitions of the mailboxes it holds. Control messages (socket revocation) go over pub/sub.
 */
export class RedisFrameBus extends FrameBus {
  private readonly logger = new Logger('bus');
  private readonly commands: Redis;
  private reader: Redis | undefined;
  private control: Redis | undefined;
  private readonly subscribers = new Set<FrameSubscriber>();
  private readonly heldMailboxes = new Map<number, number>();
  private readonly heldPartitions = new Map<number, number>();
  /** Last stream id read per partition; a newly held partition starts at the stream's tail. */
  private readonly lastIds = new Map<number, string>();
  /** Newly held partitions whose tail is being read (shared by concurrent holders). */
  private readonly attaching = new Map<number, Promise<void>>();
  private running = false;
  /** The reader connection's CLIENT ID and whether it sits in a blocking XREAD (see `attach`). */
  private readerId: string | undefined;
  private blocking = false;
  private loop: Promise<void> | undefined;
  private wake: (() => void) | undefined;
  /** The pipeline collecting this tick's publishes, flushed on the next tick. */
  private pendingPublish: PublishBatch | undefined;
  /** Set when close() begins; the read loop's pending waits are answered CLOSED (see untilClosed). */
  private closed = false;
  private readonly closeWaiters = new Set<() => void>();
  /** Each partition's stream key, built once (every publish and every read names them). */
  private readonly streamKeys: string[];

  constructor(private readonly options: RedisBusOptions) {
    super();
    this.streamKeys = Array.from({ length: options.partitions }, (_, p) => `${options.prefix}frames:${p}`);
    this.commands = new Redis(options.url, {
      maxRetriesPerRequest: 1,
      enableOfflineQueue: false,
      commandTimeout: 2_000,
      lazyConnect: false,
    });
    this.commands.on('error', () => undefined); // surfaced through failed commands and readiness
    this.commands.defineCommand('roostCountAfter', { numberOfKeys: 1, lua: COUNT_AFTER });
    this.commands.defineCommand('roostAddToPartitions', { lua: ADD_TO_PARTITIONS });
  }

  streamKey(partition: number): string {
    return this.streamKeys[partition] ?? `${this.options.prefix}frames:${partition}`;
  }

  private get controlChannel(): string {
    return `${this.options.prefix}control`;
  }

  partitionOf(mailboxId: number): number {
    return mailboxId % this.options.partitions;
  }

  /**
   * One stream entry per partition a delivery touches, not per recipient: the header (identical for
   * every recipient of an envelope) is written once with the `mailbox:seq` pairs of that partition,
   * so a 50-recipient envelope costs at most `partitions` entries. A delivery that touches several
   * partitions sends them as one script call (the header crosses the wire once, not once per
   * partition: a 50-recipient envelope on 16 partitions was 16 XADDs of the same ~1 KB header);
   * one partition is a plain XADD. Deliveries published in the same tick (the envelopes of one
   * accept batch) share one pipeline, so one write reaches Redis.
   */
  publish(delivery: Delivery): Promise<void> {
    if (delivery.frames.length === 0 && delivery.monitor.length === 0) return Promise.resolve();
    const batch = this.pendingPublish ?? this.startPublishBatch();
    const pipeline = batch.pipeline;
    const first = batch.commands;
    const maxLen = String(this.options.maxLen);
    const byPartition = new Map<number, HeaderFrame[]>();
    for (const frame of delivery.frames) {
      const partition = this.partitionOf(frame.mailbox_id);
      const frames = byPartition.get(partition);
      if (frames) frames.push(frame);
      else byPartition.set(partition, [frame]);
    }
    // Frames of one delivery share envelope, created_at and header.
    const [frame] = delivery.frames;
    const recipients = (frames: HeaderFrame[]) => frames.map((f) => `${f.mailbox_id}:${f.seq}`).join(',');
    if (byPartition.size === 1) {
      const [[partition, frames]] = byPartition;
      pipeline.xadd(
        this.streamKey(partition),
        'MAXLEN',
        '~',
        maxLen,
        '*',
        'r',
        recipients(frames),
        'e',
        frame.envelope_id,
        't',
        String(frame.created_at),
        'c',
        String(delivery.committed_at),
        'h',
        frame.header,
      );
    } else if (byPartition.size > 1) {
      const keys: string[] = [];
      const lists: string[] = [];
      for (const [partition, frames] of byPartition) {
        keys.push(this.streamKey(partition));
        lists.push(recipients(frames));
      }
      (pipeline as unknown as AddToPartitions).roostAddToPartitions(
        keys.length,
        ...keys,
        maxLen,
        frame.envelope_id,
        String(frame.created_at),
        String(delivery.committed_at),
        frame.header,
        ...lists,
      );
    }
    for (const monitor of delivery.monitor) {
      pipeline.xadd(
        this.streamKey(this.partitionOf(monitor.mailbox_id)),
        'MAXLEN',
        '~',
        maxLen,
        '*',
        'm',
        String(monitor.mailbox_id),
        'k',
        'monitor',
        'h',
        monitor.frame,
      );
    }
    batch.commands += Math.min(byPartition.size, 1) + delivery.monitor.length;
    return new Promise((resolve, reject) => batch.waiters.push({ first, end: batch.commands, resolve, reject }));
  }

  private startPublishBatch(): PublishBatch {
    const batch: PublishBatch = { pipeline: this.commands.pipeline(), commands: 0, waiters: [] };
    this.pendingPublish = batch;
    process.nextTick(() => {
      this.pendingPublish = undefined;
      void this.flushPublishBatch(batch);
    });
    return batch;
  }

  /** Each publish of the batch succeeds or fails on its own commands' results. */
  private async flushPublishBatch(batch: PublishBatch): Promise<void> {
    let results: Array<[Error | null, unknown]> | null = null;
    let failure: unknown;
    try {
      results = await batch.pipeline.exec();
    } catch (error) {
      failure = error;
    }
    for (const waiter of batch.waiters) {
      const error =
        failure ?? (results ?? []).slice(waiter.first, waiter.end).find(([commandError]) => commandError !== null)?.[0];
      if (error === undefined || error === null) {
        waiter.resolve();
      } else {
        this.options.onError?.('publish');
        waiter.reject(error);
      }
    }
  }

  async publishControl(control: AgentControl): Promise<void> {
    await this.commands.publish(this.controlChannel, JSON.stringify(control));
  }

  subscribe(subscriber: FrameSubscriber): void {
    this.subscribers.add(subscriber);
    if (this.subscribers.size > 1) return; // the connections and the read loop are shared
    this.control = new Redis(this.options.url, { maxRetriesPerRequest: null });
    this.control.on('error', () => undefined);
    this.control.on('ready', () => this.each((s) => s.onResync()));
    void this.control.subscribe(this.controlChannel).catch(() => undefined);
    this.control.on('message', (_channel: string, message: string) => {
      let control: AgentControl;
      try {
        control = JSON.parse(message) as AgentControl;
      } catch {
        return; // a malformed control message is ignored
      }
      this.each((s) => s.onControl(control));
    });
    this.reader = new Redis(this.options.url, { maxRetriesPerRequest: null, enableOfflineQueue: true });
    this.reader.on('error', () => undefined);
    this.reader.on('ready', () => {
      this.readerId = undefined;
      void this.reader!.call('CLIENT', 'ID').then(
        (id) => (this.readerId = String(id)),
        () => undefined,
      );
    });
    this.running = true;
    this.loop = this.readLoop();
  }

  hold(mailboxId: number): Promise<void> {
    const partition = this.partitionOf(mailboxId);
    this.heldMailboxes.set(mailboxId, (this.heldMailboxes.get(mailboxId) ?? 0) + 1);
    if (this.heldMailboxes.get(mailboxId) === 1) {
      this.heldPartitions.set(partition, (this.heldPartitions.get(partition) ?? 0) + 1);
    }
    return this.attach(partition);
  }

  /**
   * Fix where reading a newly held partition starts (its tail now) before the caller reads its
   * starting `seq`: frames published later are read, earlier ones are covered by that `seq`.
   * Reading the tail lazily in the read loop instead lost every frame published in between.
   */
  private attach(partition: number): Promise<void> {
    if (this.lastIds.has(partition)) return Promise.resolve();
    let pending = this.attaching.get(partition);
    if (!pending) {
      pending = this.tailId(this.commands, partition)
        .then((id) => {
          if (this.heldPartitions.has(partition) && !this.lastIds.has(partition)) this.lastIds.set(partition, id);
        })
        // Redis is failing: the read loop takes the tail itself and the gateway's sweep fills the gap.
        .catch(() => this.options.onError?.('read'))
        .finally(() => {
          this.attaching.delete(partition);
          this.wake?.();
          // The loop may be blocked (up to READ_BLOCK_MS) on the other partitions: end that read
          // now, so the new partition's frames are not late by a whole block.
          if (this.blocking && this.readerId !== undefined) {
            void this.commands.call('CLIENT', 'UNBLOCK', this.readerId).catch(() => this.options.onError?.('read'));
          }
        });
      this.attaching.set(partition, pending);
    }
    return pending;
  }

  release(mailboxId: number): void {
    const count = (this.heldMailboxes.get(mailboxId) ?? 0) - 1;
    if (count > 0) {
      this.heldMailboxes.set(mailboxId, count);
      return;
    }
    this.heldMailboxes.delete(mailboxId);
    const partition = this.partitionOf(mailboxId);
    const holders = (this.heldPartitions.get(partition) ?? 0) - 1;
    if (holders > 0) this.heldPartitions.set(partition, holders);
    else {
      this.heldPartitions.delete(partition);
      this.lastIds.delete(partition);
    }
  }

  async trim(maxAgeMs: number): Promise<number> {
    const minId = `${Date.now() - maxAgeMs}-0`;
    const pipeline = this.commands.pipeline();
    for (let partition = 0; partition < this.options.partitions; partition++) {
      pipeline.xtrim(this.streamKey(partition), 'MINID', '~', minId);
    }
    const results = (await pipeline.exec()) ?? [];
    return results.reduce((sum, [error, removed]) => sum + (error ? 0 : Number(removed)), 0);
  }

  async ready(): Promise<boolean> {
    try {
      return (await this.commands.ping()) === 'PONG';
    } catch {
      return false;
    }
  }

  async stats(): Promise<StreamStats[]> {
    const pipeline = this.commands.pipeline();
    for (let partition = 0; partition < this.options.partitions; partition++) pipeline.xlen(this.streamKey(partition));
    const held = [...this.lastIds].filter(([partition]) => this.heldPartitions.has(partition));
    for (const [partition, lastId] of held) {
      (pipeline as unknown as { roostCountAfter(key: string, id: string, cap: number): void }).roostCountAfter(
        this.streamKey(partition),
        lastId,
        LAG_COUNT_CAP,
      );
    }
    const results = (await pipeline.exec()) ?? [];
    const failed = results.find(([error]) => error !== null)?.[0];
    if (failed) throw failed;
    const stats: StreamStats[] = [];
    for (let partition = 0; partition < this.options.partitions; partition++)
      stats.push({ partition, length: Number(results[partition][1]) });
    held.forEach(([partition], i) => (stats[partition].lagEntries = Number(results[this.options.partitions + i][1])));
    return stats;
  }

  private async readLoop(): Promise<void> {
    let failing = false;
    let backoff = 100;
    while (this.running) {
      const partitions = [...this.heldPartitions.keys()].filter((partition) => !this.attaching.has(partition));
      if (partitions.length === 0) {
        await this.idle(READ_BLOCK_MS);
        continue;
      }
      try {
        for (const partition of partitions) {
          if (this.lastIds.has(partition)) continue;
          const tail = await this.untilClosed(this.tailId(this.reader!, partition));
          if (tail === CLOSED) return;
          this.lastIds.set(partition, tail);
        }
        const keys = partitions.map((p) => this.streamKey(p));
        const ids = partitions.map((p) => this.lastIds.get(p) ?? '$');
        let reply: StreamReply | typeof CLOSED;
        this.blocking = true;
        try {
          reply = await this.untilClosed(
            this.reader!.xread('COUNT', READ_COUNT, 'BLOCK', READ_BLOCK_MS, 'STREAMS', ...keys, ...ids),
          );
        } finally {
          this.blocking = false;
        }
        if (reply === CLOSED) return;
        if (failing) {
          failing = false;
          backoff = 100;
          this.logger.warn('frame stream reads recovered; resynchronising held mailboxes');
          this.each((s) => s.onResync());
        }
        if (reply) this.dispatch(reply);
      } catch (error) {
        if (!this.running) break;
        this.options.onError?.('read');
        if (!failing) this.logger.warn(`frame stream read failed: ${(error as Error).message}`);
        failing = true;
        await this.untilClosed(sleep(backoff));
        backoff = Math.min(backoff * 2, 2_000);
      }
    }
  }

  /**
   * A reader command, or CLOSED as soon as close() begins. ioredis never settles a command queued
   * offline (the reader keeps its offline queue so reads survive a Redis blip) when the client is
   * disconnected while reconnecting: `disconnect()` cancels the pending reconnect, so no close
   * event flushes the queue. Without this race close() awaited that read forever after an outage.
   * Not `Promise.race` with one long-lived closing promise: every race left a reaction on it that
   * kept the race's result, so each XREAD reply stayed reachable until close (a leak that also made
   * every reply survive scavenges into the old generation).
   */
  private untilClosed<T>(command: Promise<T>): Promise<T | typeof CLOSED> {
    command.catch(() => undefined); // a command abandoned at close may still fail later
    if (this.closed) return Promise.resolve(CLOSED);
    return new Promise((resolve, reject) => {
      const onClose = () => resolve(CLOSED);
      this.closeWaiters.add(onClose);
      command.then(
        (value) => {
          this.closeWaiters.delete(onClose);
          resolve(value);
        },
        (error: unknown) => {
          this.closeWaiters.delete(onClose);
          reject(error); // eslint-disable-line @typescript-eslint/prefer-promise-reject-errors -- passes on the command's own rejection as is
        },
      );
    });
  }

  /** The id of the newest entry of a partition ('0-0' when empty): reading starts after it. */
  private async tailId(client: Redis, partition: number): Promise<string> {
    const last = (await client.xrevrange(this.streamKey(partition), '+', '-', 'COUNT', 1)) as Array<[string, string[]]>;
    return last[0]?.[0] ?? '0-0';
  }

  /** Sleep up to `ms`, or until a partition finished attaching (the read loop is the only sleeper). */
  private idle(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(() => this.wake?.(), ms);
      this.wake = () => {
        clearTimeout(timer);
        this.wake = undefined;
        resolve();
      };
    });
  }

  /**
   * Hand a read's frames to the subscribers. The hot loop of a gateway (once per frame of every held
   * mailbox), so it allocates only the frames it delivers: each entry's fields are read in one pass,
   * the `mailbox:seq` pairs are parsed in place, and the partition's last id moves once per read.
   * An envelope's entries in several partitions carry equal header text: every frame of it gets the
   * first entry's string, so a gateway frames that text for the wire once (see SocketSender).
   */
  private dispatch(reply: NonNullable<StreamReply>): void {
    const now = Date.now();
    const headers = new Map<string, string>();
    for (const [key, entries] of reply) {
      if (entries.length === 0) continue;
      const partition = Number(key.slice(key.lastIndexOf(':') + 1));
      // Entries come oldest first; never move back: an older read that returns late must not replay
      // frames (monitor facts have no seq).
      const newest = entries[entries.length - 1][0];
      const last = this.lastIds.get(partition);
      if (this.heldPartitions.has(partition) && (last === undefined || compareStreamIds(newest, last) > 0))
        this.lastIds.set(partition, newest);
      for (const [id, fields] of entries) {
        this.options.onReadLag?.(now - Number(id.slice(0, id.indexOf('-'))));
        const entry = readEntry(fields);
        if (entry.kind === 'monitor') {
          const mailboxId = Number(entry.monitorMailbox);
          if (this.heldMailboxes.has(mailboxId))
            for (const s of this.subscribers) s.onMonitor({ mailbox_id: mailboxId, frame: entry.header });
          continue;
        }
        const envelopeId = entry.envelopeId;
        const createdAt = Number(entry.createdAt);
        const committedAt = Number(entry.committedAt);
        let header = headers.get(envelopeId);
        if (header !== entry.header) headers.set(envelopeId, (header = entry.header));
        const pairs = entry.recipients;
        // `mailbox:seq,mailbox:seq,…`, decimal digits only (publish writes them from integers).
        for (let i = 0; i < pairs.length; i++) {
          let mailboxId = 0;
          for (let c = pairs.charCodeAt(i); c !== COLON && i < pairs.length; c = pairs.charCodeAt(++i))
            mailboxId = mailboxId * 10 + (c - ZERO);
          let seq = 0;
          for (let c = pairs.charCodeAt(++i); c !== COMMA && i < pairs.length; c = pairs.charCodeAt(++i))
            seq = seq * 10 + (c - ZERO);
          if (!this.heldMailboxes.has(mailboxId)) continue;
          const frame = { mailbox_id: mailboxId, seq, envelope_id: envelopeId, created_at: createdAt, header };
          for (const s of this.subscribers) s.onFrame(frame, committedAt);
        }
      }
    }
  }

  private each(deliver: (subscriber: FrameSubscriber) => void): void {
    for (const subscriber of this.subscribers) deliver(subscriber);
  }

  async close(): Promise<void> {
    this.running = false;
    this.closed = true;
    for (const onClose of this.closeWaiters) onClose();
    this.closeWaiters.clear();
    this.wake?.();
    this.reader?.disconnect();
    this.control?.disconnect();
    await this.loop?.catch(() => undefined);
    this.commands.disconnect();
  }
}

const COLON = 58;
const COMMA = 44;
const ZERO = 48;

/** The fields of one stream entry, as `publish` writes them; absent ones are empty. */
interface StreamEntry {
  kind: string;
  recipients: string;
  envelopeId: string;
  createdAt: string;
  committedAt: string;
  header: string;
  monitorMailbox: string;
}

/** One pass over an entry's `[name, value, name, value, …]` list. */
function readEntry(fields: string[]): StreamEntry {
  const entry: StreamEntry = {
    kind: '',
    recipients: '',
    envelopeId: '',
    createdAt: '',
    committedAt: '',
    header: '',
    monitorMailbox: '',
  };
  for (let i = 0; i + 1 < fields.length; i += 2) {
    const value = fields[i + 1];
    switch (fields[i]) {
      case 'r':
        entry.recipients = value;
        break;
      case 'e':
        entry.envelopeId = value;
        break;
      case 't':
        entry.createdAt = value;
        break;
      case 'c':
        entry.committedAt = value;
        break;
      case 'h':
        entry.header = value;
        break;
      case 'k':
        entry.kind = value;
        break;
      case 'm':
        entry.monitorMailbox = value;
        break;
    }
  }
  return entry;
}

/** What a read-loop wait yields once close() has begun. */
const CLOSED = Symbol('closed');

/** Order of two stream ids `<ms>-<n>`. */
function compareStreamIds(a: string, b: string): number {
  const [aMs, aSeq] = a.split('-').map(Number);
  const [bMs, bSeq] = b.split('-').map(Number);
  return aMs !== bMs ? aMs - bMs : aSeq - bSeq;
}
