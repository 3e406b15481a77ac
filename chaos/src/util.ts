import { setTimeout as delay } from 'node:timers/promises';

/** Small helpers shared by the chaos runner's parts. */

/** Node's timer, with a deadline already past (a negative wait) resolving at once. */
export const sleep = (ms: number): Promise<void> => delay(Math.max(0, ms));

/** A seeded PRNG (mulberry32): the same seed picks the same faults, targets and recipients. */
export class Random {
  private state: number;

  constructor(readonly seed: number) {
    this.state = seed >>> 0;
  }

  next(): number {
    this.state = (this.state + 0x6d2b79f5) >>> 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }

  /** A float in [min, max). */
  between(min: number, max: number): number {
    return min + (max - min) * this.next();
  }

  int(min: number, maxInclusive: number): number {
    return Math.floor(this.between(min, maxInclusive + 1));
  }

  pick<T>(items: readonly T[]): T {
    return items[Math.floor(this.next() * items.length)];
  }

  shuffle<T>(items: readonly T[]): T[] {
    const out = [...items];
    for (let i = out.length - 1; i > 0; i--) {
      const j = Math.floor(this.next() * (i + 1));
      [out[i], out[j]] = [out[j], out[i]];
    }
    return out;
  }
}

const started = Date.now();

/** Seconds since the runner started, for logs and the fault record. */
export const elapsed = (at: number = Date.now()) => Math.round((at - started) / 100) / 10;

export function log(message: string): void {
  process.stderr.write(`[chaos ${elapsed().toFixed(1).padStart(6)}s] ${message}\n`);
}

/** `fetch` with a deadline; resolves with the status and the parsed JSON body (if any). */
export async function request(
  method: string,
  url: string,
  options: { token?: string; body?: unknown; timeoutMs?: number } = {},
): Promise<{ status: number; body: any }> {
  const headers: Record<string, string> = {};
  if (options.token) headers.authorization = `Bearer ${options.token}`;
  if (options.body !== undefined) headers['content-type'] = 'application/json';
  const response = await fetch(url, {
    method,
    headers,
    body:
      options.body === undefined
        ? undefined
        : typeof options.body === 'string'
          ? options.body
          : JSON.stringify(options.body),
    signal: AbortSignal.timeout(options.timeoutMs ?? 15_000),
  });
  const text = await response.text();
  let body: unknown = text;
  try {
    body = text === '' ? null : JSON.parse(text);
  } catch {
    // not JSON
  }
  return { status: response.status, body };
}
