import { loadConfig } from '#config';
import { AsmtpError, unauthorized } from '#domain';
import { Metrics } from '#metrics';
import { AuthFailLimiter } from './auth-fail-limiter';

/** Embedded (no Redis): every bucket is this process's own. */
describe('AuthFailLimiter without Redis', () => {
  const metrics = new Metrics();
  const limiter = new AuthFailLimiter(loadConfig({ ROOST_AUTH_FAIL_LIMIT_PER_S: '2' }), metrics);
  const failing = () => Promise.reject(unauthorized('unknown agent bearer'));
  const status = (promise: Promise<unknown>) =>
    promise.then(
      () => 200,
      (error: AsmtpError) => error.status,
    );

  it('lets 5× the rate fail with 401, then answers 429 with Retry-After for every request of that address', async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 12; i++) statuses.push(await status(limiter.guard('192.0.2.1', failing)));
    expect(statuses.slice(0, 10)).toEqual(Array(10).fill(401));
    expect(statuses.slice(10)).toEqual([429, 429]);
    const refusal = await limiter.guard('192.0.2.1', () => Promise.resolve('ok')).catch((error: AsmtpError) => error);
    expect(refusal).toBeInstanceOf(AsmtpError);
    expect((refusal as AsmtpError).body()).toEqual({ error: { code: 'RATE_LIMITED', message: expect.any(String) } });
    expect((refusal as AsmtpError).headers?.['retry-after']).toMatch(/^[1-9]\d*$/);
    expect(await status(limiter.guard('192.0.2.2', () => Promise.resolve('ok')))).toBe(200);
    expect((await metrics.rateLimited.get()).values.find((value) => value.labels.limit === 'auth_fail')?.value).toBe(3);
  });

  it('only 401s count: an outage (503) or success takes nothing', async () => {
    for (let i = 0; i < 20; i++) {
      expect(
        await status(limiter.guard('192.0.2.3', () => Promise.reject(new AsmtpError(503, 'UNAVAILABLE', 'down')))),
      ).toBe(503);
      expect(await status(limiter.guard('192.0.2.3', () => Promise.resolve('ok')))).toBe(200);
    }
    expect(await status(limiter.guard('192.0.2.3', failing))).toBe(401);
  });

  it('0 disables it', async () => {
    const off = new AuthFailLimiter(loadConfig({ ROOST_AUTH_FAIL_LIMIT_PER_S: '0' }), new Metrics());
    for (let i = 0; i < 100; i++) expect(await status(off.guard('192.0.2.4', failing))).toBe(401);
  });
});
