import { Injectable, Logger } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { InjectConfig, type Config } from '#config';
import type { Agent } from '#domain';
import { RoostClient, type HttpResponse, type WireRequest } from '#client';
import { MailWatchService } from './mail-watch.service';

/* eslint-disable @typescript-eslint/no-require-imports -- lazy load, see below */
// The MCP SDK (and zod) load on the first /mcp request: an api node that serves none never pays for them at start-up.
const sdk = () => ({
  ...(require('@modelcontextprotocol/sdk/server/streamableHttp.js') as typeof import('@modelcontextprotocol/sdk/server/streamableHttp.js')),
  ...(require('#mcp') as typeof import('#mcp')),
});
/* eslint-enable @typescript-eslint/no-require-imports */

/** `wait_for_mail` ends this long before the socket's idle timeout (ROOST_HTTP_REQUEST_TIMEOUT_MS). */
const WAIT_MARGIN_MS = 2_000;

/**
 * Streamable HTTP MCP (EXTENSIONS.md §8), stateless: each POST gets its own server and transport,
 * so any api node answers any request. The tools are the same as `roost mcp`'s: they call this
 * node's own REST routes in process (Fastify inject) with the caller's bearer, so validation, rate
 * limits, logs and metrics are exactly the wire's.
 */
@Injectable()
export class McpService {
  private readonly logger = new Logger('mcp');

  constructor(
    private readonly adapterHost: HttpAdapterHost,
    private readonly watch: MailWatchService,
    @InjectConfig() private readonly config: Config,
  ) {}

  async handle(
    agent: Agent,
    token: string,
    request: FastifyRequest,
    reply: FastifyReply,
    body: unknown,
  ): Promise<void> {
    const { createRoostMcpServer, StreamableHTTPServerTransport } = sdk();
    const client = new RoostClient({
      url: 'http://roost.mcp',
      token,
      userAgent: 'roost-mcp',
      dispatch: (wire) => this.inject(wire),
    });
    const server = createRoostMcpServer({
      client,
      agent: agent.handle,
      watch: this.watch.for(agent.id),
      maxWaitMs: Math.max(1_000, this.config.http.requestTimeoutMs - WAIT_MARGIN_MS),
    });
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    reply.hijack(); // the transport writes the response itself
    reply.raw.on('close', () => {
      void transport.close();
      void server.close();
    });
    try {
      await server.connect(transport);
      await transport.handleRequest(request.raw, reply.raw, body);
    } catch (error) {
      this.logger.error(`MCP request failed: ${(error as Error).message}`);
      if (!reply.raw.headersSent) {
        reply.raw.writeHead(500, { 'content-type': 'application/json; charset=utf-8' });
        reply.raw.end(JSON.stringify({ error: { code: 'INTERNAL_ERROR', message: 'internal error' } }));
      }
    }
  }

  private async inject(wire: WireRequest): Promise<HttpResponse> {
    const fastify = this.adapterHost.httpAdapter.getInstance<FastifyInstance>();
    const headers: Record<string, string> = {};
    for (const [key, value] of Object.entries(wire.headers)) headers[key] = String(value);
    const res = await fastify.inject({
      method: wire.method as 'GET',
      url: `${wire.url.pathname}${wire.url.search}`,
      headers,
      ...(wire.body ? { payload: wire.body } : {}),
    });
    return { status: res.statusCode, headers: res.headers as HttpResponse['headers'], body: res.rawPayload };
  }
}
