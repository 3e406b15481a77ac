import type { MailboxState } from '#db';

/** What the lock-free (compare-and-set) write reported: see `EnvelopesRepository.insertAllIfCurrent`. */
export type CompareAndSetResult = 'written' | 'stale' | 'id_taken';

/** Mailbox states (and contended marks) remembered for the lock-free path, a few dozen bytes each. */
export const REMEMBERED_MAX = 100_000;
/** A mailbox another writer moved on is written under the lock for this long before trying again. */
export const CONTENDED_MS = 5_000;

/**
 * Each mailbox's state as this node's last commit to it left it, for the lock-free accept path,
 * and the mailboxes another writer moved on recently, which take the locking path for a while.
 * Both maps are bounded; insertion order is age.
 */
export class MailboxStateCache {
  private readonly remembered = new Map<number, MailboxState>();
  /** Mailbox → when to try the lock-free path again. */
  private readonly contended = new Map<number, number>();

  constructor(
    private readonly now: () => number,
    private readonly max = REMEMBERED_MAX,
    private readonly contendedMs = CONTENDED_MS,
  ) {}

  /**
   * Every mailbox's state to write against, unless one is unknown or recently contended: per
   * mailbox the newer (`last_seq` only grows) of the remembered state and the one `lookedUp` (read
   * by the senders' lookups, maybe after another writer's commit this node never saw).
   */
  statesOf(mailboxIds: readonly number[], lookedUp?: ReadonlyMap<number, MailboxState>): MailboxState[] | undefined {
    const now = this.now();
    const states: MailboxState[] = [];
    for (const id of mailboxIds) {
      const until = this.contended.get(id);
      if (until !== undefined) {
        if (until > now) return undefined;
        this.contended.delete(id);
      }
      const remembered = this.remembered.get(id);
      const seen = lookedUp?.get(id);
      const state =
        seen === undefined || (remembered !== undefined && remembered.last_seq >= seen.last_seq) ? remembered : seen;
      if (state === undefined) return undefined;
      states.push(state);
    }
    return states;
  }

  /** The states a commit of this node left its mailboxes in. */
  remember(states: readonly MailboxState[]): void {
    for (const state of states) {
      this.remembered.delete(state.agent_id);
      this.remembered.set(state.agent_id, state);
    }
    trimOldest(this.remembered, this.max);
  }

  /** Forget what a commit of unknown outcome (a lost connection) may have changed. */
  forget(mailboxIds: readonly number[]): void {
    for (const id of mailboxIds) this.remembered.delete(id);
  }

  /**
   * Take in a lock-free write's result; true when the batch is committed. `written` remembers the
   * new states; `stale` (another writer moved a mailbox on, or it is gone) forgets them and keeps
   * the mailboxes on the locking path for `contendedMs`, looked-up states or not: a state read by a
   * lookup that another writer beat to the mailbox means two writers at once, where every further
   * try would likely be a statement wasted; `id_taken` leaves the states current.
   */
  settle(mailboxIds: readonly number[], result: CompareAndSetResult, states: readonly MailboxState[]): boolean {
    if (result === 'written') this.remember(states);
    if (result === 'stale') this.markContended(mailboxIds);
    return result === 'written';
  }

  private markContended(mailboxIds: readonly number[]): void {
    const until = this.now() + this.contendedMs;
    for (const id of mailboxIds) {
      this.remembered.delete(id);
      this.contended.delete(id);
      this.contended.set(id, until);
    }
    trimOldest(this.contended, this.max);
  }
}

/** Drop the oldest entries (insertion order) beyond `max`. */
function trimOldest(map: Map<number, unknown>, max: number): void {
  for (const id of map.keys()) {
    if (map.size <= max) return;
    map.delete(id);
  }
}
