import { freePort } from '../../bench/free-port';

/**
 * The port picker the e2e, chaos and bench harnesses share. The kernel hands a released port out
 * again now and then (~240 repeats in 2,000 picks here): a chaos run that took six ports before
 * starting any node once got the same one for two nodes.
 */
describe('freePort', () => {
  it('never hands out the same port twice in one process', async () => {
    const ports: number[] = [];
    for (let i = 0; i < 2_000; i++) ports.push(await freePort());
    expect(new Set(ports).size).toBe(ports.length);
    expect(ports.every((port) => port > 0 && port < 65_536)).toBe(true);
  });
});
