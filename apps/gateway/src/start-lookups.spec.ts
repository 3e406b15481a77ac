import { StartLookups, START_BATCH_MAX } from './start-lookups';

/** Repositories whose token query the test answers by hand. */
function gatedRepositories() {
  const queries: Array<{ ids: number[]; release: (fail?: Error) => void }> = [];
  const tokens = new Map([
    [1, 'h1'],
    [2, 'h2'],
  ]);
  const agents = {
    tokenHashes: (ids: readonly number[]) =>
      new Promise<Map<number, string>>((resolve, reject) => {
        queries.push({ ids: [...ids], release: (fail) => (fail ? reject(fail) : resolve(tokens)) });
      }),
  };
  const mailbox = { lastSeqs: async () => new Map([[1, 10]]) };
  return { queries, agents, mailbox };
}

const flush = () => new Promise((resolve) => setImmediate(resolve));

describe('StartLookups', () => {
  it('reads a lone socket at once; sockets starting meanwhile share the next query pair, each answered for its mailbox', async () => {
    const { queries, agents, mailbox } = gatedRepositories();
    const lookups = new StartLookups(agents, mailbox);
    const first = lookups.lookup(1);
    expect(queries.map((q) => q.ids)).toEqual([[1]]);
    const later = [lookups.lookup(2), lookups.lookup(1), lookups.lookup(3)];
    expect(queries).toHaveLength(1); // one batch at a time
    queries[0].release();
    await expect(first).resolves.toEqual({ tokenHash: 'h1', lastSeq: 10 });
    await flush();
    expect(queries.map((q) => q.ids)).toEqual([[1], [2, 1, 3]]); // each mailbox asked once
    queries[1].release();
    await expect(Promise.all(later)).resolves.toEqual([
      { tokenHash: 'h2', lastSeq: 0 },
      { tokenHash: 'h1', lastSeq: 10 },
      { tokenHash: undefined, lastSeq: 0 }, // a deleted agent: no token, the socket is revoked
    ]);
  });

  it('a failed query fails the sockets of its batch only', async () => {
    const { queries, agents, mailbox } = gatedRepositories();
    const lookups = new StartLookups(agents, mailbox);
    const first = lookups.lookup(1);
    queries[0].release(new Error('database down'));
    await expect(first).rejects.toThrow('database down');
    const next = lookups.lookup(2);
    queries[1].release();
    await expect(next).resolves.toEqual({ tokenHash: 'h2', lastSeq: 0 });
  });

  it('caps a batch at START_BATCH_MAX sockets', async () => {
    const { queries, agents, mailbox } = gatedRepositories();
    const lookups = new StartLookups(agents, mailbox);
    const all = Array.from({ length: START_BATCH_MAX + 2 }, (_, i) => lookups.lookup(i));
    for (let i = 0; i < 3; i++) {
      queries[i].release();
      await flush();
    }
    expect(queries.map((q) => q.ids.length)).toEqual([1, START_BATCH_MAX, 1]);
    await expect(Promise.all(all)).resolves.toHaveLength(START_BATCH_MAX + 2);
  });
});
