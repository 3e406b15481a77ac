import { setTimeout as sleep } from 'node:timers/promises';

/**
 * Poll `probe` every `intervalMs` until it returns something other than `undefined` or `false`,
 * and return that; throw naming `what` after `timeoutMs`.
 */
export async function until<T>(
  probe: () => T | undefined | Promise<T | undefined>,
  timeoutMs: number,
  what: string,
  intervalMs = 50,
): Promise<Exclude<T, false>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined && value !== false) return value as Exclude<T, false>;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(intervalMs);
  }
}
