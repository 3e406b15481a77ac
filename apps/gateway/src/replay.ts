import type { MailboxRepository, RetentionRepository } from '#db';
import { compareCursors, type Cursor } from '#domain';
import type { Metrics } from '#metrics';
import type { Connection } from './connection';
import type { SocketSender } from './socket-sender';

/** Entries read from Postgres per query. */
export const PAGE = 500;
/** A replay ahead of its frame rate by more than this sleeps it off (fewer, longer timers). */
const REPLAY_PACE_SLACK_MS = 20;

/**
 * Frames read back from Postgres onto a socket: a resuming socket's replay after its cursor, and
 * the backfill of a gap (a lost publish, a trimmed stream) before a live frame or after a sweep.
 */
export class Replayer {
  constructor(
    private readonly mailbox: Pick<MailboxRepository, 'entriesBySeq' | 'lastSeqs' | 'seqAtOrBefore'>,
    private readonly retention: Pick<RetentionRepository, 'mark' | 'oldestEntry'>,
    private readonly sender: SocketSender,
    private readonly metrics: Metrics,
    /** Frames per second one socket's replay may send; 0 = no bound. */
    private readonly framesPerSecond: number,
    private readonly now: () => number = Date.now,
  ) {}

  /**
   * EXTENSIONS.md §1: every header after the cursor, in order, then `replay.complete`. A cursor
   * older than what retention kept first gets `cursor.expired` with the oldest retained entry.
   */
  async replay(connection: Connection, cursor: Cursor): Promise<void> {
    const purged = await this.retention.mark(connection.mailboxId);
    if (purged && compareCursors(cursor, purged) < 0) {
      const oldest = (await this.retention.oldestEntry(connection.mailboxId)) ?? null;
      this.sender.send(connection, JSON.stringify({ op: 'cursor.expired', oldest }), 'control');
    }
    connection.lastSeq = await this.mailbox.seqAtOrBefore(connection.mailboxId, cursor);
    const target = (await this.mailbox.lastSeqs([connection.mailboxId])).get(connection.mailboxId) ?? 0;
    let replayed = 0;
    let last: Cursor | null = null;
    const rate = this.framesPerSecond;
    const started = this.now();
    while (connection.lastSeq < target && !connection.closed) {
      const rows = await this.mailbox.entriesBySeq(connection.mailboxId, connection.lastSeq, target, PAGE);
      if (rows.length === 0) break;
      for (const row of rows) {
        // At most `rate` frames a second per socket: one agent's large replay cannot hog the gateway.
        const ahead = rate > 0 ? started + (replayed * 1000) / rate - this.now() : 0;
        if (ahead > REPLAY_PACE_SLACK_MS) await new Promise((resolve) => setTimeout(resolve, ahead));
        if (!(await this.sender.sendPaced(connection, row.header, 'replay'))) return;
        connection.lastSeq = row.seq;
        last = { created_at: row.created_at, envelope_id: row.envelope_id };
        replayed++;
        this.metrics.replayedFrames.inc();
      }
    }
    connection.lastSeq = Math.max(connection.lastSeq, target);
    this.sender.send(connection, JSON.stringify({ op: 'replay.complete', cursor: last, replayed }), 'control');
  }

  /** Send every entry after `lastSeq` through `through`; numbers with no entry left are skipped. */
  async backfill(connection: Connection, through: number, cause: 'gap' | 'sweep'): Promise<void> {
    this.metrics.backfills.inc({ cause });
    while (connection.lastSeq < through && !connection.closed) {
      const rows = await this.mailbox.entriesBySeq(connection.mailboxId, connection.lastSeq, through, PAGE);
      // A page's frames go out in as few socket writes as the send-buffer pacing allows.
      const headers = rows.map((row) => row.header);
      for (let sent = 0; sent < rows.length;) {
        const written = await this.sender.sendPacedSome(connection, headers, sent, 'notify');
        if (written === 0) return;
        sent += written;
        connection.lastSeq = rows[sent - 1].seq;
      }
      if (rows.length < PAGE) break;
    }
    // Sequence numbers with no entry left (retention) are skipped for good.
    connection.lastSeq = Math.max(connection.lastSeq, through);
  }
}
