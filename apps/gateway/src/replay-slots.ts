/**
 * The resume replays one gateway runs at once (`ROOST_WS_REPLAY_CONCURRENCY`, EXTENSIONS.md §7).
 * More wait their turn, never refused. Turns go first come first served, except that one mailbox
 * holds at most a quarter of the slots (at least one), so an agent opening many resuming sockets
 * cannot take every slot while other agents wait.
 */
export class ReplaySlots {
  private active = 0;
  private readonly perMailbox = new Map<number, number>();
  private readonly waiting: { mailboxId: number; grant: () => void }[] = [];
  /** Most slots one mailbox holds at once. */
  readonly perMailboxMax: number;

  constructor(
    /** 0 = no bound. */
    private readonly slots: number,
    private readonly onChange: (active: number, waiting: number) => void = () => undefined,
  ) {
    this.perMailboxMax = slots === 0 ? Infinity : Math.max(1, Math.floor(slots / 4));
  }

  /** Resolves with the slot's release once the replay may run. */
  acquire(mailboxId: number): Promise<() => void> {
    return new Promise((resolve) => {
      this.waiting.push({ mailboxId, grant: () => resolve(this.releaser(mailboxId)) });
      this.pump();
    });
  }

  private releaser(mailboxId: number): () => void {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.active--;
      const held = (this.perMailbox.get(mailboxId) ?? 1) - 1;
      if (held === 0) this.perMailbox.delete(mailboxId);
      else this.perMailbox.set(mailboxId, held);
      this.pump();
    };
  }

  private pump(): void {
    while (this.slots === 0 || this.active < this.slots) {
      const next = this.waiting.findIndex(
        (waiter) => (this.perMailbox.get(waiter.mailboxId) ?? 0) < this.perMailboxMax,
      );
      if (next < 0) break;
      const [waiter] = this.waiting.splice(next, 1);
      this.active++;
      this.perMailbox.set(waiter.mailboxId, (this.perMailbox.get(waiter.mailboxId) ?? 0) + 1);
      waiter.grant();
    }
    this.onChange(this.active, this.waiting.length);
  }
}
