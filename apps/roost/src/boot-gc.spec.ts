import { collectBootGarbage } from './boot-gc';

const nextTurn = () => new Promise((resolve) => setImmediate(resolve));

describe('collectBootGarbage', () => {
  it('runs a full collection: an object only a WeakRef holds is gone after it', async () => {
    const ref = new WeakRef<object>({ payload: 'x'.repeat(1024).split('') });
    await nextTurn(); // a WeakRef keeps its target alive until the end of the job that made or read it
    expect(ref.deref()).toBeDefined();
    await nextTurn();
    const ms = collectBootGarbage();
    expect(typeof ms).toBe('number');
    expect(ms).toBeGreaterThanOrEqual(0);
    await nextTurn();
    expect(ref.deref()).toBeUndefined();
  });

  it('leaves no gc function on this process global', () => {
    collectBootGarbage();
    expect((globalThis as { gc?: unknown }).gc).toBeUndefined();
  });
});
