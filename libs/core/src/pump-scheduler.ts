/**
 * When a queue's pump runs: at once, or (with `gather`) once on the next event-loop turn for every
 * request made during this one. Gathering is for a database whose queries run on the event loop
 * itself (PGlite): a batch started at once would hold the only session while the rest of the
 * turn's callers queue behind it one by one.
 */
export class PumpScheduler {
  private scheduled = false;

  constructor(
    private readonly gather: boolean,
    private readonly pump: () => void,
  ) {}

  request(): void {
    if (!this.gather) return this.pump();
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      this.pump();
    });
  }
}
