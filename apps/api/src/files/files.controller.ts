import { Controller, Get, HttpCode, Param, Post, Req, Res, UseGuards } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Agent } from '#domain';
import { rawBody } from '#http';
import { AgentGuard, CurrentAgent } from '../auth/guards';
import { FilesService } from './files.service';

@Controller('/files')
@UseGuards(AgentGuard)
export class FilesController {
  constructor(private readonly files: FilesService) {}

  @Post()
  @HttpCode(201)
  upload(@CurrentAgent() agent: Agent, @Req() request: FastifyRequest) {
    const body = rawBody(request);
    return this.files.upload(agent, request.headers['content-type'], body.bytes, body.tooLarge);
  }

  @Get('/:id')
  async download(@CurrentAgent() agent: Agent, @Param('id') id: string, @Res() reply: FastifyReply): Promise<void> {
    const file = await this.files.download(agent, id);
    await reply
      .code(200)
      .header('content-type', file.content_type)
      .header('content-disposition', `attachment; filename="${file.filename.replace(/"/g, '')}"`)
      .send(file.bytes);
  }
}
