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
