import { expectStatus } from '../assert';
import type { Agent, T } from '../runner';

/** Ids of `agent`'s `in` feed, oldest first (one page of up to 1000). */
export async function inbox(t: T, agent: Agent, query = ''): Promise<string[]> {
  const reply = await t.http.get(`/mailbox?limit=1000${query}`, agent.token);
  expectStatus(reply, 200, `GET /mailbox of ${agent.handle}`);
  return reply.body.envelope_headers.map((h: { id: string }) => h.id);
}

/** Ids of the unread `in` entries. */
export const unread = (t: T, agent: Agent) => inbox(t, agent, '&unread=true');

/** Ids of the read `in` entries. */
export const read = (t: T, agent: Agent) => inbox(t, agent, '&unread=false');

/** POST /agents/me/allowlist that must succeed. */
export async function allow(t: T, agent: Agent, entries: string[]): Promise<void> {
  expectStatus(
    await t.http.post('/agents/me/allowlist', { entries }, agent.token),
    200,
    `allowlist of ${agent.handle}`,
  );
}

/** Whether the id is still free: an unrelated envelope with that id is accepted (202) by `by`. */
export async function idIsFree(t: T, by: Agent, to: string, id: string): Promise<boolean> {
  const reply = await t.send(by, {
    id,
    to: [to],
    date_ms: Date.now(),
    content_parts: [{ type: 'text', text: 'probe' }],
  });
  return reply.status === 202;
}
