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

/**
 * Compares every held mailbox with Postgres, so a lost publish, a trimmed stream or a Redis
 * restart costs latency, never an envelope, and a lost revoke still closes the socket. One sweep
 * runs at a time; one asked for meanwhile is skipped (the next interval covers it).
 */
export class Sweeper {
  private sweeping = false;

  constructor(
    private readonly registry: ConnectionRegistry,
    private readonly mailbox: Pick<MailboxRepository, 'lastSeqs'>,
    private readonly agents: Pick<AgentsRepository, 'tokenHashes'>,
    private readonly actions: SweepActions,
    private readonly logger: Pick<Logger, 'warn'>,
  ) {}

  async sweep(cause: 'sweep' | 'resync'): Promise<void> {
    if (this.sweeping || this.registry.mailboxCount === 0) return;
    this.sweeping = true;
    try {
      const ids = this.registry.mailboxIds();
      const [lastSeqs, tokens] = await Promise.all([this.mailbox.lastSeqs(ids), this.agents.tokenHashes(ids)]);
      // Only the mailboxes asked about: one first held during the queries has no answer yet (and
      // must not be mistaken for a revoked one).
      for (const mailboxId of ids) {
        for (const connection of this.registry.of(mailboxId)) {
          if (tokens.get(mailboxId) !== connection.tokenHash) {
            this.actions.revoke(connection);
            continue;
          }
          const last = lastSeqs.get(mailboxId) ?? 0;
          if (connection.state === 'live' && last > connection.lastSeq) this.actions.catchUp(connection, last);
        }
      }
    } catch (error) {
      this.logger.warn(`${cause} of held mailboxes failed: ${(error as Error).message}`);
    } finally {
      this.sweeping = false;
    }
  }
}
