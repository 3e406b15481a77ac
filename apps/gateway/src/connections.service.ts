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
import { CLOSE_CODES, type Cursor } from '#domain';
import { Metrics } from '#metrics';
import { Connection } from './connection';
import { ConnectionRegistry } from './connection-registry';
import { ReplaySlots } from './replay-slots';
import { Replayer } from './replay';
import { SocketSender } from './socket-sender';
import { StartLookups } from './start-lookups';
import { Sweeper, sweepGraceMs, type SweepActions } from './sweep';
import type { ConnectAuth } from './ws-adapter';

/** Close codes (EXTENSIONS.md §1), named once in libs/domain `CLOSE_CODES`. */
export const CLOSE_SLOW_CONSUMER = CLOSE_CODES.slowConsumer;
export const CLOSE_REVOKED = CLOSE_CODES.revoked;
export const CLOSE_SERVICE_RESTART = CLOSE_CODES.serviceRestart;

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
  private readonly registry = new ConnectionRegistry();
  private pingTimer: NodeJS.Timeout | undefined;
  private sweepTimer: NodeJS.Timeout | undefined;
  private readonly startLookups: StartLookups;
  /** Resume replays run a few at a time per gateway (EXTENSIONS.md §7). */
  private readonly replaySlots: ReplaySlots;
  private readonly sender: SocketSender;
  private readonly replayer: Replayer;
  private readonly sweeper: Sweeper;
  /** Overridable for tests that need an injected clock. */
  now: () => number = Date.now;

  constructor(
    private readonly bus: FrameBus,
    mailbox: MailboxRepository,
    agents: AgentsRepository,
    retention: RetentionRepository,
    private readonly metrics: Metrics,
    @InjectConfig() private readonly config: Config,
  ) {
    this.replaySlots = new ReplaySlots(config.gateway.replayConcurrency, (active, waiting) => {
      metrics.replays.set({ state: 'active' }, active);
      metrics.replays.set({ state: 'waiting' }, waiting);
    });
    const now = () => this.now();
    this.startLookups = new StartLookups(agents, mailbox);
    this.sender = new SocketSender(metrics, this.logger, config.gateway.maxBufferedBytes, now);
    this.replayer = new Replayer(mailbox, retention, this.sender, metrics, config.gateway.replayFramesPerSecond, now);
    const onSweep: SweepActions = {
      revoke: (connection) => this.sender.close(connection, CLOSE_CODES.revoked, 'token revoked', 'revoked'),
      catchUp: (connection, through) => {
        connection.inbox.push({ kind: 'catch-up', through });
        void this.drain(connection);
      },
    };
    this.sweeper = new Sweeper(
      this.registry,
      mailbox,
      agents,
      onSweep,
      this.logger,
      sweepGraceMs(config.gateway.sweepIntervalMs),
    );
  }

  onModuleInit(): void {
    this.bus.subscribe(this);
    this.pingTimer = setInterval(
      () => this.sender.ping(this.registry.all()),
      this.config.gateway.pingIntervalMs,
    ).unref();
    this.sweepTimer = setInterval(() => void this.sweeper.sweep('sweep'), this.config.gateway.sweepIntervalMs).unref();
  }

  onModuleDestroy(): void {
    clearInterval(this.pingTimer);
    clearInterval(this.sweepTimer);
    this.sweeper.stop();
  }

  /** SIGTERM: close every socket with 1012 so clients reconnect elsewhere at once. */
  beforeApplicationShutdown(): void {
    for (const connection of this.registry.all())
      this.sender.close(connection, CLOSE_CODES.serviceRestart, 'service restart', 'drain');
  }

  get connectionCount(): number {
    return this.registry.size;
  }

  open(ws: WebSocket, auth: ConnectAuth): void {
    const connection = new Connection(ws, auth.agent.id, auth.tokenHash);
    this.registry.add(connection);
    const held = this.bus.hold(connection.mailboxId);
    this.metrics.wsConnections.inc();
    ws.on('pong', () => (connection.missedPongs = 0));
    ws.on('close', () => this.forget(connection));
    ws.on('error', () => undefined);
    void this.start(connection, auth.cursor, held);
  }

  // --- FrameSubscriber -------------------------------------------------------------------

  onFrame(frame: HeaderFrame, committedAt: number): void {
    for (const connection of this.registry.of(frame.mailbox_id)) {
      connection.inbox.push({ kind: 'frame', frame, committedAt });
      this.pump(connection);
    }
  }

  /** Queued behind the header frames before it, so a fact never overtakes its notify (ASMTP.md §6.4). */
  onMonitor(frame: MonitorFrame): void {
    for (const connection of this.registry.of(frame.mailbox_id)) {
      connection.inbox.push({ kind: 'monitor', text: frame.frame });
      this.pump(connection);
    }
  }

  onControl(control: AgentControl): void {
    if (control.kind !== 'revoke') return;
    for (const connection of this.registry.of(control.mailbox_id)) {
      this.sender.close(connection, CLOSE_CODES.revoked, 'token revoked', 'revoked');
    }
  }

  onResync(): void {
    void this.sweeper.sweep('resync');
  }

  // --- delivery ----------------------------------------------------------------------------

  private async start(connection: Connection, cursor: Cursor | undefined, held: Promise<void>): Promise<void> {
    try {
      // The starting `seq` is read only once the bus delivers this mailbox's frames: no gap between.
      await held;
      // A rotation or deletion committed between the upgrade's token check and this socket's
      // registration sent its revoke before the socket could hear it: check once more.
      const state = await this.startLookups.lookup(connection.mailboxId);
      if (state.tokenHash !== connection.tokenHash) {
        this.sender.close(connection, CLOSE_CODES.revoked, 'token revoked', 'revoked');
        return;
      }
      if (cursor) {
        // Live frames are held in the inbox meanwhile and drained after `replay.complete`.
        const release = await this.replaySlots.acquire(connection.mailboxId);
        try {
          if (connection.closed) return;
          await this.replayer.replay(connection, cursor);
        } finally {
          release();
        }
      } else {
        connection.startAt(state.lastSeq);
      }
      connection.state = 'live';
      await this.drain(connection);
    } catch (error) {
      this.logger.warn(`could not start a socket: ${(error as Error).message}`);
      this.sender.close(connection, CLOSE_CODES.internalError, 'internal error', 'error');
    }
  }

  /**
   * Send held and live frames in arrival order (header frames in `seq` order); a frame past
   * `lastSeq + 1` first backfills the gap. A bus delivery that needs no backfill is sent right
   * here, synchronously: no promise per frame on the fan-out path.
   */
  private pump(connection: Connection): void {
    if (connection.draining || connection.state !== 'live') return;
    try {
      if (!this.sendReady(connection)) void this.drain(connection);
    } catch (error) {
      this.failed(connection, error);
    }
  }

  /**
   * Send the inbox's items in order until one needs a backfill from Postgres (left at the head):
   * false then, true once the inbox is empty or the socket closed.
   */
  private sendReady(connection: Connection): boolean {
    const inbox = connection.inbox;
    while (inbox.length > 0 && !connection.closed) {
      const item = inbox[0];
      if (item.kind === 'catch-up') {
        if (item.through > connection.lastSeq) return false;
        inbox.shift();
        continue;
      }
      if (item.kind === 'monitor') {
        inbox.shift();
        this.sender.send(connection, item.text, 'monitor');
        continue;
      }
      const { frame } = item;
      if (frame.seq <= connection.lastSeq) {
        inbox.shift();
        if (connection.claimStartWindowFrame(frame.seq)) this.sender.send(connection, frame.header, 'notify');
        continue;
      }
      if (frame.seq > connection.lastSeq + 1) return false;
      inbox.shift();
      this.sendLive(connection, frame, item.committedAt);
    }
    return true;
  }

  private sendLive(connection: Connection, frame: HeaderFrame, committedAt: number): void {
    this.sender.send(connection, frame.header, 'notify');
    // The commit was stamped by another process's wall clock: measured on this one's.
    this.metrics.commitToSocket.observe(Math.max(0, Date.now() - committedAt) / 1000);
    connection.lastSeq = frame.seq;
  }

  /** `sendReady`, and the backfills it stops at, until the inbox is empty. */
  private async drain(connection: Connection): Promise<void> {
    if (connection.draining || connection.state !== 'live') return;
    connection.draining = true;
    try {
      while (!this.sendReady(connection)) {
        // The head item needs a backfill: a sweep's catch-up, or a frame past `lastSeq + 1`.
        const item = connection.inbox.shift()!;
        if (item.kind === 'catch-up') {
          await this.replayer.backfill(connection, item.through, 'sweep');
          continue;
        }
        if (item.kind !== 'frame') continue; // never: sendReady sends monitor facts itself
        const { frame } = item;
        await this.replayer.backfill(connection, frame.seq - 1, 'gap');
        if (frame.seq <= connection.lastSeq || connection.closed) continue;
        this.sendLive(connection, frame, item.committedAt);
      }
    } catch (error) {
      this.failed(connection, error);
    } finally {
      connection.draining = false;
    }
  }

  private failed(connection: Connection, error: unknown): void {
    this.logger.warn(`delivery to a socket failed: ${(error as Error).message}`);
    // The socket is closed: the client resumes from its cursor, nothing is lost.
    this.sender.close(connection, CLOSE_CODES.internalError, 'internal error', 'error');
  }

  private forget(connection: Connection): void {
    connection.closed = true;
    if (!this.registry.remove(connection)) return;
    this.bus.release(connection.mailboxId);
    this.metrics.wsConnections.dec();
  }
}
