import { Controller, Get, HttpCode, Param, Post, UseGuards } from '@nestjs/common';
import type { Agent } from '#domain';
import { JsonBody } from '#http';
import { AgentGuard, CurrentAgent } from '../auth/guards';
import { ReceiptsService } from './receipts.service';

/** `/messages/{id}/receipts` and `/messages/{id}/status` (EXTENSIONS.md §2). */
@Controller('/messages/:id')
@UseGuards(AgentGuard)
export class ReceiptsController {
  constructor(private readonly receipts: ReceiptsService) {}

  @Post('/receipts')
  @HttpCode(201)
  post(@CurrentAgent() agent: Agent, @Param('id') id: string, @JsonBody() body: Record<string, unknown>) {
    return this.receipts.post(agent, id, body);
  }

  @Get('/receipts')
  list(@CurrentAgent() agent: Agent, @Param('id') id: string) {
    return this.receipts.list(agent, id);
  }

  @Get('/status')
  status(@CurrentAgent() agent: Agent, @Param('id') id: string) {
    return this.receipts.status(agent, id);
  }
}
