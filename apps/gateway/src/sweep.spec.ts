import { FakeSocket } from '../../../test/support/fake-socket';
import { Connection } from './connection';
import { ConnectionRegistry } from './connection-registry';
import { MAX_SWEEP_GRACE_MS, Sweeper, sweepGraceMs } from './sweep';

function setup(graceMs = 0) {
  const registry = new ConnectionRegistry();
  const tokens = new Map<number, string>();
  const lastSeqs = new Map<number, number>();
  const asked: number[][] = [];
  let gate: Promise<void> = Promise.resolve();
  const mailbox = {
    lastSeqs: async (ids: readonly number[]) => {
      asked.push([...ids]);
      await gate;
      return new Map(lastSeqs);
    },
  };
  const agents = { tokenHashes: async () => new Map(tokens) };
  const revoked: Connection[] = [];
  const caughtUp: Array<[Connection, number]> = [];
  const warn = jest.fn();
  const sweeper = new Sweeper(
    registry,
    mailbox,
    agents,
    {
      revoke: (connection) => revoked.push(connection),
      catchUp: (connection, through) => caughtUp.push([connection, through]),
    },
    { warn },
    graceMs,
  );
  const open = (mailboxId: number, tokenHash: string, lastSeq: number, state: 'live' | 'starting' = 'live') => {
    const connection = new Connection(new FakeSocket().ws, mailboxId, tokenHash);
    connection.lastSeq = lastSeq;
    connection.state = state;
    registry.add(connection);
    return connection;
  };
  return {
    registry,
    tokens,
    lastSeqs,
    asked,
    sweeper,
    revoked,
    caughtUp,
    warn,
    open,
    hold: (p: Promise<void>) => {
      gate = p;
    },
  };
}

describe('Sweeper', () => {
  it('catches up a live socket behind Postgres, leaves current and starting ones alone', async () => {
    const { tokens, lastSeqs, sweeper, caughtUp, revoked, open } = setup();
    tokens.set(1, 'h1').set(2, 'h2');
    lastSeqs.set(1, 9).set(2, 4);
    const behind = open(1, 'h1', 7);
    open(1, 'h1', 7, 'starting'); // its start reads the seq itself
    open(2, 'h2', 4);
    await sweeper.sweep('sweep');
    expect(caughtUp).toEqual([[behind, 9]]);
    expect(revoked).toEqual([]);
  });

  it('revokes a socket whose token was rotated or whose agent is gone (a lost revoke)', async () => {
    const { tokens, lastSeqs, sweeper, revoked, caughtUp, open } = setup();
    tokens.set(1, 'rotated');
    lastSeqs.set(1, 9);
    const stale = open(1, 'h1', 1);
    const deleted = open(2, 'h2', 1);
    await sweeper.sweep('resync');
    expect(revoked).toEqual([stale, deleted]);
    expect(caughtUp).toEqual([]);
  });

  it('a mailbox first held while the queries ran is not judged on answers that do not cover it', async () => {
    const { tokens, lastSeqs, sweeper, revoked, open, asked, hold } = setup();
    tokens.set(1, 'h1');
    lastSeqs.set(1, 1);
    open(1, 'h1', 1);
    let answer: () => void = () => undefined;
    hold(new Promise<void>((resolve) => (answer = resolve)));
    const sweep = sweeper.sweep('sweep');
    open(2, 'h2', 0); // registered during the queries
    answer();
    await sweep;
    expect(asked).toEqual([[1]]);
    expect(revoked).toEqual([]);
  });

  it('runs one sweep at a time and none with no socket', async () => {
    const { tokens, sweeper, open, asked, hold } = setup();
    await sweeper.sweep('sweep');
    expect(asked).toEqual([]);
    tokens.set(1, 'h1');
    open(1, 'h1', 0);
    let answer: () => void = () => undefined;
    hold(new Promise<void>((resolve) => (answer = resolve)));
    const first = sweeper.sweep('sweep');
    await sweeper.sweep('resync');
    expect(asked).toHaveLength(1);
    answer();
    await first;
    await sweeper.sweep('sweep');
    expect(asked).toHaveLength(2);
  });

  it('a failed query is logged and the next sweep runs', async () => {
    const { open, warn, registry } = setup();
    open(1, 'h1', 0);
    const actions = { revoke: jest.fn(), catchUp: jest.fn() };
    const mailbox = { lastSeqs: () => Promise.reject(new Error('database down')) };
    const failing = new Sweeper(registry, mailbox, { tokenHashes: async () => new Map<number, string>() }, actions, {
      warn,
    });
    await failing.sweep('resync');
    expect(warn).toHaveBeenCalledWith('resync of held mailboxes failed: database down');
    await failing.sweep('sweep');
    expect(warn).toHaveBeenCalledTimes(2);
    expect(actions.revoke).not.toHaveBeenCalled();
  });

  describe('grace of a periodic sweep', () => {
    beforeEach(() => jest.useFakeTimers());
    afterEach(() => jest.useRealTimers());

    it('a socket that catches up through live frames within the grace gets no backfill', async () => {
      const { tokens, lastSeqs, sweeper, caughtUp, open } = setup(500);
      tokens.set(1, 'h1');
      lastSeqs.set(1, 9);
      const inFlight = open(1, 'h1', 7);
      await sweeper.sweep('sweep');
      expect(caughtUp).toEqual([]);
      inFlight.lastSeq = 9; // its live frames arrived
      jest.advanceTimersByTime(500);
      expect(caughtUp).toEqual([]);
    });

    it('one still behind the seq seen at the first check after the grace gets exactly one backfill', async () => {
      const { tokens, lastSeqs, sweeper, caughtUp, open } = setup(500);
      tokens.set(1, 'h1').set(2, 'h2');
      lastSeqs.set(1, 9).set(2, 5);
      const stuck = open(1, 'h1', 7);
      const partly = open(2, 'h2', 3);
      await sweeper.sweep('sweep');
      partly.lastSeq = 4; // some frames came, not all
      lastSeqs.set(1, 12); // later commits are the next sweep's business
      jest.advanceTimersByTime(499);
      expect(caughtUp).toEqual([]);
      jest.advanceTimersByTime(1);
      expect(caughtUp).toEqual([
        [stuck, 9],
        [partly, 5],
      ]);
      jest.advanceTimersByTime(10_000);
      expect(caughtUp).toHaveLength(2);
    });

    it('a socket closed during the grace, or a stopped sweeper, backfills nothing', async () => {
      const { tokens, lastSeqs, sweeper, caughtUp, open } = setup(500);
      tokens.set(1, 'h1');
      lastSeqs.set(1, 9);
      const closing = open(1, 'h1', 7);
      await sweeper.sweep('sweep');
      closing.closed = true;
      jest.advanceTimersByTime(500);
      expect(caughtUp).toEqual([]);
      closing.closed = false;
      await sweeper.sweep('sweep');
      sweeper.stop();
      jest.advanceTimersByTime(500);
      expect(caughtUp).toEqual([]);
    });

    it('a resync (after a Redis reconnect) backfills at once, with no grace', async () => {
      const { tokens, lastSeqs, sweeper, caughtUp, open } = setup(500);
      tokens.set(1, 'h1');
      lastSeqs.set(1, 9);
      const behind = open(1, 'h1', 7);
      await sweeper.sweep('resync');
      expect(caughtUp).toEqual([[behind, 9]]);
      jest.advanceTimersByTime(500);
      expect(caughtUp).toHaveLength(1);
    });

    it('the grace is half the sweep interval, at most 1 s', () => {
      expect(sweepGraceMs(100)).toBe(50);
      expect(sweepGraceMs(1_000)).toBe(500);
      expect(sweepGraceMs(5_000)).toBe(MAX_SWEEP_GRACE_MS);
      expect(MAX_SWEEP_GRACE_MS).toBe(1_000);
    });
  });
});
