import { Injectable } from '@nestjs/common';
import { MailboxRepository } from '#db';
import { badRequest, isEnvelopeId, notFound, type Agent } from '#domain';

/**
 * Reading stored envelopes as their byte-exact stored JSON text. A recipient's read marks its own
 * entry read; a sender reading its own envelope (Roost extension) marks nothing.
 */
@Injectable()
export class MessagesService {
  constructor(private readonly mailbox: MailboxRepository) {}

  async fetchOne(agent: Agent, id: string, peek = false): Promise<string> {
    if (!isEnvelopeId(id)) throw badRequest('INVALID_ENVELOPE_ID', 'not an envelope id');
    const [body] = await this.fetch(agent, [id], peek);
    if (body === undefined) throw notFound();
    return body;
  }

  /** Bodies of `ids` the agent may read, in request order (`ids` already de-duplicated); `peek` marks nothing. */
  async fetch(agent: Agent, ids: readonly string[], peek = false): Promise<string[]> {
    const rows = await this.mailbox.bodiesFor(agent.id, ids);
    if (rows.length === 0) return [];
    if (!peek)
      await this.mailbox.markRead(
        agent.id,
        rows.map((row) => row.id),
        Date.now(),
      );
    const bodies = new Map(rows.map((row) => [row.id, row.body]));
    return ids.filter((id) => bodies.has(id)).map((id) => bodies.get(id)!);
  }
}
