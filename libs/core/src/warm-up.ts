import { performance } from 'node:perf_hooks';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { ulid, warmGuard } from '#domain';
import { compileRequestValidators } from '#schemas';
import { parsePostedEnvelope } from './envelope-input';

/**
 * What the first `POST /messages` of a fresh api process would otherwise compile or build while
 * every request behind it waits: Ajv's validators (each compiled on first use: 100–350 ms of one
 * event-loop turn), the code Ajv generated (V8 compiles it on its first runs: ~1.2 ms), and the
 * content guard's automaton and patterns (~4 ms on a message that names no credential, ~55 ms over
 * the first two that do: `warmGuard`). Pure and local: nothing is stored, sent or counted. Called
 * at start-up, before the process listens (~250 ms), so a restarted pod's first senders do not pay
 * for it.
 */
export function warmAcceptPath(): void {
  compileRequestValidators();
  const bare = { id: ulid(), to: ['@warm.up'], date_ms: Date.now(), content_parts: [{ type: 'text', text: 'warm' }] };
  const full = {
    ...bare,
    cc: ['@warm.cc'],
    subject: 'warm',
    in_reply_to: ulid(),
    content_parts: [
      { type: 'text', text: 'warm' },
      { type: 'data', data: { warm: true } },
    ],
  };
  for (let run = 0; run < 2; run++) for (const body of [bare, full]) parsePostedEnvelope(body);
  warmGuard();
}

/**
 * One full garbage collection, at the end of start-up (after the modules, the database, the bus and
 * the warm-up are ready, before the process listens): the start-up's garbage is collected while no
 * request waits. Otherwise V8's first major collection came in the first seconds of load, when the
 * old generation, full of start-up garbage, first reached its initial limit (one process,
 * `push-all`: 59 → 34 MB, a 6.4 ms pause plus 13.5 ms of incremental marking in the first second).
 * `gc` is V8's own (`--expose-gc`): the global one when the process runs with that flag, else taken
 * from a new context with the flag set for that moment (and hidden again only when it was hidden
 * before), as jest's leak detector does. Returns the ms it took, or undefined when V8 refused.
 */
export function collectStartupGarbage(): number | undefined {
  const started = performance.now();
  let gc = (globalThis as { gc?: () => void }).gc;
  if (typeof gc !== 'function') {
    let hidden = true;
    try {
      hidden = runInNewContext('typeof gc') !== 'function';
      setFlagsFromString('--expose-gc');
      gc = runInNewContext('gc') as () => void;
    } catch {
      return undefined;
    } finally {
      if (hidden) setFlagsFromString('--no-expose-gc');
    }
    if (typeof gc !== 'function') return undefined;
  }
  gc();
  return performance.now() - started;
}
