import type { Logger } from '@nestjs/common';
import type { AgentsRepository, MailboxRepository } from '#db';
import type { Connection } from './connection';
import type { ConnectionRegistry } from './connection-registry';

/** What a sweep found for one socket. */
export interface SweepActions {
  /** Its token was rotated or its agent deleted (the revoke message itself may have been lost). */
  revoke(connection: Connection): void;
  /** Postgres holds entries past what it was sent: fill through `through`. */
  catchUp(connection: Connection, through: number): void;
}

/** The longest grace a periodic sweep gives a socket behind Postgres before backfilling it. */
export const MAX_SWEEP_GRACE_MS = 1_000;

/** Half the sweep interval, at most `MAX_SWEEP_GRACE_MS`. */
export function sweepGraceMs(intervalMs: number): number {
  return Math.min(Math.floor(intervalMs / 2), MAX_SWEEP_GRACE_MS);
}

/**
 * Compares every held mailbox with Postgres, so a lost publish, a trimmed stream or a Redis
 * restart costs latency, never an envelope, and a lost revoke still closes the socket. One sweep
 * runs at a time; one asked for meanwhile is skipped (the next interval covers it).
 *
 * Under load a socket is behind Postgres mostly because its live frames are still in flight
 * (published, not yet read from the stream): a periodic sweep therefore only notes who is behind
 * and which `seq` Postgres had, and after `graceMs` backfills only the sockets still short of that
 * `seq` (a storm of needless backfills once timed out the gateway's pool). A lost frame thus
 * arrives at most one interval plus the grace (plus the queries) after its commit. A `resync`
 * (after a Redis reconnect, when frames were surely lost) backfills at once.
 */
export class Sweeper {
  private sweeping = false;
  private readonly graceTimers = new Set<NodeJS.Timeout>();

  constructor(
    private readonly registry: ConnectionRegistry,
    private readonly mailbox: Pick<MailboxRepository, 'lastSeqs'>,
    private readonly agents: Pick<AgentsRepository, 'tokenHashes'>,
    private readonly actions: SweepActions,
    private readonly logger: Pick<Logger, 'warn'>,
    /** How long a periodic sweep lets a socket behind catch up through live frames; 0 = none. */
    private readonly graceMs = 0,
  ) {}

  async sweep(cause: 'sweep' | 'resync'): Promise<void> {
    if (this.sweeping || this.registry.mailboxCount === 0) return;
    this.sweeping = true;
    try {
      const ids = this.registry.mailboxIds();
      const [lastSeqs, tokens] = await Promise.all([this.mailbox.lastSeqs(ids), this.agents.tokenHashes(ids)]);
      const behind: Array<[Connection, number]> = [];
      // Only the mailboxes asked about: one first held during the queries has no answer yet (and
      // must not be mistaken for a revoked one).
      for (const mailboxId of ids) {
        for (const connection of this.registry.of(mailboxId)) {
          if (tokens.get(mailboxId) !== connection.tokenHash) {
            this.actions.revoke(connection);
            continue;
          }
          const last = lastSeqs.get(mailboxId) ?? 0;
          if (connection.state === 'live' && last > connection.lastSeq) behind.push([connection, last]);
        }
      }
      if (cause === 'resync' || this.graceMs <= 0) this.catchUp(behind);
      else if (behind.length > 0) this.recheck(behind);
    } catch (error) {
      this.logger.warn(`${cause} of held mailboxes failed: ${(error as Error).message}`);
    } finally {
      this.sweeping = false;
    }
  }

  /** Drop pending re-checks (shutdown). */
  stop(): void {
    for (const timer of this.graceTimers) clearTimeout(timer);
    this.graceTimers.clear();
  }

  /** After the grace, backfill the sockets still short of the `seq` Postgres had. */
  private recheck(behind: Array<[Connection, number]>): void {
    const timer = setTimeout(() => {
      this.graceTimers.delete(timer);
      this.catchUp(behind);
    }, this.graceMs);
    timer.unref();
    this.graceTimers.add(timer);
  }

  private catchUp(behind: Array<[Connection, number]>): void {
    for (const [connection, through] of behind) {
      if (!connection.closed && connection.state === 'live' && connection.lastSeq < through) {
        this.actions.catchUp(connection, through);
      }
    }
  }
}
