import { loadConfig } from '#config';
import { AsmtpError } from '#domain';
import { Metrics } from '#metrics';
import { SocketLeases } from './socket-leases';

/** Embedded (no Redis), the same path a gateway takes while Redis is down: the cap per gateway. */
describe('SocketLeases without Redis', () => {
  it('grants up to ROOST_WS_MAX_PER_AGENT per agent, refuses 429 with Retry-After past it, frees a slot on release', async () => {
    const metrics = new Metrics();
    const leases = new SocketLeases(loadConfig({ ROOST_WS_MAX_PER_AGENT: '2' }), metrics);
    const first = await leases.acquire(1);
    await leases.acquire(1);
    const refused = await leases.acquire(1).catch((error: AsmtpError) => error);
    expect(refused).toBeInstanceOf(AsmtpError);
    expect((refused as AsmtpError).status).toBe(429);
    expect((refused as AsmtpError).code).toBe('RATE_LIMITED');
    expect((refused as AsmtpError).headers?.['retry-after']).toMatch(/^[1-9]\d*$/);
    await expect(leases.acquire(2)).resolves.toBeDefined();
    leases.release(first);
    leases.release(first); // twice is harmless
    await expect(leases.acquire(1)).resolves.toBeDefined();
    await expect(leases.acquire(1)).rejects.toBeInstanceOf(AsmtpError);
    expect((await metrics.rateLimited.get()).values.find((value) => value.labels.limit === 'ws')?.value).toBe(2);
  });

  it('0 disables the cap', async () => {
    const leases = new SocketLeases(loadConfig({ ROOST_WS_MAX_PER_AGENT: '0' }), new Metrics());
    for (let i = 0; i < 50; i++) await expect(leases.acquire(1)).resolves.toBeUndefined();
  });
});
