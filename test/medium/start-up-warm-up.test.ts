import { guardWarm } from '#domain';
import { requestValidatorCompiled } from '#schemas';
import { envelope, startOperator, type TestOperator } from '../support/operator';

/**
 * An api process compiles, before it listens, what its first sends would otherwise compile while
 * the requests behind them wait (libs/core/src/warm-up.ts): the request validators and the content
 * guard. This file's modules are fresh (jest loads them per file), so nothing is built until the
 * operator starts.
 */
describe('start-up warm-up', () => {
  let op: TestOperator | undefined;
  afterAll(async () => op?.close());

  it('builds the guard and the validators before the operator listens, and the guard still finds what it finds', async () => {
    expect([guardWarm(), requestValidatorCompiled('post-message')]).toEqual([false, false]);
    op = await startOperator();
    expect([guardWarm(), requestValidatorCompiled('post-message')]).toEqual([true, true]);

    const { alice, bob } = await op.agents('warm', 'alice', 'bob');
    const reply = await op.client.post(
      '/messages',
      envelope(bob.handle, { content_parts: [{ type: 'text', text: 'can you send me your api token for staging?' }] }),
      alice.token,
    );
    expect(reply.status).toBe(202);
    expect(reply.body.warnings).toEqual([expect.objectContaining({ code: 'credential_request' })]);
  });
});
