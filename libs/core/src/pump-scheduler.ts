/** Most event-loop turns, and milliseconds, one gathering pump waits while requests keep coming. */
const GATHER_MAX_TURNS = 256;
const GATHER_MAX_MS = 50;

/**
 * When a queue's pump runs: at once; with `gather: 'turn'`, at the end of the current event-loop
 * turn, so every request one poll of the sockets delivered joins it (on Postgres: one lookup query
 * for a burst instead of one per request while a slot is free, at the cost of one turn); or (with
 * `gather: true`) on a later event-loop turn. Gathering is
 * for a database whose queries run on the event loop itself (PGlite): a batch started at once
 * would hold the only session while the rest of the turn's callers queue behind it one by one.
 * A gathering pump waits for a whole turn that brought no new request (bounded by
 * GATHER_MAX_TURNS / GATHER_MAX_MS): Node accepts one new connection per turn (libuv ≥ 1.45),
 * so a burst on fresh connections arrives one request a turn, and pumping after the first turn
 * committed each of them alone.
 */
export class PumpScheduler {
  private scheduled = false;
  private requests = 0;
  private seen = 0;
  private turns = 0;
  private since = 0;
  /** `'turn'` is the gathering pump bounded to its first check: the end of the current turn. */
  private readonly maxTurns: number;

  constructor(
    private readonly gather: boolean | 'turn',
    private readonly pump: () => void,
  ) {
    this.maxTurns = gather === 'turn' ? 1 : GATHER_MAX_TURNS;
  }

  request(): void {
    if (!this.gather) return this.pump();
    this.requests++;
    if (this.scheduled) return;
    this.scheduled = true;
    // The first check always waits one more turn: the next connection is accepted on the next one.
    this.seen = this.requests - 1;
    this.turns = 0;
    this.since = performance.now();
    setImmediate(() => this.check());
  }

  private check(): void {
    const arrived = this.requests !== this.seen;
    this.seen = this.requests;
    if (arrived && ++this.turns < this.maxTurns && performance.now() - this.since < GATHER_MAX_MS) {
      setImmediate(() => this.check());
      return;
    }
    this.scheduled = false;
    this.pump();
  }
}
