import type { AgentsRepository, MailboxRepository } from '#db';
import { Coalescer } from '#core';

/** Most starting sockets whose token and `seq` are read by one query pair. */
export const START_BATCH_MAX = 1_000;

/** What a starting socket reads once registered: its agent's current token hash and mailbox `seq`. */
export interface StartState {
  tokenHash: string | undefined;
  lastSeq: number;
}

/**
 * The token hash and mailbox `seq` of starting sockets, read after their registration. Sockets
 * starting together (a reconnect storm after a gateway restart) share one query pair instead of
 * two queries each: one batch runs at a time while the next one fills.
 */
export class StartLookups {
  private readonly coalescer: Coalescer<number, StartState>;

  constructor(agents: Pick<AgentsRepository, 'tokenHashes'>, mailbox: Pick<MailboxRepository, 'lastSeqs'>) {
    this.coalescer = new Coalescer(
      async (mailboxIds) => {
        const ids = [...new Set(mailboxIds)];
        const [tokens, seqs] = await Promise.all([agents.tokenHashes(ids), mailbox.lastSeqs(ids)]);
        return mailboxIds.map((id) => ({ tokenHash: tokens.get(id), lastSeq: seqs.get(id) ?? 0 }));
      },
      1,
      START_BATCH_MAX,
    );
  }

  lookup(mailboxId: number): Promise<StartState> {
    return this.coalescer.load(mailboxId);
  }
}
