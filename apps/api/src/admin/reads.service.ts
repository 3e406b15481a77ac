import { Injectable } from '@nestjs/common';
import type { FileContent } from '#db';
import { badRequest, firstParam, parseMailboxQuery, type Agent, type QueryPairs } from '#domain';
import { FilesService } from '../files/files.service';
import { MailboxService } from '../mailbox/mailbox.service';
import { MessagesService } from '../messages/messages.service';
import { ReceiptsService } from '../receipts/receipts.service';
import { SchedulesService } from '../schedules/schedules.service';

/**
 * Admin reads of one agent's data (EXTENSIONS.md §5, docs/console-api.md): the agent-side services
 * called with the target agent's identity, so each answer is exactly what the agent itself would
 * get, except that nothing is marked read (messages are fetched as a peek).
 */
@Injectable()
export class ReadsService {
  constructor(
    private readonly mailbox: MailboxService,
    private readonly messages: MessagesService,
    private readonly receipts: ReceiptsService,
    private readonly files: FilesService,
    private readonly schedules: SchedulesService,
  ) {}

  mailboxPage(agent: Agent, query: QueryPairs): Promise<string> {
    return this.mailbox.list(agent, parseMailboxQuery(query));
  }

  message(agent: Agent, id: string): Promise<string> {
    return this.messages.fetchOne(agent, id, true);
  }

  receiptsOf(agent: Agent, query: QueryPairs) {
    return this.receipts.list(agent, envelopeIdOf(query));
  }

  statusOf(agent: Agent, query: QueryPairs) {
    return this.receipts.status(agent, envelopeIdOf(query));
  }

  file(agent: Agent, id: string): Promise<FileContent> {
    return this.files.download(agent, id);
  }

  schedulesOf(agent: Agent) {
    return this.schedules.list(agent);
  }

  /**
   * Pause or resume as the agent's `PATCH /schedules/{id}` (`{"status":"paused"|"active"}`); the
   * console's `{"paused":true|false}` is the same request.
   */
  updateSchedule(agent: Agent, id: string, body: Record<string, unknown>) {
    const keys = Object.keys(body);
    if (keys.length === 1 && keys[0] === 'paused' && typeof body.paused === 'boolean') {
      return this.schedules.update(agent, id, { status: body.paused ? 'paused' : 'active' });
    }
    return this.schedules.update(agent, id, body);
  }

  cancelSchedule(agent: Agent, id: string) {
    return this.schedules.cancel(agent, id);
  }
}

/** `?id=<envelope id>` of the receipts and status reads (the agent's routes take it in the path). */
function envelopeIdOf(query: QueryPairs): string {
  const id = firstParam(query, 'id');
  if (id === undefined) throw badRequest('INVALID_QUERY', 'id is required');
  return id;
}
