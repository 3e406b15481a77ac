import {
  Injectable,
  Logger,
  type BeforeApplicationShutdown,
  type OnModuleDestroy,
  type OnModuleInit,
} from '@nestjs/common';
import type { WebSocket } from 'ws';
import { FrameBus, type AgentControl, type FrameSubscriber, type HeaderFrame, type MonitorFrame } from '#bus';
import { InjectConfig, type Config } from '#config';
import { AgentsRepository, MailboxRepository, RetentionRepository } from '#db';
import type { Cursor } from '#domain';
import { Metrics } from '#metrics';
import { ReplaySlots } from './replay-slots';
import type { ConnectAuth } from './ws-adapter';

/** Close codes (EXTENSIONS.md §1). */
export const CLOSE_SLOW_CONSUMER = 4008;
export const CLOSE_REVOKED = 4001;
export const CLOSE_SERVICE_RESTART = 1012;

const PAGE = 500;
/** How long a replay or backfill waits for a reader that makes no progress. */
const PACED_WAIT_MS = 30_000;
/** A replay ahead of its frame rate by more than this sleeps it off (fewer, longer timers). */
const REPLAY_PACE_SLACK_MS = 20;
const OPEN = 1;
/** Most starting sockets whose token and `seq` are read by one query pair. */
const START_BATCH_MAX = 1_000;

const compareCursors = (a: Cursor, b: Cursor): number =>
  a.created_at !== b.created_at ? a.created_at - b.created_at : a.envelope_id < b.envelope_id ? -1 : a.envelope_id > b.envelope_id ? 1 : 0;

/** What a starting socket reads once registered: its agent's current token hash and mailbox `seq`. */
interface StartState {
  tokenHash: string | undefined;
  lastSeq: number;
}

interface StartLookup {
  mailboxId: number;
  resolve: (state: StartState) => void;
  reject: (error: unknown) => void;
}

type InboxItem =
  | { kind: 'frame'; frame: HeaderFrame; committedAt: number }
  | { kind: 'monitor'; text: string }
  | { kind: 'catch-up'; through: number };

/** One open `/connect` socket and where it stands in its mailbox's `seq` sequence. */
class Connection {
  /** Highest mailbox `seq` sent (or deliberately skipped: connect point, deleted entries). */
  lastSeq = 0;
  state: 'starting' | 'live' = 'starting';
  readonly inbox: InboxItem[] = [];
  draining = false;
  missedPongs = 0;
  closed = false;
  /**
   * A plain (non-resuming) socket starts at the mailbox's `seq` read just after it registered. A
   * commit between the registration and that read has a `seq` at or below the start, yet happened
   * while the socket was open: its frame is still sent, once, however late the bus delivers it
   * (a 2 s limit dropped such frames for good on a loaded gateway: neither pushed nor in the
   * client's catch-up, which may already have run). Frames the bus delivered before the
   * registration never reach the socket; a lagging reader may add a few older ones (clients dedupe).
   */
  startSeq = 0;
  readonly graceSent = new Set<number>();

  constructor(
    readonly ws: WebSocket,
    readonly mailboxId: number,
    readonly tokenHash: string,
  ) {}
}

/**
 * Push delivery on one gateway (ASMTP.md §6, EXTENSIONS.md §1). Every socket tracks the last
 * mailbox `seq` it was sent; a frame that skips ahead is preceded by a backfill from Postgres, and a
 * periodic sweep compares held mailboxes with Postgres, so a lost publish, a trimmed stream or a
 * Redis restart costs latency, never an envelope. A resuming socket replays its `in` feed after the
 * cursor from Postgres while live frames are held, then drains them without gap or duplicate.
 */
@Injectable()
export class ConnectionsService implements FrameSubscriber, OnModuleInit, OnModuleDestroy, BeforeApplicationShutdown {
  private readonly logger = new Logger('gateway');
  private readonly byMailbox = new Map<number, Set<Connection>>();
  private pingTimer: NodeJS.Timeout | undefined;
  private sweepTimer: NodeJS.Timeout | undefined;
  private sweeping = false;
  /** Starting sockets waiting for their lookup; one batch runs at a time, later ones join the next. */
  private startQueue: StartLookup[] = [];
  private startRunning = false;
  /** Resume replays run a few at a time per gateway (EXTENSIONS.md §7). */
  private readonly replaySlots: ReplaySlots;

  constructor(
    private readonly bus: FrameBus,
    private readonly mailbox: MailboxRepository,
    private readonly agents: AgentsRepository,
    private readonly retention: RetentionRepository,
    private readonly metrics: Metrics,
    @InjectConfig() private readonly config: Config,
  ) {
    this.replaySlots = new ReplaySlots(config.gateway.replayConcurrency, (active, waiting) => {
      metrics.replays.set({ state: 'active' }, active);
      metrics.replays.set({ state: 'waiting' }, waiting);
    });
  }

  onModuleInit(): void {
    this.bus.subscribe(this);
    this.pingTimer = setInterval(() => this.ping(), this.config.gateway.pingIntervalMs).unref();
    this.sweepTimer = setInterval(() => void this.sweep('sweep'), this.config.gateway.sweepIntervalMs).unref();
  }

  onModuleDestroy(): void {
    clearInterval(this.pingTimer);
    clearInterval(this.sweepTimer);
  }

  /** SIGTERM: close every socket with 1012 so clients reconnect elsewhere at once. */
  beforeApplicationShutdown(): void {
    for (const connections of this.byMailbox.values()) {
      for (const connection of connections) this.close(connection, CLOSE_SERVICE_RESTART, 'service restart', 'drain');
    }
  }

  get connectionCount(): number {
    let count = 0;
    for (const connections of this.byMailbox.values()) count += connections.size;
    return count;
  }

  open(ws: WebSocket, auth: ConnectAuth): void {
    const connection = new Connection(ws, auth.agent.id, auth.tokenHash);
    let connections = this.byMailbox.get(connection.mailboxId);
    if (!connections) this.byMailbox.set(connection.mailboxId, (connections = new Set()));
    connections.add(connection);
    const held = this.bus.hold(connection.mailboxId);
    this.metrics.wsConnections.inc();
    ws.on('pong', () => (connection.missedPongs = 0));
    ws.on('close', () => this.forget(connection));
    ws.on('error', () => undefined);
    void this.start(connection, auth.cursor, held);
  }

  // --- FrameSubscriber -------------------------------------------------------------------

  onFrame(frame: HeaderFrame, committedAt: number): void {
    for (const connection of this.byMailbox.get(frame.mailbox_id) ?? []) {
      connection.inbox.push({ kind: 'frame', frame, committedAt });
      void this.drain(connection);
    }
  }

  /** Queued behind the header frames before it, so a fact never overtakes its notify (ASMTP.md §6.4). */
  onMonitor(frame: MonitorFrame): void {
    for (const connection of this.byMailbox.get(frame.mailbox_id) ?? []) {
      connection.inbox.push({ kind: 'monitor', text: frame.frame });
      void this.drain(connection);
    }
  }

  onControl(control: AgentControl): void {
    if (control.kind !== 'revoke') return;
    for (const connection of this.byMailbox.get(control.mailbox_id) ?? []) {
      this.close(connection, CLOSE_REVOKED, 'token revoked', 'revoked');
    }
  }

  onResync(): void {
    void this.sweep('resync');
  }

  // --- delivery ----------------------------------------------------------------------------

  private async start(connection: Connection, cursor: Cursor | undefined, held: Promise<void>): Promise<void> {
    try {
      // The starting `seq` is read only once the bus delivers this mailbox's frames: no gap between.
      await held;
      // A rotation or deletion committed between the upgrade's token check and this socket's
      // registration sent its revoke before the socket could hear it: check once more.
      const state = await this.lookupStart(connection.mailboxId);
      if (state.tokenHash !== connection.tokenHash) {
        this.close(connection, CLOSE_REVOKED, 'token revoked', 'revoked');
        return;
      }
      if (cursor) {
        // Live frames are held in the inbox meanwhile and drained after `replay.complete`.
        const release = await this.replaySlots.acquire(connection.mailboxId);
        try {
          if (connection.closed) return;
          await this.replay(connection, cursor);
        } finally {
          release();
        }
      } else {
        connection.lastSeq = state.lastSeq;
        connection.startSeq = connection.lastSeq;
      }
      connection.state = 'live';
      await this.drain(connection);
    } catch (error) {
      this.logger.warn(`could not start a socket: ${(error as Error).message}`);
      this.close(connection, 1011, 'internal error', 'error');
    }
  }

  /**
   * The token hash and mailbox `seq` of a starting socket, read after its registration. Sockets
   * starting together (a reconnect storm after a gateway restart) share one query pair instead of
   * two queries each: a batch runs while the next one fills.
   */
  private lookupStart(mailboxId: number): Promise<StartState> {
    return new Promise<StartState>((resolve, reject) => {
      this.startQueue.push({ mailboxId, resolve, reject });
      if (!this.startRunning) void this.runStartLookups();
    });
  }

  private async runStartLookups(): Promise<void> {
    this.startRunning = true;
    try {
      while (this.startQueue.length > 0) {
        const batch = this.startQueue.splice(0, START_BATCH_MAX);
        const ids = [...new Set(batch.map((lookup) => lookup.mailboxId))];
        try {
          const [tokens, seqs] = await Promise.all([this.agents.tokenHashes(ids), this.mailbox.lastSeqs(ids)]);
          for (const lookup of batch) lookup.resolve({ tokenHash: tokens.get(lookup.mailboxId), lastSeq: seqs.get(lookup.mailboxId) ?? 0 });
        } catch (error) {
          for (const lookup of batch) lookup.reject(error);
        }
      }
    } finally {
      this.startRunning = false;
    }
  }

  /**
   * EXTENSIONS.md §1: every header after the cursor, in order, then `replay.complete`. A cursor
   * older than what retention kept first gets `cursor.expired` with the oldest retained entry.
   */
  private async replay(connection: Connection, cursor: Cursor): Promise<void> {
    const purged = await this.retention.mark(connection.mailboxId);
    if (purged && compareCursors(cursor, purged) < 0) {
      const oldest = (await this.retention.oldestEntry(connection.mailboxId)) ?? null;
      this.send(connection, JSON.stringify({ op: 'cursor.expired', oldest }), 'control');
    }
    connection.lastSeq = await this.mailbox.seqAtOrBefore(connection.mailboxId, cursor);
    const target = (await this.mailbox.lastSeqs([connection.mailboxId])).get(connection.mailboxId) ?? 0;
    let replayed = 0;
    let last: Cursor | null = null;
    const rate = this.config.gateway.replayFramesPerSecond;
    const started = Date.now();
    while (connection.lastSeq < target && !connection.closed) {
      const rows = await this.mailbox.entriesBySeq(connection.mailboxId, connection.lastSeq, target, PAGE);
      if (rows.length === 0) break;
      for (const row of rows) {
        // At most `rate` frames a second per socket: one agent's large replay cannot hog the gateway.
        const ahead = rate > 0 ? started + (replayed * 1000) / rate - Date.now() : 0;
        if (ahead > REPLAY_PACE_SLACK_MS) await new Promise((resolve) => setTimeout(resolve, ahead));
        if (!(await this.sendPaced(connection, row.header, 'replay'))) return;
        connection.lastSeq = row.seq;
        last = { created_at: row.created_at, envelope_id: row.envelope_id };
        replayed++;
        this.metrics.replayedFrames.inc();
      }
    }
    connection.lastSeq = Math.max(connection.lastSeq, target);
    this.send(connection, JSON.stringify({ op: 'replay.complete', cursor: last, replayed }), 'control');
  }

  /**
   * Send held and live frames in arrival order (header frames in `seq` order); a frame past
   * `lastSeq + 1` first backfills the gap.
   */
  private async drain(connection: Connection): Promise<void> {
    if (connection.draining || connection.state !== 'live') return;
    connection.draining = true;
    try {
      while (connection.inbox.length > 0 && !connection.closed) {
        const item = connection.inbox.shift()!;
        if (item.kind === 'catch-up') {
          if (item.through > connection.lastSeq) await this.backfill(connection, item.through, 'sweep');
          continue;
        }
        if (item.kind === 'monitor') {
          this.send(connection, item.text, 'monitor');
          continue;
        }
        const { frame } = item;
        if (frame.seq <= connection.lastSeq) {
          if (this.startedWith(connection, frame.seq)) this.send(connection, frame.header, 'notify');
          continue;
        }
        if (frame.seq > connection.lastSeq + 1) await this.backfill(connection, frame.seq - 1, 'gap');
        if (frame.seq <= connection.lastSeq || connection.closed) continue;
        this.send(connection, frame.header, 'notify');
        this.metrics.commitToSocket.observe(Math.max(0, Date.now() - item.committedAt) / 1000);
        connection.lastSeq = frame.seq;
      }
    } catch (error) {
      this.logger.warn(`delivery to a socket failed: ${(error as Error).message}`);
      // The socket is closed: the client resumes from its cursor, nothing is lost.
      this.close(connection, 1011, 'internal error', 'error');
    } finally {
      connection.draining = false;
    }
  }

  /** A frame of a commit made while the socket was starting, not sent yet (see `Connection.startSeq`). */
  private startedWith(connection: Connection, seq: number): boolean {
    if (seq > connection.startSeq || connection.graceSent.has(seq)) return false;
    connection.graceSent.add(seq);
    return true;
  }

  private async backfill(connection: Connection, through: number, cause: 'gap' | 'sweep'): Promise<void> {
    this.metrics.backfills.inc({ cause });
    while (connection.lastSeq < through && !connection.closed) {
      const rows = await this.mailbox.entriesBySeq(connection.mailboxId, connection.lastSeq, through, PAGE);
      for (const row of rows) {
        if (!(await this.sendPaced(connection, row.header, 'notify'))) return;
        connection.lastSeq = row.seq;
      }
      if (rows.length < PAGE) break;
    }
    // Sequence numbers with no entry left (retention) are skipped for good.
    connection.lastSeq = Math.max(connection.lastSeq, through);
  }

  /**
   * Compare every held mailbox with Postgres: fill what the bus lost and close sockets whose token
   * was rotated or whose agent was deleted (in case the revoke message itself was lost).
   */
  private async sweep(cause: 'sweep' | 'resync'): Promise<void> {
    if (this.sweeping || this.byMailbox.size === 0) return;
    this.sweeping = true;
    try {
      const ids = [...this.byMailbox.keys()];
      const [lastSeqs, tokens] = await Promise.all([this.mailbox.lastSeqs(ids), this.agents.tokenHashes(ids)]);
      // Only the mailboxes asked about: one first held during the queries has no answer yet (and
      // must not be mistaken for a revoked one).
      for (const mailboxId of ids) {
        for (const connection of this.byMailbox.get(mailboxId) ?? []) {
          if (tokens.get(mailboxId) !== connection.tokenHash) {
            this.close(connection, CLOSE_REVOKED, 'token revoked', 'revoked');
            continue;
          }
          const last = lastSeqs.get(mailboxId) ?? 0;
          if (connection.state === 'live' && last > connection.lastSeq) {
            connection.inbox.push({ kind: 'catch-up', through: last });
            void this.drain(connection);
          }
        }
      }
    } catch (error) {
      this.logger.warn(`${cause} of held mailboxes failed: ${(error as Error).message}`);
    } finally {
      this.sweeping = false;
    }
  }

  private send(connection: Connection, text: string, kind: string): void {
    if (connection.closed || connection.ws.readyState !== OPEN) return;
    connection.ws.send(text);
    this.metrics.framesSent.inc({ kind });
    if (connection.ws.bufferedAmount > this.config.gateway.maxBufferedBytes) {
      this.close(connection, CLOSE_SLOW_CONSUMER, 'slow consumer, resume from cursor', 'slow_consumer');
    }
  }

  /**
   * Send a frame read from Postgres (replay, backfill): wait while the socket's buffer is above a
   * quarter of its bound instead of closing it as a slow consumer. Only a reader that makes no
   * progress for PACED_WAIT_MS is closed (4008). False when the socket is gone.
   */
  private async sendPaced(connection: Connection, text: string, kind: string): Promise<boolean> {
    const low = this.config.gateway.maxBufferedBytes / 4;
    const deadline = Date.now() + PACED_WAIT_MS;
    while (!connection.closed && connection.ws.bufferedAmount > low) {
      if (Date.now() > deadline) {
        this.close(connection, CLOSE_SLOW_CONSUMER, 'slow consumer, resume from cursor', 'slow_consumer');
        return false;
      }
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    if (connection.closed || connection.ws.readyState !== OPEN) return false;
    connection.ws.send(text);
    this.metrics.framesSent.inc({ kind });
    return true;
  }

  private ping(): void {
    for (const connections of this.byMailbox.values()) {
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
  }

  private close(connection: Connection, code: number, reason: string, metric: string): void {
    if (connection.closed) return;
    connection.closed = true;
    this.metrics.wsClosed.inc({ reason: metric });
    if (code === CLOSE_SLOW_CONSUMER) {
      this.metrics.slowConsumerCloses.inc();
      this.logger.debug(`socket closed 4008 (slow consumer): ${connection.ws.bufferedAmount} bytes unsent, bound ${this.config.gateway.maxBufferedBytes}`);
    }
    try {
      connection.ws.close(code, reason);
    } catch {
      connection.ws.terminate();
    }
    // A peer that never answers the close handshake is cut off.
    setTimeout(() => connection.ws.terminate(), 2_000).unref();
  }

  private forget(connection: Connection): void {
    connection.closed = true;
    const connections = this.byMailbox.get(connection.mailboxId);
    if (!connections?.delete(connection)) return;
    if (connections.size === 0) this.byMailbox.delete(connection.mailboxId);
    this.bus.release(connection.mailboxId);
    this.metrics.wsConnections.dec();
  }
}
