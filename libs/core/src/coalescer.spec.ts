import { Coalescer } from './coalescer';

/** A `run` whose batches the test releases by hand. */
function gatedRun() {
  const batches: Array<{ keys: number[]; release: (fail?: Error) => void }> = [];
  const run = (keys: number[]) =>
    new Promise<string[]>((resolve, reject) => {
      batches.push({ keys, release: (fail) => (fail ? reject(fail) : resolve(keys.map((key) => `v${key}`))) });
    });
  return { batches, run };
}

const flush = () => new Promise((resolve) => setImmediate(resolve));

describe('Coalescer', () => {
  it('runs a lone load at once, in a batch of its own', async () => {
    const { batches, run } = gatedRun();
    const coalescer = new Coalescer(run, 2, 10);
    const value = coalescer.load(1);
    expect(batches.map((b) => b.keys)).toEqual([[1]]);
    batches[0].release();
    await expect(value).resolves.toBe('v1');
  });

  it('loads beyond maxInFlight wait and share the next batch, each answered by position', async () => {
    const { batches, run } = gatedRun();
    const coalescer = new Coalescer(run, 2, 10);
    const values = [1, 2, 3, 4, 5].map((key) => coalescer.load(key));
    expect(batches.map((b) => b.keys)).toEqual([[1], [2]]);
    batches[0].release();
    await flush();
    expect(batches.map((b) => b.keys)).toEqual([[1], [2], [3, 4, 5]]);
    batches[1].release();
    batches[2].release();
    await expect(Promise.all(values)).resolves.toEqual(['v1', 'v2', 'v3', 'v4', 'v5']);
  });

  it('caps a batch at maxBatch keys', async () => {
    const { batches, run } = gatedRun();
    const coalescer = new Coalescer(run, 1, 2);
    const values = [1, 2, 3, 4, 5, 6].map((key) => coalescer.load(key));
    for (let i = 0; i < 4; i++) {
      batches[i].release();
      await flush();
    }
    expect(batches.map((b) => b.keys)).toEqual([[1], [2, 3], [4, 5], [6]]);
    await expect(Promise.all(values)).resolves.toEqual(['v1', 'v2', 'v3', 'v4', 'v5', 'v6']);
  });

  it('a failed batch rejects every load in it and none in other batches', async () => {
    const { batches, run } = gatedRun();
    const coalescer = new Coalescer(run, 1, 10);
    const first = coalescer.load(1);
    const rest = [2, 3].map((key) => coalescer.load(key));
    batches[0].release();
    await flush();
    batches[1].release(new Error('database down'));
    await expect(first).resolves.toBe('v1');
    for (const value of rest) await expect(value).rejects.toThrow('database down');
    const later = coalescer.load(4);
    batches[2].release();
    await expect(later).resolves.toBe('v4');
  });
});

describe('Coalescer with gather (embedded PGlite)', () => {
  it('starts a batch once a whole event-loop turn brought no new load, with every load until then', async () => {
    const { batches, run } = gatedRun();
    const coalescer = new Coalescer(run, 1, 10, true);
    const values = [1, 2].map((key) => coalescer.load(key));
    expect(batches).toEqual([]);
    await flush();
    // A load on the next turn (the next accepted connection's request) joins the same batch.
    values.push(coalescer.load(3));
    await flush();
    expect(batches).toEqual([]);
    await flush();
    expect(batches.map((b) => b.keys)).toEqual([[1, 2, 3]]);
    const later = coalescer.load(4);
    batches[0].release();
    await flush();
    await flush();
    expect(batches.map((b) => b.keys)).toEqual([[1, 2, 3], [4]]);
    batches[1].release();
    await expect(Promise.all([...values, later])).resolves.toEqual(['v1', 'v2', 'v3', 'v4']);
  });
});

describe("Coalescer with gather 'turn' (Postgres)", () => {
  it('starts a batch at the end of the turn, with every load of that turn, even with a slot free', async () => {
    const { batches, run } = gatedRun();
    const coalescer = new Coalescer(run, 2, 10, 'turn');
    const values = [1, 2, 3].map((key) => coalescer.load(key));
    expect(batches).toEqual([]);
    await flush();
    expect(batches.map((b) => b.keys)).toEqual([[1, 2, 3]]);
    // A load of a later turn takes the second slot on its own turn, without waiting for the first.
    values.push(coalescer.load(4));
    await flush();
    expect(batches.map((b) => b.keys)).toEqual([[1, 2, 3], [4]]);
    // Both slots busy: loads wait and share the batch that starts when one returns.
    values.push(coalescer.load(5), coalescer.load(6));
    await flush();
    expect(batches).toHaveLength(2);
    batches[1].release();
    await flush();
    expect(batches.map((b) => b.keys)).toEqual([[1, 2, 3], [4], [5, 6]]);
    batches[0].release();
    batches[2].release();
    await expect(Promise.all(values)).resolves.toEqual(['v1', 'v2', 'v3', 'v4', 'v5', 'v6']);
  });
});
