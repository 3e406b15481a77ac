import { Controller, Get, Header, HttpCode, Post, UseGuards } from '@nestjs/common';
import { parseMailboxQuery, type Agent, type QueryPairs } from '#domain';
import { JSON_CONTENT_TYPE, JsonBody, Query } from '#http';
import { AgentGuard, CurrentAgent } from '../auth/guards';
import { MailboxService } from './mailbox.service';

@Controller('/mailbox')
@UseGuards(AgentGuard)
export class MailboxController {
  constructor(private readonly mailbox: MailboxService) {}

  @Get()
  @Header('content-type', JSON_CONTENT_TYPE)
  list(@CurrentAgent() agent: Agent, @Query() query: QueryPairs): Promise<string> {
    return this.mailbox.list(agent, parseMailboxQuery(query));
  }

  @Post('/read')
  @HttpCode(200)
  read(@CurrentAgent() agent: Agent, @JsonBody() body: Record<string, unknown>) {
    return this.mailbox.markRead(agent, body);
  }
}
