import type { MailboxState } from '#db';
import { MailboxStateCache } from './mailbox-state-cache';

const state = (agent_id: number, last_seq: number): MailboxState => ({
  agent_id,
  last_seq,
  last_created_at: last_seq * 10,
});

describe('MailboxStateCache', () => {
  let clock = 1_000;
  const now = () => clock;
  beforeEach(() => (clock = 1_000));

  it('answers only when every mailbox is remembered', () => {
    const cache = new MailboxStateCache(now);
    cache.remember([state(1, 5), state(2, 7)]);
    expect(cache.statesOf([2, 1])).toEqual([state(2, 7), state(1, 5)]);
    expect(cache.statesOf([1, 3])).toBeUndefined();
  });

  it('takes per mailbox the newer of the remembered and the looked-up state, a looked-up one alone included', () => {
    const cache = new MailboxStateCache(now);
    cache.remember([state(1, 5), state(2, 7)]);
    const lookedUp = new Map([
      [1, state(1, 4)], // read before this node's last commit: the remembered one is newer
      [2, state(2, 9)], // another writer moved it on since this node's commit
      [3, state(3, 2)], // never written by this node
    ]);
    expect(cache.statesOf([1, 2, 3], lookedUp)).toEqual([state(1, 5), state(2, 9), state(3, 2)]);
    expect(cache.statesOf([3, 4], lookedUp)).toBeUndefined(); // 4 neither remembered nor looked up
  });

  it('a contended mailbox takes the locking path whatever its lookup read', () => {
    const cache = new MailboxStateCache(now, 100, 5_000);
    cache.remember([state(1, 5)]);
    expect(cache.settle([1], 'stale', [state(1, 6)])).toBe(false);
    const lookedUp = new Map([[1, state(1, 8)]]);
    expect(cache.statesOf([1], lookedUp)).toBeUndefined();
    clock += 5_000;
    expect(cache.statesOf([1], lookedUp)).toEqual([state(1, 8)]);
  });

  it('a written compare-and-set remembers the new states and reports the batch done', () => {
    const cache = new MailboxStateCache(now);
    cache.remember([state(1, 5)]);
    expect(cache.settle([1], 'written', [state(1, 6)])).toBe(true);
    expect(cache.statesOf([1])).toEqual([state(1, 6)]);
  });

  it('an id taken leaves the remembered states current (the locking path decides the batch)', () => {
    const cache = new MailboxStateCache(now);
    cache.remember([state(1, 5)]);
    expect(cache.settle([1], 'id_taken', [state(1, 6)])).toBe(false);
    expect(cache.statesOf([1])).toEqual([state(1, 5)]);
  });

  it('a stale mailbox is forgotten and stays on the locking path for contendedMs of the injected clock', () => {
    const cache = new MailboxStateCache(now, 100, 5_000);
    cache.remember([state(1, 5), state(2, 9)]);
    expect(cache.settle([1], 'stale', [state(1, 6)])).toBe(false);
    expect(cache.statesOf([1])).toBeUndefined();
    expect(cache.statesOf([2])).toEqual([state(2, 9)]);
    cache.remember([state(1, 8)]); // a locked commit meanwhile
    clock += 4_999;
    expect(cache.statesOf([1])).toBeUndefined();
    clock += 1;
    expect(cache.statesOf([1])).toEqual([state(1, 8)]);
  });

  it('forgets the mailboxes of a commit whose outcome is unknown', () => {
    const cache = new MailboxStateCache(now);
    cache.remember([state(1, 5), state(2, 9)]);
    cache.forget([1]);
    expect(cache.statesOf([1])).toBeUndefined();
    expect(cache.statesOf([2])).toEqual([state(2, 9)]);
  });

  it('keeps at most `max` mailboxes, dropping the least recently written', () => {
    const cache = new MailboxStateCache(now, 2);
    cache.remember([state(1, 1), state(2, 1)]);
    cache.remember([state(1, 2)]); // 1 is now the newest
    cache.remember([state(3, 1)]);
    expect(cache.statesOf([2])).toBeUndefined();
    expect(cache.statesOf([1, 3])).toEqual([state(1, 2), state(3, 1)]);
  });
});
