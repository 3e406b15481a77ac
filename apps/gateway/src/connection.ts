import type { WebSocket } from 'ws';
import type { HeaderFrame } from '#bus';

export type InboxItem =
  | { kind: 'frame'; frame: HeaderFrame; committedAt: number }
  | { kind: 'monitor'; text: string }
  | { kind: 'catch-up'; through: number };

/** One open `/connect` socket and where it stands in its mailbox's `seq` sequence. */
export class Connection {
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
  private startSeq = 0;
  private readonly graceSent = new Set<number>();

  constructor(
    readonly ws: WebSocket,
    readonly mailboxId: number,
    readonly tokenHash: string,
  ) {}

  /** A plain socket starts at the mailbox's `seq` as read once it was registered. */
  startAt(lastSeq: number): void {
    this.lastSeq = lastSeq;
    this.startSeq = lastSeq;
  }

  /**
   * Whether the frame at `seq` (at or below `lastSeq`) is a starting-window frame still to be sent;
   * if so it is marked sent, so each goes out once.
   */
  claimStartWindowFrame(seq: number): boolean {
    if (seq > this.startSeq || this.graceSent.has(seq)) return false;
    this.graceSent.add(seq);
    return true;
  }
}
