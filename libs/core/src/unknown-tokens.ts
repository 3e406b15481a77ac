/**
 * How long a token hash that matched nothing is refused without a lookup. Only misses are kept, so
 * a revoked or rotated token is refused at once as before; the window only delays a token that
 * appears in the database without being minted by Roost (a restore) by this much.
 */
export const UNKNOWN_TOKEN_WINDOW_MS = 5_000;
/** Entries kept at most (oldest dropped first): a spray of random tokens cannot grow it further. */
const MAX_ENTRIES = 50_000;

/** Token hashes recently looked up and not found, with when each stops counting. */
export class UnknownTokens {
  private readonly until = new Map<string, number>();

  constructor(
    private readonly windowMs = UNKNOWN_TOKEN_WINDOW_MS,
    private readonly maxEntries = MAX_ENTRIES,
  ) {}

  has(tokenHash: string, now: number): boolean {
    const until = this.until.get(tokenHash);
    if (until === undefined) return false;
    if (until > now) return true;
    this.until.delete(tokenHash);
    return false;
  }

  add(tokenHash: string, now: number): void {
    // Re-inserting moves it to the end, so the first key is always the oldest entry.
    this.until.delete(tokenHash);
    this.until.set(tokenHash, now + this.windowMs);
    if (this.until.size > this.maxEntries) this.until.delete(this.until.keys().next().value!);
  }

  forget(tokenHash: string): void {
    this.until.delete(tokenHash);
  }

  get size(): number {
    return this.until.size;
  }
}
