import { Controller, Delete, Get, HttpCode, Param, Patch, Post, UseGuards } from '@nestjs/common';
import type { Agent } from '#domain';
import { JsonBody } from '#http';
import { AgentGuard, CurrentAgent } from '../auth/guards';
import { SchedulesService } from './schedules.service';

@Controller('/schedules')
@UseGuards(AgentGuard)
export class SchedulesController {
  constructor(private readonly schedules: SchedulesService) {}

  @Post()
  @HttpCode(201)
  create(@CurrentAgent() agent: Agent, @JsonBody() body: Record<string, unknown>) {
    return this.schedules.create(agent, body);
  }

  @Get()
  list(@CurrentAgent() agent: Agent) {
    return this.schedules.list(agent);
  }

  @Get('/:id')
  get(@CurrentAgent() agent: Agent, @Param('id') id: string) {
    return this.schedules.get(agent, id);
  }

  @Patch('/:id')
  update(@CurrentAgent() agent: Agent, @Param('id') id: string, @JsonBody() body: Record<string, unknown>) {
    return this.schedules.update(agent, id, body);
  }

  @Delete('/:id')
  cancel(@CurrentAgent() agent: Agent, @Param('id') id: string) {
    return this.schedules.cancel(agent, id);
  }
}
