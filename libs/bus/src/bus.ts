/** One header frame for one recipient mailbox, published after the accept transaction commits. */
export interface HeaderFrame {
  mailbox_id: number;
  seq: number;
  envelope_id: string;
  created_at: number;
  /** The `envelope.notify` JSON text, exactly as the socket will carry it. */
  header: string;
}

/** A `monitor.fact` frame for the sender's sockets (ASMTP.md §6.4); never persisted or replayed. */
export interface MonitorFrame {
  mailbox_id: number;
  frame: string;
}

/** What one accept commit produced: header frames in recipient order, then monitor facts. */
export interface Delivery {
  /** Wall clock at commit, for the commit-to-socket latency metric. */
  committed_at: number;
  frames: HeaderFrame[];
  monitor: MonitorFrame[];
}

/** Control messages every gateway must see (close an agent's sockets on token rotation or deletion). */
export interface AgentControl {
  kind: 'revoke';
  mailbox_id: number;
}

/** What a gateway receives from the bus. */
export interface FrameSubscriber {
  onFrame(frame: HeaderFrame, committedAt: number): void;
  onMonitor(frame: MonitorFrame): void;
  onControl(control: AgentControl): void;
  /** Frames may have been lost (bus reconnected, stream trimmed): check held mailboxes against Postgres. */
  onResync(): void;
}

/** One partition stream as a metrics scrape sees it. */
export interface StreamStats {
  partition: number;
  /** Entries in the stream (XLEN). */
  length: number;
  /** Entries after the last one this process read; only for partitions it holds (a gateway). */
  lagEntries?: number;
}

/**
 * The frame bus port: api nodes publish after commit, gateways subscribe to the mailboxes whose
 * sockets they hold. Adapters: Redis Streams (production) and in-process (embedded). Publishing is
 * best-effort by design: gateways backfill gaps from Postgres by `seq`, so a lost publish costs
 * latency, never an envelope.
 */
export abstract class FrameBus {
  abstract publish(delivery: Delivery): Promise<void>;
  abstract publishControl(control: AgentControl): Promise<void>;
  /**
   * Start delivering to `subscriber`: the gateway, and the api's MCP mail watch. Each gets every
   * frame of every held mailbox and filters by the mailboxes it holds itself.
   */
  abstract subscribe(subscriber: FrameSubscriber): void;
  /**
   * The gateway now holds sockets of this mailbox. Resolves once every frame published from then on
   * reaches the subscriber, so a socket reads its starting `seq` only after that (never rejects).
   */
  abstract hold(mailboxId: number): Promise<void>;
  /** The gateway no longer holds sockets of this mailbox. */
  abstract release(mailboxId: number): void;
  /** Drop frames older than `maxAgeMs` (gateways backfill from Postgres anyway); returns entries removed. */
  abstract trim(maxAgeMs: number): Promise<number>;
  /** Is the bus's own dependency reachable (readiness)? */
  abstract ready(): Promise<boolean>;
  /** Length (and, where held, read lag) of each partition stream; empty without streams. */
  abstract stats(): Promise<StreamStats[]>;
}
