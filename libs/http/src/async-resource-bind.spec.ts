import { AsyncLocalStorage, AsyncResource } from 'node:async_hooks';
import { asyncResourceBindIsDeprecatedKind, useCurrentAsyncResourceBind } from './async-resource-bind';

describe('AsyncResource#bind without the deprecated asyncResource property', () => {
  const original = AsyncResource.prototype.bind;
  const nodeMajor = Number(process.versions.node.split('.')[0]);

  beforeAll(() => useCurrentAsyncResourceBind());
  afterAll(() => {
    AsyncResource.prototype.bind = original;
  });

  it('replaces a bind that attaches the property (Node 20), and is then no longer needed', () => {
    // Another suite in this jest worker may have installed it already: judge by what is there now.
    if (nodeMajor === 20) expect(AsyncResource.prototype.bind.toString()).not.toContain('asyncResource');
    expect(asyncResourceBindIsDeprecatedKind()).toBe(false);
    const before = AsyncResource.prototype.bind;
    useCurrentAsyncResourceBind(); // idempotent
    expect(AsyncResource.prototype.bind).toBe(before);
  });

  it('runs the function in the async context the resource was created in, however it is called', async () => {
    const storage = new AsyncLocalStorage<string>();
    const resource = storage.run('at creation', () => new AsyncResource('t'));
    const bound = resource.bind(() => storage.getStore());
    expect(storage.run('at call', () => bound())).toBe('at creation');
    expect(bound()).toBe('at creation');
    expect(await new Promise((resolve) => setImmediate(() => resolve(bound())))).toBe('at creation');
    // Static bind: the context current at bind time.
    const staticBound = storage.run('static', () => AsyncResource.bind(() => storage.getStore()));
    expect(staticBound()).toBe('static');
  });

  it('passes arguments, the return value and exceptions through, and keeps the length', () => {
    const resource = new AsyncResource('t');
    const add = resource.bind((a: number, b: number) => a + b);
    expect(add(2, 3)).toBe(5);
    expect(add.length).toBe(2);
    expect(Object.getOwnPropertyDescriptor(add, 'asyncResource')).toBeUndefined();
    const fails = resource.bind(() => {
      throw new Error('inside');
    });
    expect(() => fails()).toThrow('inside');
  });

  it('forwards the call-site this without thisArg, and binds thisArg when given', () => {
    const resource = new AsyncResource('t');
    function whoAmI(this: { name: string } | undefined) {
      return this?.name;
    }
    const receiver = { name: 'call site', whoAmI: resource.bind(whoAmI) };
    expect(receiver.whoAmI()).toBe('call site');
    // Node's types omit thisArg, which the implementation takes.
    const fixed = (resource.bind as (fn: typeof whoAmI, thisArg: unknown) => typeof whoAmI)(whoAmI, { name: 'bound' });
    expect(fixed.call({ name: 'call site' })).toBe('bound');
  });

  it('refuses a non-function with ERR_INVALID_ARG_TYPE, as Node does', () => {
    const resource = new AsyncResource('t');
    expect(() => resource.bind('nope' as unknown as () => void)).toThrow(
      expect.objectContaining({ code: 'ERR_INVALID_ARG_TYPE' }),
    );
    expect(() => original.call(resource, 'nope' as unknown as () => void)).toThrow(
      expect.objectContaining({ code: 'ERR_INVALID_ARG_TYPE' }),
    );
  });
});
