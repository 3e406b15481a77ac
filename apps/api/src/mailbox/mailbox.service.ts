import { Injectable } from '@nestjs/common';
import { MailboxRepository } from '#db';
import { listingHeaderOf, type Agent, type Cursor, type MailboxQuery } from '#domain';
import { Metrics } from '#metrics';
import { validateRequest } from '#schemas';

/** Mailbox listings (ASMTP.md §3.5) and read marks (§3.6). Listing never changes read state. */
@Injectable()
export class MailboxService {
  constructor(
    private readonly mailbox: MailboxRepository,
    private readonly metrics: Metrics,
  ) {}

  /** The page as JSON text, timed as `roost_mailbox_list_duration_seconds{direction}` (success or not). */
  async list(agent: Agent, query: MailboxQuery): Promise<string> {
    const stop = this.metrics.mailboxListDuration.startTimer({ direction: query.direction });
    try {
      return await this.page(agent, query);
    } finally {
      stop();
    }
  }

  /** Stored headers are in push-frame order; each is re-keyed into the listing order (ASMTP.md §3.5). */
  private async page(agent: Agent, query: MailboxQuery): Promise<string> {
    const page = { order: query.order, limit: query.limit, after: query.after };
    let headers: string[];
    let last: Cursor | undefined;
    if (query.direction === 'in') {
      const rows = await this.mailbox.listIn(agent.id, page, query.unread);
      headers = rows.map((row) => listingHeaderOf(row.header));
      last = rows.at(-1) && { created_at: rows.at(-1)!.created_at, envelope_id: rows.at(-1)!.envelope_id };
    } else if (query.direction === 'out') {
      const rows = await this.mailbox.listOut(agent.id, page);
      headers = rows.map((row) => listingHeaderOf(row.header, row.self_addressed ? 'self' : 'out'));
      last = rows.at(-1) && { created_at: rows.at(-1)!.created_at, envelope_id: rows.at(-1)!.envelope_id };
    } else {
      const rows = await this.mailbox.listBoth(agent.id, page);
      headers = rows.map((row) =>
        row.read === null
          ? listingHeaderOf(row.header, 'out')
          : listingHeaderOf(row.header, row.sent ? 'self' : 'in', !row.read),
      );
      last = rows.at(-1) && { created_at: rows.at(-1)!.created_at, envelope_id: rows.at(-1)!.envelope_id };
    }
    const next = headers.length === query.limit && last ? JSON.stringify(last) : 'null';
    return `{"envelope_headers":[${headers.join(',')}],"next_cursor":${next}}`;
  }

  /** Ids that went from unread to read, in request order, each once (EXTENSIONS.md quirk 2). */
  async markRead(agent: Agent, body: Record<string, unknown>): Promise<{ read: string[] }> {
    const { ids } = validateRequest('mailbox-read', body);
    const unique = [...new Set(ids)];
    const transitioned = await this.mailbox.markRead(agent.id, unique, Date.now());
    return { read: unique.filter((id) => transitioned.has(id)) };
  }
}
